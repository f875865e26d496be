package deliver

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	nri "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	xgen "github.com/containerd/nri/pkg/runtime-tools/generate"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	ocigen "github.com/opencontainers/runtime-tools/generate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"

	"github.com/aisched/aisched/pkg/gpu"
)

// These tests drive the hook through NRI's own runtime side, the
// adaptation library that containerd and CRI-O embed, over its real
// socket and ttRPC protocol, and apply the adjustments to OCI specs with
// the generator containerd uses. runtime below plays what containerd does
// around them: it keeps the pods and containers and calls the adaptation
// as the CRI calls arrive.

// Three cards of different kinds, as nvidia-smi lists them.
var testCards = []gpu.Card{
	{Index: 0, UUID: "GPU-00000000-1111-2222-3333-000000000016", Model: "Tesla-V100-PCIE-16GB", MemoryMiB: 16384, Healthy: true},
	{Index: 1, UUID: "GPU-00000000-1111-2222-3333-000000000032", Model: "Tesla-V100-SXM2-32GB", MemoryMiB: 32768, Healthy: true},
	{Index: 2, UUID: "GPU-00000000-1111-2222-3333-000000000040", Model: "NVIDIA-A100-PCIE-40GB", MemoryMiB: 40960, Healthy: true},
}

type runtime struct {
	t   *testing.T
	dir string
	nri *nri.Adaptation
	// relay carries the plugins' connections to the NRI socket, so that
	// a restart can drop them as the runtime's exit would (the
	// adaptation's Stop leaves external plugins connected).
	relay net.Listener
	mu    sync.Mutex
	conns []net.Conn
	pods  map[string]*api.PodSandbox
	ctrs  map[string]*api.Container
	next  int
}

func newRuntime(t *testing.T) *runtime {
	// A short directory: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "nri")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, d := range []string{"plugins", "conf.d"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := &runtime{t: t, dir: dir, pods: map[string]*api.PodSandbox{}, ctrs: map[string]*api.Container{}}
	r.start()
	r.relay, err = net.Listen("unix", r.socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.relay.Close() })
	go r.serveRelay()
	return r
}

// socket is where plugins connect.
func (r *runtime) socket() string { return filepath.Join(r.dir, "relay.sock") }

func (r *runtime) serveRelay() {
	for {
		in, err := r.relay.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("unix", filepath.Join(r.dir, "nri.sock"))
		if err != nil {
			in.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, in, out)
		r.mu.Unlock()
		go func() { _, _ = io.Copy(out, in); out.Close() }()
		go func() { _, _ = io.Copy(in, out); in.Close() }()
	}
}

// start starts the runtime's NRI side, as containerd does at its start.
func (r *runtime) start() {
	a, err := nri.New("containerd", "v2-test", r.synchronize, func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil },
		nri.WithPluginPath(filepath.Join(r.dir, "plugins")),
		nri.WithPluginConfigPath(filepath.Join(r.dir, "conf.d")),
		nri.WithSocketPath(filepath.Join(r.dir, "nri.sock")))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.nri = a
	r.t.Cleanup(a.Stop)
}

// restart stops the runtime's NRI side and starts it again with the same
// containers, as a containerd restart does.
func (r *runtime) restart() {
	r.nri.Stop()
	r.mu.Lock()
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
	r.start()
}

func (r *runtime) synchronize(ctx context.Context, cb nri.SyncCB) error {
	r.mu.Lock()
	pods := slices.Collect(mapsValues(r.pods))
	ctrs := slices.Collect(mapsValues(r.ctrs))
	r.mu.Unlock()
	_, err := cb(ctx, pods, ctrs)
	return err
}

