package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
	"github.com/spf13/cobra"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	aischedconfig "github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/console"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/datadir"
	"github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/whatif"
)

// idleReportDelay is how long after ready `up` reports its idle memory.
const idleReportDelay = 30 * time.Second

type upOptions struct {
	dataDir         string
	fresh           bool
	port            int
	kubeconfigOut   string
	clusterFile     string
	schedulerConfig string
	logFile         string
	verbosity       int
	printDefault    bool
	listGates       bool
	gatewayAddr     string
	consoleAddr     string
	advertise       net.IP
	platform        bool
}

func newUpCommand() *cobra.Command {
	o := upOptions{dataDir: local.DefaultDataDir(), port: 6443, gatewayAddr: local.DefaultGatewayAddr, consoleAddr: local.DefaultConsoleAddr, platform: true}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a whole simulated Kubernetes cluster with aisched in this process",
		Long: `Run a whole Kubernetes cluster in this process: embedded etcd and
kube-apiserver, the kube-controller-manager controllers for Deployments, Jobs,
Services and quotas, the aisched scheduler (profiles default-scheduler and
aisched), simulated nodes with GPUs from a cluster file, and the AI service
platform: its controllers and the gateway on --gateway-addr, with pods of
the demo model image answering for real. No other binary is needed. Objects
persist in --data-dir across restarts.

With --advertise-address it is also the control plane of real nodes: the
apiserver listens on that address and publishes it as the kubernetes
Service's endpoint, so that kubelets elsewhere, and their pods, reach it
(hack/node-e2e runs containerd, kubelets and kube-proxy against it). With
--platform=false the platform is left to the Helm chart.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.printDefault {
				_, err := cmd.OutOrStdout().Write(clusterfile.DefaultYAML())
				return err
			}
			if o.listGates {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), strings.Join(utilfeature.DefaultFeatureGate.KnownFeatures(), "\n"))
				return err
			}
			return runUp(cmd.OutOrStdout(), o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.dataDir, "data-dir", o.dataDir, "directory for etcd data, certificates, kubeconfig and logs")
	fs.BoolVar(&o.fresh, "fresh", false, "wipe --data-dir before starting")
	fs.IntVar(&o.port, "port", o.port, "kube-apiserver port on 127.0.0.1 (0: any free port)")
	fs.StringVar(&o.kubeconfigOut, "kubeconfig-out", "", "where to write the admin kubeconfig (default <data-dir>/kubeconfig)")
	fs.StringVar(&o.clusterFile, "cluster", "", "cluster file (YAML) describing the simulated nodes (default: built-in cluster, see --print-default-cluster)")
	fs.StringVar(&o.schedulerConfig, "scheduler-config", "", "KubeSchedulerConfiguration file for the in-process scheduler (default: profiles default-scheduler and aisched)")
	fs.StringVar(&o.logFile, "log-file", "", "component log file (default <data-dir>/aisched.log; - for stderr)")
	fs.IntVarP(&o.verbosity, "v", "v", 0, "component log verbosity (klog level)")
	fs.BoolVar(&o.printDefault, "print-default-cluster", false, "print the built-in cluster file and exit")
	fs.StringVar(&o.gatewayAddr, "gateway-addr", o.gatewayAddr, "address of the AI service gateway (its /metrics takes the next free port)")
	fs.StringVar(&o.consoleAddr, "console-addr", o.consoleAddr, `address of the web console ("0": none)`)
	fs.IPVar(&o.advertise, "advertise-address", nil, "address the kube-apiserver listens on and publishes to real kubelets and their pods (default: 127.0.0.1 only)")
	fs.BoolVar(&o.platform, "platform", o.platform, "run the AI service platform (controllers, admission webhook, gateway) in this process; false leaves it to the chart")
	// One process, one set of gates: the apiserver, the controllers and the
	// scheduler all read them.
	utilfeature.DefaultMutableFeatureGate.AddFlag(fs)
	// Its usage lists every gate (160 lines): behind a flag of its own, so
	// that --help shows aisched's flags.
	fs.Lookup("feature-gates").Usage = "Kubernetes feature gates, key=true|false,... for the apiserver, controllers and scheduler alike (--list-feature-gates lists them)"
	fs.BoolVar(&o.listGates, "list-feature-gates", false, "list the Kubernetes feature gates that --feature-gates takes, with their stages and defaults, and exit")
	return cmd
}

func runUp(out io.Writer, o upOptions) error {
	begin := time.Now()
	if o.port < 0 || o.port > 65535 {
		return fmt.Errorf("--port %d: want 0 (any free port) to 65535", o.port)
	}
	cluster := clusterfile.Default()
	if o.clusterFile != "" {
		var err error
		if cluster, err = clusterfile.Load(o.clusterFile); err != nil {
			return err
		}
	}
	// The scheduler's default plugins depend on the gates (GenericWorkload
	// adds GangScheduling): the flags were applied before the config is read.
	schedCfg, err := scheduler.ReadConfig(o.schedulerConfig)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	logPath := o.logFile
	if logPath == "" {
		logPath = filepath.Join(o.dataDir, "aisched.log")
	}
	logOut, closeLog, err := openLog(logPath)
	if err != nil {
		return err
	}
	defer closeLog()
	if err := setupKlog(logOut, o.verbosity); err != nil {
		return err
	}
	defer klog.Flush()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A start that fails tears down what it started, and components
	// cancelled mid-request complain on stderr; that goes to the log, the
	// error to the terminal.
	terminal, restore := redirectStderr(logOut)
	crashTo(terminal)
	c, err := local.Start(ctx, local.Options{
		DataDir:          o.dataDir,
		Fresh:            o.fresh,
		APIServerPort:    o.port,
		AdvertiseAddress: o.advertise,
		KubeconfigPath:   o.kubeconfigOut,
		Cluster:          cluster,
		SchedulerConfig:  schedCfg,
		LogOutput:        logOut,
		APIServerArgs:    apiserverArgsForGates(),
		Platform:         platformOf(o),
		Warn:             func(msg string) { fmt.Fprintln(terminal, "aisched up: warning: "+msg) },
		Console:          consoleOf(o.consoleAddr, schedCfg),
	})
	if err != nil {
		err = upFlagError(err)
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted while starting: %w", err)
		}
		return reported(terminal, err)
	}
	// Running, stderr is the terminal's again, for errors and crashes.
	restore()
	crashTo(nil)
	printReady(out, c, cluster, profileNames(schedCfg), logPath, time.Since(begin))

	idle := time.NewTimer(idleReportDelay)
	defer idle.Stop()
	var failure error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-c.Failed():
			failure = c.Err()
			break loop
		case <-idle.C:
			fmt.Fprintf(out, "memory after %s idle: %s\n", idleReportDelay, memoryUse())
		}
	}
	// A second signal ends the process at once.
	stop()
	stopping := time.Now()
	fmt.Fprintln(out, "stopping...")
	// Components cancelled mid-request complain on stderr, also after Stop
	// returns: stderr goes to the log for good, errors to the terminal.
	terminal, _ = redirectStderr(logOut)
	crashTo(terminal)
	if err := c.Stop(); err != nil {
		return reported(terminal, fmt.Errorf("stop: %w", err))
	}
	fmt.Fprintf(out, "stopped in %.1fs\n", time.Since(stopping).Seconds())
	if failure != nil {
		return reported(terminal, failure)
	}
	return nil
}

// platformOf is the platform of aisched up; nil with --platform=false.
func platformOf(o upOptions) *local.PlatformOptions {
	if !o.platform {
		return nil
	}
	return &local.PlatformOptions{GatewayAddr: o.gatewayAddr}
}

// consoleOf is the console of aisched up at addr, whose simulations use
// the cluster's scheduler configuration; nil for "0".
func consoleOf(addr string, sched *config.KubeSchedulerConfiguration) *local.ConsoleOptions {
	if addr == "0" {
		return nil
	}
	sims := &console.Simulations{SchedulerConfig: sched, SharedConfig: aischedconfig.DefaultShared(), WhatIfHorizon: whatif.DefaultHorizon}
	return &local.ConsoleOptions{Addr: addr, Handler: console.ForCluster(console.Options{Simulations: sims})}
}

// upFlags are the flags that choose each listener's address.
var upFlags = map[local.Listener]string{
	local.APIServerListener: "--port",
	local.GatewayListener:   "--gateway-addr",
	local.ConsoleListener:   "--console-addr",
}

// upFlagError words an error of local.Start with the flag that mends it.
func upFlagError(err error) error {
	var listen *local.ListenError
	var inUse *local.DataDirInUseError
	var corrupt *datadir.CorruptDBError
	switch {
	case errors.As(err, &listen) && listen.Listener == local.APIServerListener && listen.InUse:
		return fmt.Errorf("%w (another aisched or Kubernetes?); choose another with --port", err)
	case errors.As(err, &listen):
		return fmt.Errorf("%w; choose another with %s", err, upFlags[listen.Listener])
	case errors.As(err, &inUse):
		return fmt.Errorf("%w; stop it or choose another with --data-dir", err)
	case errors.As(err, &corrupt):
		return fmt.Errorf("%w; restore it from a backup of --data-dir, or start over with --fresh (which discards every object)", err)
	}
	return err
}

// apiserverArgsForGates serves the beta APIs that enabled gates need and
// that the apiserver does not serve by default: scheduling.k8s.io/v1beta1
// (Workload, PodGroup) for GenericWorkload.
func apiserverArgsForGates() []string {
	if utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		return []string{"--runtime-config=" + local.WorkloadAPI + "=true"}
	}
	return nil
}

// reportedError is an error already printed to the user; Main only sets
// the exit code.
type reportedError struct{ error }

// reported prints err as Main would, to w (the terminal while file
// descriptor 2 points at the log), and returns it marked as printed.
func reported(w io.Writer, err error) error {
	fmt.Fprintf(w, "aisched up: %v\n", err)
	return reportedError{err}
}

func profileNames(cfg *config.KubeSchedulerConfiguration) []string {
	var names []string
	for _, p := range cfg.Profiles {
		names = append(names, p.SchedulerName)
	}
	return names
}

func printReady(out io.Writer, c *local.Cluster, cluster *clusterfile.Cluster, profiles []string, logPath string, took time.Duration) {
	fmt.Fprintf(out, "aisched is ready in %.1fs: %s; scheduler profiles %s\n", took.Seconds(), cluster.Describe(), strings.Join(profiles, ", "))
	fmt.Fprintf(out, "  kubeconfig: %s\n", c.KubeconfigPath)
	fmt.Fprintf(out, "  apiserver:  %s\n", c.Host)
	if u := c.GatewayURL(); u != "" {
		fmt.Fprintf(out, "  gateway:    %s/<namespace>/<service>/ (metrics: %s/metrics)\n", u, c.GatewayAdminURL())
	}
	if u := c.ConsoleURL(); u != "" {
		fmt.Fprintf(out, "  console:    %s#token=%s\n", u, c.AdminToken)
	}
	fmt.Fprintf(out, "  memory:     %s\n", memoryUse())
	fmt.Fprintf(out, "  logs:       %s\n", logPath)
	// The hints are shell lines, to paste (a test runs them); they use the
	// kubectl compiled in, of the apiserver's version (a system kubectl may
	// be out of its supported skew).
	self := selfCommand()
	fmt.Fprintf(out, "  try, in another terminal:\n")
	fmt.Fprintf(out, "              export KUBECONFIG=%s\n", c.KubeconfigPath)
	fmt.Fprintf(out, "              %s kubectl get nodes\n", self)
	fmt.Fprintf(out, "              %s whatif -f examples/gang-job.yaml   # would a gang of 2 x 4 GPUs fit, and where\n", self)
	if c.GatewayURL() != "" {
		fmt.Fprintf(out, "              examples/platform/try.sh   # a model served through the gateway\n")
	}
	fmt.Fprintln(out, "Press Ctrl-C to stop; objects are kept in", c.DataDir)
}

// selfCommand is how the user runs this binary: "aisched" when it is the
// one on PATH, else its path (relative to the working directory when it
// is below it, as bin/aisched of make build is).
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return "aisched"
	}
	if onPath, err := exec.LookPath("aisched"); err == nil {
		if a, b := evalPath(onPath), evalPath(exe); a == b {
			return "aisched"
		}
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, exe); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return exe
}

// evalPath is path with its links resolved, or path when that fails.
func evalPath(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p
	}
	return path
}

// memoryUse reports the resident set size (Linux) and the Go heap.
func memoryUse() string {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap := fmt.Sprintf("Go heap %d MiB", ms.HeapAlloc>>20)
	if rss, ok := residentMiB(); ok {
		return fmt.Sprintf("RSS %d MiB, %s", rss, heap)
	}
	return heap
}

// residentMiB is the process's resident set size (VmRSS), where /proc
// has it.
func residentMiB() (uint64, bool) {
	p, err := procfs.Self()
	if err != nil {
		return 0, false
	}
	st, err := p.NewStatus()
	if err != nil {
		return 0, false
	}
	return st.VmRSS >> 20, true
}
