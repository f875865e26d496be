package app

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	"github.com/aisched/aisched/pkg/agent/deliver"
	"github.com/aisched/aisched/pkg/agent/nvidiasmi"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/util/httpserve"
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
	draDriver    string
	delivery     deliveryOptions
}

// deliveryOptions configure the delivery of the scheduler's cards to
// containers (pkg/agent/deliver).
type deliveryOptions struct {
	mode             string
	nriSocket        string
	naming           string
	isolation        string
	hamiCoreLibrary  string
	mpsPipeDirectory string
	podResources     string
}

// Values of --gpu-delivery.
const (
	deliveryNone = "none"
	deliveryNRI  = "nri"
)

func newAgentCommand() *cobra.Command {
	o := agentOptions{interval: agent.DefaultInterval, root: "/", diskProbeDir: os.TempDir(), metricsAddr: ":9102", draDriver: "gpu.nvidia.com",
		delivery: deliveryOptions{mode: deliveryNone, nriSocket: "/var/run/nri/nri.sock", naming: string(deliver.NamingEnv), isolation: string(deliver.IsolationNone)}}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Measure this node and publish its load for the scheduler (the node agent)",
		Long: `Measure this node and publish its utilisation (CPU, memory, network, disk) and
performance as the status of the NodeMetrics named after the node, and its
NVIDIA GPUs, when nvidia-smi finds any, as its GPUInventory. Every --interval
it reads /proc and /sys under --root twice, --window apart, and publishes the
utilisation over that window; a failed publish is retried with a fresh sample
after a backoff of 1s doubling up to a minute. It runs as a DaemonSet
(the Helm chart charts/aisched) with the host's /proc and /sys mounted under /host, and serves
/metrics and /healthz on --metrics-bind-address.

With --gpu-delivery=nri it also gives each container of a pod that aisched
placed on cards exactly those cards, by UUID, as an NRI plugin of the node's
container runtime (containerd 1.7 and later, CRI-O 1.26 and later), with the
limits of a share for the node's --gpu-isolation layer (docs/device-path.md).

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
	fs.StringVar(&o.draDriver, "dra-gpu-driver", o.draDriver, `DRA driver that publishes GPUs as ResourceSlices: while it publishes this node's, the agent publishes no GPUInventory (and withdraws its own), so that aisched and DRA never both hand out a card ("" never checks)`)
	fs.StringVar(&o.delivery.mode, "gpu-delivery", o.delivery.mode, `how the scheduler's cards reach containers: "nri" (this agent's NRI plugin) or "none" (the node's device plugin chooses)`)
	fs.StringVar(&o.delivery.nriSocket, "nri-socket", o.delivery.nriSocket, "the container runtime's NRI socket (--gpu-delivery=nri)")
	fs.StringVar(&o.delivery.naming, "gpu-device-naming", o.delivery.naming, `how a container's cards are named to the runtime: "env" (NVIDIA_VISIBLE_DEVICES, NVIDIA's container toolkit) or "cdi" (CDI devices nvidia.com/gpu=UUID)`)
	fs.StringVar(&o.delivery.isolation, "gpu-isolation", o.delivery.isolation, `what enforces a share of a card: "none", "hami-core" (HAMi-core's libvgpu.so, --hami-core-library) or "mps" (an NVIDIA MPS daemon, --mps-pipe-dir)`)
	fs.StringVar(&o.delivery.hamiCoreLibrary, "hami-core-library", "/usr/local/vgpu/libvgpu.so", "host path of HAMi-core's libvgpu.so (--gpu-isolation=hami-core)")
	fs.StringVar(&o.delivery.mpsPipeDirectory, "mps-pipe-dir", "/tmp/nvidia-mps", "host directory of the MPS control daemon's pipes (--gpu-isolation=mps)")
	fs.StringVar(&o.delivery.podResources, "pod-resources-socket", "/var/lib/kubelet/pod-resources/kubelet.sock", `the kubelet's PodResources socket, read to find drift and to locate the cards of other schedulers' pods (--gpu-delivery=nri; "" leaves it out)`)
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
	switch o.delivery.mode {
	case deliveryNone:
	case deliveryNRI:
		if o.once {
			return errors.New("--gpu-delivery=nri serves the runtime: it cannot go with --once")
		}
		if err := o.delivery.layer().Validate(); err != nil {
			return fmt.Errorf("--gpu-device-naming, --gpu-isolation: %w", err)
		}
	default:
		return fmt.Errorf("--gpu-delivery %q: want %q or %q", o.delivery.mode, deliveryNRI, deliveryNone)
	}
	return nil
}

func (d deliveryOptions) layer() deliver.Layer {
	return deliver.Layer{
		Naming:           deliver.DeviceNaming(d.naming),
		Isolation:        deliver.Isolation(d.isolation),
		HAMiCoreLibrary:  d.hamiCoreLibrary,
		MPSPipeDirectory: d.mpsPipeDirectory,
	}
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
		DRADriver:    o.draDriver,
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
		serveCtx, stopServing := context.WithCancel(ctx)
		served := make(chan struct{})
		go func() {
			defer close(served)
			if err := httpserve.Serve(serveCtx, srv, ln, 5*time.Second); err != nil {
				klog.ErrorS(err, "Serving metrics failed", "address", o.metricsAddr)
			}
		}()
		defer func() {
			stopServing()
			<-served
		}()
	}
	klog.InfoS("Starting the node agent", "node", o.nodeName, "interval", o.interval, "window", o.window, "root", o.root, "metrics", o.metricsAddr, "gpuDelivery", o.delivery.mode)
	if o.delivery.mode == deliveryNRI {
		stopDelivery, err := o.delivery.start(ctx, cfg, a)
		if err != nil {
			return err
		}
		defer stopDelivery()
	}
	a.Run(ctx)
	klog.InfoS("Stopped the node agent")
	return nil
}

// start starts the agent's delivery (Agent.StartDelivery) with a client
// for watches and the kubelet's PodResources API of the flags; the
// returned function stops it.
func (d deliveryOptions) start(ctx context.Context, cfg *rest.Config, a *agent.Agent) (stop func(), err error) {
	// Watches outlive agentRequestTimeout: their client has none.
	watchCfg := rest.CopyConfig(cfg)
	watchCfg.Timeout = 0
	watchClient, err := kubernetes.NewForConfig(watchCfg)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	opts := agent.DeliveryOptions{WatchClient: watchClient, Layer: d.layer(), SocketPath: d.nriSocket}
	closePodResources := func() {}
	if d.podResources != "" {
		var closer io.Closer
		if opts.PodResources, closer, err = deliver.DialPodResources(d.podResources); err != nil {
			return nil, fmt.Errorf("--pod-resources-socket: %w", err)
		}
		closePodResources = func() { _ = closer.Close() }
	}
	stopDelivery, err := a.StartDelivery(ctx, opts)
	if err != nil {
		closePodResources()
		return nil, err
	}
	return func() {
		stopDelivery()
		closePodResources()
	}, nil
}