func mapsValues[K comparable, V any](m map[K]V) func(func(V) bool) {
	return func(yield func(V) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// runPod creates the pod's sandbox; like the kubelet, it passes the pod's
// annotations in the sandbox configuration.
func (r *runtime) runPod(pod *corev1.Pod) *api.PodSandbox {
	defer r.nri.BlockPluginSync().Unblock()
	sb := &api.PodSandbox{Id: "sb-" + string(pod.UID), Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Annotations: pod.Annotations}
	if err := r.nri.RunPodSandbox(context.Background(), &api.RunPodSandboxRequest{Pod: sb}); err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	r.pods[sb.Id] = sb
	r.mu.Unlock()
	return sb
}

// createContainer creates a container with env (what the kubelet passes,
// a device plugin's variables included) and returns its spec after the
// plugins' adjustments.
func (r *runtime) createContainer(sb *api.PodSandbox, name string, env ...string) (*api.Container, *rspec.Spec, error) {
	return r.createFrom(sb, &api.Container{Name: name, Env: env})
}

// createFrom creates the container ctr describes (its name, and what the
// runtime made of the kubelet's request: environment, device nodes, CDI
// devices) and returns it and its spec after the plugins' adjustments.
func (r *runtime) createFrom(sb *api.PodSandbox, ctr *api.Container) (*api.Container, *rspec.Spec, error) {
	r.mu.Lock()
	r.next++
	ctr.Id = fmt.Sprintf("ctr-%d", r.next)
	r.mu.Unlock()
	ctr.PodSandboxId, ctr.State = sb.Id, api.ContainerState_CONTAINER_CREATED
	name := ctr.Name
	// As containerd does: a plugin being synchronised is fully registered
	// before the runtime relays requests.
	defer r.nri.BlockPluginSync().Unblock()
	spec := &rspec.Spec{Process: &rspec.Process{Env: slices.Clone(ctr.Env)}, Linux: &rspec.Linux{}}
	for _, d := range ctr.GetLinux().GetDevices() {
		spec.Linux.Devices = append(spec.Linux.Devices, rspec.LinuxDevice{Path: d.Path, Type: d.Type, Major: d.Major, Minor: d.Minor})
	}
	resp, err := r.nri.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: sb, Container: ctr})
	if err != nil {
		return nil, nil, err
	}
	g := ocigen.NewFromSpec(spec)
	var cdi []string
	xg := xgen.SpecGenerator(&g, xgen.WithCDIDeviceInjector(func(_ *rspec.Spec, names []string) error {
		cdi = append(cdi, names...)
		return nil
	}))
	if err := xg.Adjust(resp.GetAdjust()); err != nil {
		r.t.Fatalf("applying the adjustment of %s: %v", name, err)
	}
	if len(cdi) > 0 {
		spec.Annotations = map[string]string{"test/cdi": strings.Join(cdi, ",")}
	}
	ctr.Env = spec.Process.Env
	ctr.State = api.ContainerState_CONTAINER_RUNNING
	r.mu.Lock()
	r.ctrs[ctr.Id] = ctr
	r.mu.Unlock()
	return ctr, spec, nil
}

func (r *runtime) stopContainer(ctr *api.Container) {
	r.mu.Lock()
	sb := r.pods[ctr.PodSandboxId]
	delete(r.ctrs, ctr.Id)
	r.mu.Unlock()
	defer r.nri.BlockPluginSync().Unblock()
	if _, err := r.nri.StopContainer(context.Background(), &api.StopContainerRequest{Pod: sb, Container: ctr}); err != nil {
		r.t.Fatal(err)
	}
}

// pods is the agent's view of the node's pods.
type pods struct {
	mu   sync.Mutex
	byNS map[string]*corev1.Pod
}

func (p *pods) add(pod *corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byNS == nil {
		p.byNS = map[string]*corev1.Pod{}
	}
	p.byNS[pod.Namespace+"/"+pod.Name] = pod
}

func (p *pods) Pod(_ context.Context, ns, name, uid string) (*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pod, ok := p.byNS[ns+"/"+name]
	if !ok || string(pod.UID) != uid {
		return nil, fmt.Errorf("pod %s/%s (UID %s) not found", ns, name, uid)
	}
	return pod, nil
}

