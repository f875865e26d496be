// Command fakegpu stands in for a node's NVIDIA GPUs, which this machine
// does not have, in the node end-to-end tests. The cards are lines of a
// file, in the columns of the agent's nvidia-smi query (index, uuid, name,
// memory.total, memory.used, utilization.gpu, clocks.max.sm, compute_cap).
// It is one static binary with three jobs:
//
//   - nvidia-smi (the binary called nvidia-smi, or `fakegpu nvidia-smi`):
//     prints the cards for `--query-gpu=... --format=csv,noheader,nounits`
//     and `-L`, only those NVIDIA_VISIBLE_DEVICES names ("all" or unset:
//     every card), numbered from 0 as a container sees them. The cards
//     file is $AISCHED_FAKE_GPUS, else CardsPath.
//   - runtime: what NVIDIA's container runtime does for a container that
//     asks for GPUs, reduced to what the tests read: for `create`, when the
//     bundle's process sets NVIDIA_VISIBLE_DEVICES (not "void" or "none"),
//     it bind-mounts this binary at /usr/bin/nvidia-smi and the cards file
//     at CardsPath, read-only; then it runs runc with the same arguments.
//   - device-plugin: a device plugin on the kubelet's device-plugin API
//     (v1beta1) that advertises the cards as nvidia.com/gpu, by UUID, and
//     gives a container its devices in NVIDIA_VISIBLE_DEVICES, as NVIDIA's
//     device plugin does with its envvar strategy.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// CardsPath is where the runtime puts the cards file in a container, and
// where nvidia-smi reads it without $AISCHED_FAKE_GPUS.
const CardsPath = "/run/aisched-fake-gpu/gpus.csv"

func main() {
	cmd, args := filepath.Base(os.Args[0]), os.Args[1:]
	if cmd != "nvidia-smi" {
		if len(args) == 0 {
			fail(2, "usage: fakegpu nvidia-smi ARGS | runtime --gpus FILE --runc PATH -- RUNC-ARGS | device-plugin --gpus FILE --dir DIR")
		}
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "nvidia-smi":
		err = nvidiaSMI(args)
	case "runtime":
		err = runtime(args)
	case "device-plugin":
		err = devicePlugin(args)
	default:
		fail(2, fmt.Sprintf("unknown command %q", cmd))
	}
	if err != nil {
		fail(1, err.Error())
	}
}

func fail(code int, msg string) {
	fmt.Fprintln(os.Stderr, "fakegpu:", msg)
	os.Exit(code)
}

// card is one line of the cards file.
type card struct {
	fields []string // the query's columns
}

func (c card) uuid() string { return c.fields[1] }
func (c card) name() string { return c.fields[2] }

func readCards(path string) ([]card, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var cards []card
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		fields := strings.Split(line, ",")
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		if len(fields) != 8 {
			return nil, fmt.Errorf("%s: %q: want 8 columns", path, line)
		}
		cards = append(cards, card{fields})
	}
	return cards, sc.Err()
}

// visible filters cards by NVIDIA_VISIBLE_DEVICES (UUIDs or indices).
func visible(cards []card, env string) []card {
	if env == "" || env == "all" {
		return cards
	}
	var out []card
	for _, v := range strings.Split(env, ",") {
		v = strings.TrimSpace(v)
		for i, c := range cards {
			if c.uuid() == v || strconv.Itoa(i) == v {
				out = append(out, c)
			}
		}
	}
	return out
}

