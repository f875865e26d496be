package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/aisched/aisched/pkg/agent"
	"github.com/aisched/aisched/pkg/agent/collect"
	"github.com/aisched/aisched/pkg/agent/nvidiasmi"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
)

// agentRequestTimeout bounds each request of the agent to the apiserver, so
// that an unreachable apiserver fails a publish (and --once) in bounded
// time instead of hanging it.
const agentRequestTimeout = 10 * time.Second

type agentOptions struct {
	kubeconfig   string
	nodeName     string
	interval     time.Duration
	window       time.Duration
	once         bool
	root         string
	interfaces   []string
	disks        []string
	diskMBps     int64
	diskProbeDir string
	nvidiaSMI    string
	metricsAddr  string
	verbosity    int
}

func newAgentCommand() *cobra.Command {
	o := agentOptions{interval: agent.DefaultInterval, root: "/", diskProbeDir: os.TempDir(), metricsAddr: ":9102"}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Measure this node and publish its load for the scheduler (the node agent)",
		Long: `Measure this node and publish its utilisation (CPU, memory, network, disk) and
performance as the status of the NodeMetrics named after the node, and its
NVIDIA GPUs, when nvidia-smi finds any, as its GPUInventory. Every --interval
it reads /proc and /sys under --root twice, --window apart, and publishes the
utilisation over that window; a failed publish is retried with a fresh sample
after a backoff of 1s doubling up to a minute. It runs as a DaemonSet
(deploy/agent) with the host's /proc and /sys mounted under /host, and serves
/metrics and /healthz on --metrics-bind-address.

  aisched agent --kubeconfig KUBECONFIG --node-name NODE --once`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if o.nodeName == "" {
				o.nodeName = os.Getenv("NODE_NAME")
			}
			return runAgent(o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file of the cluster (default: the in-cluster configuration of the pod)")
	fs.StringVar(&o.nodeName, "node-name", "", "name of this node, and of its NodeMetrics and GPUInventory (default $NODE_NAME)")
	fs.DurationVar(&o.interval, "interval", o.interval, "time between samples")
	fs.DurationVar(&o.window, "window", 0, "span each sample averages utilisation over, at most --interval (default --interval)")
	fs.BoolVar(&o.once, "once", false, "publish one sample and exit: 0 when it was published, 1 with the error otherwise")
	fs.StringVar(&o.root, "root", o.root, "directory that holds the node's proc/ and sys/ (/host when the host's /proc and /sys are mounted at /host/proc and /host/sys)")
	fs.StringSliceVar(&o.interfaces, "interfaces", nil, "network interfaces to account, comma-separated (default: every interface with a device, i.e. no loopback, bridge, veth or tunnel)")
	fs.StringSliceVar(&o.disks, "disks", nil, "block devices to account, as named in /proc/diskstats, comma-separated (default: whole physical disks)")
	fs.Int64Var(&o.diskMBps, "disk-mbps", 0, fmt.Sprintf("disk write throughput in MB/s to publish; 0 measures it once at start by writing %d MiB in --disk-probe-dir, negative leaves it unknown", agent.DiskProbeBytes>>20))
	fs.StringVar(&o.diskProbeDir, "disk-probe-dir", o.diskProbeDir, "directory, on the disk that pods use, where the disk measurement writes")
	fs.StringVar(&o.nvidiaSMI, "nvidia-smi", "", "nvidia-smi binary (default: nvidia-smi on PATH; a node without it publishes no GPUs)")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", o.metricsAddr, `address that serves /metrics and /healthz over HTTP ("0" disables; never served with --once)`)
	fs.IntVarP(&o.verbosity, "v", "v", 0, "log verbosity (klog level)")
	return cmd
}

// validate checks the flags that need no cluster.
func (o agentOptions) validate() error {
	if o.nodeName == "" {
		return errors.New("--node-name is required (or set NODE_NAME)")
	}
	if errs := validation.IsDNS1123Subdomain(o.nodeName); len(errs) > 0 {
		return fmt.Errorf("--node-name %q: %s", o.nodeName, strings.Join(errs, "; "))
	}
	if o.interval <= 0 {
		return fmt.Errorf("--interval %s: must be positive", o.interval)
	}
	if o.window < 0 {
		return fmt.Errorf("--window %s: must not be negative", o.window)
	}
	if o.window > o.interval {
		return fmt.Errorf("--window %s: longer than --interval %s", o.window, o.interval)
	}
	if _, err := os.Stat(o.root); err != nil {
		return fmt.Errorf("--root: %w", err)
	}
	if o.diskMBps == 0 {
		if _, err := os.Stat(o.diskProbeDir); err != nil {
			return fmt.Errorf("--disk-probe-dir: %w", err)
		}
	}
	if o.nvidiaSMI != "" {
		if _, err := os.Stat(o.nvidiaSMI); err != nil {
			return fmt.Errorf("--nvidia-smi: %w", err)
		}
	}
	if o.metricsAddr != "0" {
		if _, _, err := net.SplitHostPort(o.metricsAddr); err != nil {
			return fmt.Errorf("--metrics-bind-address: %w", err)
		}
	}
	return nil
}

// restConfig is the agent's client configuration, with a timeout on
// every request.
func (o agentOptions) restConfig() (*rest.Config, error) {
	cfg, err := kubeRESTConfig(o.kubeconfig, "aisched-agent")
	if err != nil {
		return nil, err
	}
	cfg.Timeout = agentRequestTimeout
	return cfg, nil
}

func runAgent(o agentOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.window == 0 {
		o.window = o.interval
	}
	if err := setupKlog(os.Stderr, o.verbosity); err != nil {
		return err
	}
	defer klog.Flush()
	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	kubeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	a, err := agent.New(agent.Options{
		NodeName:     o.nodeName,
		Client:       client,
		KubeClient:   kubeClient,
		Collector:    &collect.Collector{Root: o.root, Interfaces: o.interfaces, Disks: o.disks},
		GPUs:         nvidiasmi.Runner{Path: o.nvidiaSMI},
		Interval:     o.interval,
		Window:       o.window,
		DiskMBps:     o.diskMBps,
		DiskProbeDir: o.diskProbeDir,
	})
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.once {
		return a.Once(ctx)
	}
	if o.metricsAddr != "0" {
		ln, err := net.Listen("tcp", o.metricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-bind-address: %w", err)
		}
		srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				klog.ErrorS(err, "Serving metrics failed", "address", o.metricsAddr)
			}
		}()
		defer func() {
			shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdownCtx)
		}()
	}
	klog.InfoS("Starting the node agent", "node", o.nodeName, "interval", o.interval, "window", o.window, "root", o.root, "metrics", o.metricsAddr)
	a.Run(ctx)
	klog.InfoS("Stopped the node agent")
	return nil
}