// startHook runs a hook against r until the test ends or stop is called,
// and waits for its first synchronization.
func startHook(t *testing.T, r *runtime, src *pods, layer Layer) (h *Hook, stop func()) {
	t.Helper()
	h, err := NewHook(HookOptions{
		Pods:       src,
		Cards:      func(context.Context) ([]gpu.Card, error) { return testCards, nil },
		Layer:      layer,
		SocketPath: r.socket(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = h.Run(ctx)
	}()
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	waitSyncs(t, h, 1)
	return h, stop
}

func waitSyncs(t *testing.T, h *Hook, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for h.Syncs() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the hook did not synchronize with the runtime (%d of %d times)", h.Syncs(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gpuPod is a pod that aisched placed on cards (the annotations GPUFit
// writes before binding).
func gpuPod(name string, cards int64, annotations map[string]string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}},
	}
	if cards > 0 {
		// Requests as the apiserver defaults them from the limits.
		rl := corev1.ResourceList{gpu.ResourceName: *resource.NewQuantity(cards, resource.DecimalSI)}
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: rl, Requests: rl}
	}
	return pod
}

func assigned(indices ...int) map[string]string {
	var uuids []string
	for _, i := range indices {
		uuids = append(uuids, testCards[i].UUID)
	}
	return map[string]string{gpu.AssignedAnnotation: gpu.FormatIndices(indices), gpu.AssignedUUIDsAnnotation: strings.Join(uuids, ",")}
}

func with(m map[string]string, kv ...string) map[string]string {
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func envOf(spec *rspec.Spec, key string) (string, bool) {
	for _, kv := range spec.Process.Env {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v, true
		}
	}
	return "", false
}