func nvidiaSMI(args []string) error {
	path := os.Getenv("AISCHED_FAKE_GPUS")
	if path == "" {
		path = CardsPath
	}
	all, err := readCards(path)
	if err != nil {
		// As nvidia-smi without a driver: the agent reads "no GPUs".
		fmt.Println("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
		os.Exit(9)
	}
	cards := visible(all, os.Getenv("NVIDIA_VISIBLE_DEVICES"))
	if slices.Contains(args, "-L") {
		for i, c := range cards {
			fmt.Printf("GPU %d: %s (UUID: %s)\n", i, c.name(), c.uuid())
		}
		return nil
	}
	var query string
	for _, a := range args {
		if q, ok := strings.CutPrefix(a, "--query-gpu="); ok {
			query = q
		}
	}
	if query == "" {
		return errors.New("nvidia-smi: want -L or --query-gpu=... --format=csv,noheader,nounits")
	}
	n := len(strings.Split(query, ","))
	if n > 8 {
		return fmt.Errorf("nvidia-smi: %d fields queried, the stand-in knows 8", n)
	}
	for i, c := range cards {
		fields := slices.Clone(c.fields[:n])
		fields[0] = strconv.Itoa(i)
		fmt.Println(strings.Join(fields, ", "))
	}
	return nil
}

// runtime edits the bundle of a container that asks for GPUs, then execs runc.
func runtime(args []string) error {
	fs := flag.NewFlagSet("runtime", flag.ContinueOnError)
	gpus := fs.String("gpus", "", "the node's cards file")
	runc := fs.String("runc", "runc", "the runc binary")
	if err := fs.Parse(args); err != nil {
		return err
	}
	runcArgs := fs.Args()
	if i := slices.Index(runcArgs, "create"); i >= 0 {
		bundle := "."
		for j := i; j < len(runcArgs)-1; j++ {
			if runcArgs[j] == "--bundle" || runcArgs[j] == "-b" {
				bundle = runcArgs[j+1]
			}
		}
		if err := inject(filepath.Join(bundle, "config.json"), *gpus); err != nil {
			return err
		}
	}
	path, err := execPath(*runc)
	if err != nil {
		return err
	}
	return syscall.Exec(path, append([]string{"runc"}, runcArgs...), os.Environ())
}

func execPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if p := filepath.Join(dir, name); isFile(p) {
			return p, nil
		}
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		if p := filepath.Join(dir, name); isFile(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// inject adds the nvidia-smi stand-in and the cards file to the OCI spec
// at path when its process asks for GPUs. The spec is edited as a generic
// JSON document, so that nothing of it is lost.
func inject(path, gpus string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var spec map[string]any
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	process, _ := spec["process"].(map[string]any)
	env, _ := process["env"].([]any)
	devices := ""
	for _, kv := range env {
		if s, ok := kv.(string); ok {
			if v, ok := strings.CutPrefix(s, "NVIDIA_VISIBLE_DEVICES="); ok {
				devices = v
			}
		}
	}
	if devices == "" || devices == "void" || devices == "none" {
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	mounts, _ := spec["mounts"].([]any)
	for _, m := range [][2]string{{self, "/usr/bin/nvidia-smi"}, {gpus, CardsPath}} {
		mounts = append(mounts, map[string]any{"destination": m[1], "type": "bind", "source": m[0], "options": []any{"rbind", "ro", "nosuid", "nodev"}})
	}
	spec["mounts"] = mounts
	out, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}

// devicePlugin serves the cards as nvidia.com/gpu until it is stopped.
// A kubelet that restarts removes the plugins' sockets and makes its own
// anew: the plugin then serves and registers again, as real ones do.
func devicePlugin(args []string) error {
	fs := flag.NewFlagSet("device-plugin", flag.ContinueOnError)
	gpus := fs.String("gpus", "", "the node's cards file")
	dir := fs.String("dir", pluginapi.DevicePluginPath, "the kubelet's device-plugin directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cards, err := readCards(*gpus)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	const endpoint = "aisched-fake-gpu.sock"
	sock, kubeletSock := filepath.Join(*dir, endpoint), filepath.Join(*dir, "kubelet.sock")
	for ctx.Err() == nil {
		kubelet, err := waitFile(ctx, kubeletSock)
		if err != nil {
			return nil
		}
		_ = os.Remove(sock)
		lis, err := net.Listen("unix", sock)
		if err != nil {
			return err
		}
		srv := grpc.NewServer()
		pluginapi.RegisterDevicePluginServer(srv, &plugin{cards: cards})
		go func() { _ = srv.Serve(lis) }()
		if err := register(ctx, kubeletSock, endpoint); err != nil {
			// A kubelet starting removes the sockets of its directory,
			// ours too, while we register: serve and register again.
			fmt.Fprintf(os.Stderr, "fakegpu: %v; trying again\n", err)
			srv.Stop()
			time.Sleep(time.Second)
			continue
		}
		fmt.Fprintf(os.Stderr, "fakegpu: device plugin registered %d cards as nvidia.com/gpu\n", len(cards))
		// Until the kubelet restarts: its socket is another file, or ours is gone.
		for ctx.Err() == nil {
			time.Sleep(time.Second)
			now, err := os.Stat(kubeletSock)
			if _, ours := os.Stat(sock); err != nil || ours != nil || !os.SameFile(now, kubelet) {
				break
			}
		}
		srv.Stop()
	}
	return nil
}

// waitFile waits until path exists and returns it.
func waitFile(ctx context.Context, path string) (os.FileInfo, error) {
	for {
		if st, err := os.Stat(path); err == nil {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// register registers the plugin with the kubelet.
func register(ctx context.Context, kubeletSock, endpoint string) error {
	conn, err := grpc.NewClient("unix://"+kubeletSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := pluginapi.NewRegistrationClient(conn).Register(rctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: endpoint, ResourceName: "nvidia.com/gpu",
	}); err != nil {
		return fmt.Errorf("registering with the kubelet: %w", err)
	}
	return nil
}

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	cards []card
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	resp := &pluginapi.ListAndWatchResponse{}
	for _, c := range p.cards {
		resp.Devices = append(resp.Devices, &pluginapi.Device{ID: c.uuid(), Health: pluginapi.Healthy})
	}
	if err := s.Send(resp); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(c.DevicesIds, ",")},
		})
	}
	return resp, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

func (p *plugin) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}