// TestHookDeliversChosenCards is the device path end to end on the
// runtime's side: the cards the scheduler chose reach the containers'
// specs, whatever the device plugin picked; shares get their card and
// their own limits; a card held is never given; and all of it holds
// across restarts of the hook and of the runtime.
func TestHookDeliversChosenCards(t *testing.T) {
	r := newRuntime(t)
	src := &pods{}
	layer := Layer{Naming: NamingEnv, Isolation: IsolationHAMiCore, HAMiCoreLibrary: "/usr/local/vgpu/libvgpu.so"}
	first, stopHook := startHook(t, r, src, layer)
	k8smetrics.NewKubeRegistry().MustRegister(first.Metrics()...)

	create := func(pod *corev1.Pod, env ...string) (*api.Container, *rspec.Spec, error) {
		t.Helper()
		src.add(pod)
		return r.createContainer(r.runPod(pod), "main", env...)
	}
	mustCreate := func(pod *corev1.Pod, env ...string) (*api.Container, *rspec.Spec) {
		t.Helper()
		c, spec, err := create(pod, env...)
		if err != nil {
			t.Fatalf("creating %s: %v", pod.Name, err)
		}
		return c, spec
	}
	wantEnv := func(spec *rspec.Spec, pod, key, want string) {
		t.Helper()
		if got, _ := envOf(spec, key); got != want {
			t.Errorf("%s: %s=%q, want %q", pod, key, got, want)
		}
	}

	// Two pods with per-card memory needs on the node of mixed cards. The
	// kubelet's device plugin picked the other card for each; the hook's
	// choice is the scheduler's.
	big := gpuPod("big", 1, with(assigned(1), gpu.MemoryAnnotation, "32Gi"))
	small := gpuPod("small", 1, assigned(0))
	_, bigSpec := mustCreate(big, VisibleDevicesEnv+"="+testCards[0].UUID)
	_, smallSpec := mustCreate(small, VisibleDevicesEnv+"="+testCards[1].UUID)
	wantEnv(bigSpec, "big", VisibleDevicesEnv, testCards[1].UUID)
	wantEnv(smallSpec, "small", VisibleDevicesEnv, testCards[0].UUID)
	if _, ok := envOf(bigSpec, "CUDA_DEVICE_MEMORY_LIMIT_0"); ok {
		t.Error("a pod of whole cards got a memory limit")
	}

	// Two shared pods on one card: the same UUID, each its own limits.
	s1 := gpuPod("share-1", 0, with(assigned(2), gpu.MilliAnnotation, "300", gpu.GPUMemAnnotation, "8000"))
	s2 := gpuPod("share-2", 0, with(assigned(2), gpu.MilliAnnotation, "500", gpu.GPUMemAnnotation, "16000"))
	s1Ctr, s1Spec := mustCreate(s1)
	s2Ctr, s2Spec := mustCreate(s2)
	for _, c := range []struct {
		name      string
		spec      *rspec.Spec
		mem, core string
	}{{"share-1", s1Spec, "8000m", "30"}, {"share-2", s2Spec, "16000m", "50"}} {
		wantEnv(c.spec, c.name, VisibleDevicesEnv, testCards[2].UUID)
		wantEnv(c.spec, c.name, "CUDA_DEVICE_MEMORY_LIMIT_0", c.mem)
		wantEnv(c.spec, c.name, "CUDA_DEVICE_SM_LIMIT", c.core)
		wantEnv(c.spec, c.name, "LD_PRELOAD", layer.HAMiCoreLibrary)
		if !slices.ContainsFunc(c.spec.Mounts, func(m rspec.Mount) bool {
			return m.Destination == layer.HAMiCoreLibrary && m.Source == layer.HAMiCoreLibrary
		}) {
			t.Errorf("%s: HAMi-core's library is not mounted: %v", c.name, c.spec.Mounts)
		}
	}

	// What may never happen, checked after each restart too.
	whole := gpuPod("whole", 1, assigned(2))
	third := gpuPod("share-3", 0, with(assigned(2), gpu.MilliAnnotation, "100", gpu.GPUMemAnnotation, "20000"))
	refused := func(when string) {
		t.Helper()
		if _, _, err := create(whole); err == nil || !strings.Contains(err.Error(), "is shared by pod default/share-") {
			t.Errorf("%s: a whole-card pod on a shared card: got %v, want a refusal naming the sharing pod", when, err)
		}
		if _, _, err := create(third); err == nil || !strings.Contains(err.Error(), "44000 MiB of its 40960 MiB") {
			t.Errorf("%s: a share beyond the card's memory: got %v, want a refusal with the sum", when, err)
		}
		if _, _, err := create(gpuPod("big-again", 1, assigned(1))); err == nil || !strings.Contains(err.Error(), "held whole by pod default/big") {
			t.Errorf("%s: a card held whole given again: got %v", when, err)
		}
	}
	refused("first run")
	for result, want := range map[string]float64{resultDelivered: 4, resultRefused: 3, resultNoGPU: 0} {
		if got, err := testutil.GetCounterMetricValue(first.containers.WithLabelValues(result)); err != nil || got != want {
			t.Errorf("gpu_containers_total{result=%q} = %v (%v), want %v", result, got, err, want)
		}
	}

	// The agent restarts: a new hook rebuilds its holdings from the
	// runtime's containers.
	stopHook()
	h, _ := startHook(t, r, src, layer)
	if got := len(h.Holdings().All()); got != 4 {
		t.Errorf("after the hook's restart the holdings list %d containers, want 4", got)
	}
	refused("after the hook's restart")

	// The runtime restarts: the hook connects again and resynchronizes.
	r.restart()
	waitSyncs(t, h, 2)
	refused("after the runtime's restart")
	wantEnv(s1Spec, "share-1 (running through the restarts)", VisibleDevicesEnv, testCards[2].UUID)

	// Once the shares end, the card is free for a pod of whole cards.
	r.stopContainer(s1Ctr)
	r.stopContainer(s2Ctr)
	_, wholeSpec := mustCreate(whole)
	wantEnv(wholeSpec, "whole", VisibleDevicesEnv, testCards[2].UUID)
}

// TestHookMultiCardShares: HAMi's default_use (two cards, 3000 MiB and
// 30% of each) gets both cards the scheduler chose with a memory limit for
// each; the holdings count the share on each card, also after the hook's
// restart, so a share that would overfill either card, or a whole-card
// pod on either, is refused.
func TestHookMultiCardShares(t *testing.T) {
	r := newRuntime(t)
	src := &pods{}
	layer := Layer{Naming: NamingEnv, Isolation: IsolationHAMiCore, HAMiCoreLibrary: "/usr/local/vgpu/libvgpu.so"}
	_, stopHook := startHook(t, r, src, layer)
	create := func(pod *corev1.Pod, env ...string) (*rspec.Spec, error) {
		t.Helper()
		src.add(pod)
		_, spec, err := r.createContainer(r.runPod(pod), "main", env...)
		return spec, err
	}
	defaultUse := gpuPod("default-use", 0, assigned(0, 2))
	defaultUse.Spec.Containers[0] = containerWith("main", corev1.ResourceList{
		gpu.ResourceName: resource.MustParse("2"), gpu.HAMiGPUMemResource: resource.MustParse("3000"), gpu.HAMiGPUCoresResource: resource.MustParse("30"),
	})
	// The device plugin gave cards 0 and 1; the scheduler chose 0 and 2.
	spec, err := create(defaultUse, VisibleDevicesEnv+"="+testCards[0].UUID+","+testCards[1].UUID)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		VisibleDevicesEnv: testCards[0].UUID + "," + testCards[2].UUID, "CUDA_DEVICE_MEMORY_LIMIT_0": "3000m", "CUDA_DEVICE_MEMORY_LIMIT_1": "3000m",
		"CUDA_DEVICE_SM_LIMIT": "30", ShareEnv: "milli=300,memMiB=3000",
	} {
		if got, _ := envOf(spec, k); got != want {
			t.Errorf("default_use: %s=%q, want %q", k, got, want)
		}
	}
	refused := func(when string) {
		t.Helper()
		// Card 0 (16384 MiB) has 13384 left.
		tooBig := gpuPod("too-big", 0, with(assigned(0, 1), gpu.GPUMemAnnotation, "14000", gpu.CardsAnnotation, "2"))
		if _, err := create(tooBig); err == nil || !strings.Contains(err.Error(), testCards[0].UUID+": 17000 MiB of its 16384 MiB") {
			t.Errorf("%s: a share beyond card 0's memory: got %v", when, err)
		}
		if _, err := create(gpuPod("whole-2", 1, assigned(2))); err == nil || !strings.Contains(err.Error(), "is shared by pod default/default-use") {
			t.Errorf("%s: a whole-card pod on the second shared card: got %v", when, err)
		}
	}
	refused("first run")
	stopHook()
	startHook(t, r, src, layer)
	refused("after the hook's restart")
	// What fits beside it: 13000 MiB of cards 0 and 1.
	if _, err := create(gpuPod("fits", 0, with(assigned(0, 1), gpu.GPUMemAnnotation, "13000", gpu.CardsAnnotation, "2"))); err != nil {
		t.Errorf("a share that fits beside default_use: %v", err)
	}
}

// TestHookForeignAndCDI: a container the node's device plugin served for
// another scheduler holds its card in the holdings; with CDI naming the
// cards come as CDI devices and the device plugin's own choice is voided;
// without an isolation layer a share still gets its card.
func TestHookForeignAndCDI(t *testing.T) {
	r := newRuntime(t)
	src := &pods{}
	startHook(t, r, src, Layer{Naming: NamingCDI})

	foreign := gpuPod("foreign", 1, nil)
	src.add(foreign)
	_, spec, err := r.createContainer(r.runPod(foreign), "main", VisibleDevicesEnv+"="+testCards[0].UUID)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := envOf(spec, VisibleDevicesEnv); got != testCards[0].UUID {
		t.Errorf("a pod aisched did not place was changed: %s=%q", VisibleDevicesEnv, got)
	}
	late := gpuPod("late", 1, assigned(0))
	src.add(late)
	if _, _, err := r.createContainer(r.runPod(late), "main"); err == nil || !strings.Contains(err.Error(), "held whole by pod default/foreign (its cards from the node's device plugin)") {
		t.Errorf("a card the device plugin gave another scheduler's pod was given again: %v", err)
	}

	share := gpuPod("share", 0, with(assigned(1), gpu.MilliAnnotation, "500"))
	src.add(share)
	_, spec, err = r.createContainer(r.runPod(share), "main", VisibleDevicesEnv+"="+testCards[2].UUID)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := envOf(spec, VisibleDevicesEnv); got != "void" {
		t.Errorf("CDI naming: %s=%q, want void", VisibleDevicesEnv, got)
	}
	if got := spec.Annotations["test/cdi"]; got != "nvidia.com/gpu="+testCards[1].UUID {
		t.Errorf("CDI devices %q, want nvidia.com/gpu=%s", got, testCards[1].UUID)
	}
	if got, _ := envOf(spec, ShareEnv); got != "milli=500,memMiB=0" {
		t.Errorf("%s=%q", ShareEnv, got)
	}
}
