// Package local runs a whole Kubernetes cluster in one process: embedded
// etcd, kube-apiserver, the kube-controller-manager controllers that
// workloads rely on, aisched's scheduler and simulated nodes with GPUs.
// `aisched up` and the integration tests start it through Start.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	kubescheduler "k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	aischedconfig "github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/charts/aisched/crds"
	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/local/datadir"
	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/scheduler"
)

const (
	// componentStopTimeout bounds the first stage of Stop, the components.
	// Each bounds its own shutdown below it: the controllers at
	// controllerShutdownTimeout, the platform's at platformShutdownTimeout.
	componentStopTimeout = 8 * time.Second
	// stopTimeout bounds the apiserver's stop, after the components (its
	// drain of requests and watches takes more than 3s on a loaded 2-core
	// machine), so that the whole stop stays under 15s; and the scheduler's
	// stop when the cluster restarts it.
	stopTimeout = 6 * time.Second
)

// Options configure a local cluster.
type Options struct {
	// DataDir holds etcd's data, the certificates and the kubeconfig. A
	// second Start on the same directory finds every object again.
	DataDir string
	// Fresh discards the cluster state in DataDir (etcd data, certificates,
	// kubeconfig) before starting; other files there are kept.
	Fresh bool
	// APIServerPort is the kube-apiserver port on 127.0.0.1; 0 picks a free one.
	APIServerPort int
	// AdvertiseAddress, when set, is the address the kube-apiserver listens
	// on instead of 127.0.0.1 and publishes as the kubernetes Service's
	// endpoint, so that real kubelets and their pods (in other network
	// namespaces or hosts) reach it: the control plane of real nodes.
	AdvertiseAddress net.IP
	// KubeconfigPath is where the admin kubeconfig is written; default DataDir/kubeconfig.
	KubeconfigPath string
	// Cluster describes the simulated nodes; default clusterfile.Default().
	Cluster *clusterfile.Cluster
	// SchedulerConfig is the in-process scheduler's configuration; default scheduler.LocalConfig().
	SchedulerConfig *config.KubeSchedulerConfiguration
	// SharedConfig configures the state every profile of the scheduler
	// shares (GPU ledger, job queue); default
	// aischedconfig.DefaultShared(). A restarted scheduler builds that
	// state afresh from it.
	SharedConfig *aischedconfig.SharedConfiguration
	// DeferScheduler leaves the scheduler stopped until StartScheduler, so
	// that a benchmark can queue its pods first.
	DeferScheduler bool
	// DiscardSchedulerEvents drops the scheduler's Events (Scheduled,
	// FailedScheduling) instead of writing them, for a replay of thousands
	// of pods where nobody reads them and the writes would cost a third of
	// the apiserver's work.
	DiscardSchedulerEvents bool
	// APIServerArgs are extra kube-apiserver flags, e.g. --runtime-config=...
	APIServerArgs []string
	// Nodes tunes the simulated kubelets; the clients and Nodes are filled in.
	Nodes nodesim.Options
	// LogOutput receives etcd's log; nil discards it. (The other components
	// log through klog, which the caller configures.)
	LogOutput io.Writer
	// Platform, when set, runs the AI service platform: its controllers
	// and admission webhook, the gateway, and the demo model servers behind
	// pods of the demo image.
	Platform *PlatformOptions
	// Warn receives warnings for the person running the cluster (the disk
	// of DataDir running low); nil logs them only.
	Warn func(string)
	// Console, when set, serves the web console.
	Console *ConsoleOptions
}

// Cluster is a running local cluster.
type Cluster struct {
	// Config is the admin (system:masters) client configuration.
	Config *rest.Config
	// Client is a clientset for Config.
	Client kubernetes.Interface
	// KubeconfigPath is the written admin kubeconfig.
	KubeconfigPath string
	// Host is the apiserver URL.
	Host string
	// DataDir is the data directory in use.
	DataDir string
	// AdminToken is the bearer token of aisched-admin (system:masters),
	// for the console's sign-in.
	AdminToken string

	lock    *os.File
	etcd    *embed.Etcd
	etcdURL string
	// apiCtx lives as long as the control plane.
	apiCtx     context.Context
	apiCancel  context.CancelFunc
	apiDone    <-chan error
	compCtx    context.Context
	compCancel context.CancelFunc
	compWG     sync.WaitGroup
	// running names the components whose run has not returned, so that a
	// stop that times out says which.
	runningMu sync.Mutex
	running   map[*component]struct{}

	// nodes simulates the kubelets; AddNodes grows it.
	nodes *nodesim.Simulator
	// platform is the service platform; nil when off.
	platform *platformComponents
	// console is the console's listener; nil when off.
	console net.Listener

	// The scheduler can be restarted on its own (RestartScheduler).
	schedMu         sync.Mutex
	scheduler       *component
	schedulerConfig *config.KubeSchedulerConfiguration
	sharedConfig    *aischedconfig.SharedConfiguration
	discardEvents   bool
	// runningScheduler is the scheduler while one runs.
	runningScheduler atomic.Pointer[kubescheduler.Scheduler]

	failOnce sync.Once
	failed   chan struct{}
	err      error
	stopOnce sync.Once
	stopErr  error
}

// DefaultDataDir is the per-user data directory: $XDG_DATA_HOME/aisched or
// ~/.local/share/aisched.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "aisched")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "aisched")
	}
	return filepath.Join(os.TempDir(), "aisched-"+strconv.Itoa(os.Getuid()))
}

// Start brings the cluster up and returns once the apiserver is ready, the
// controllers and the scheduler run, and every simulated node is Ready.
// Stop the cluster with Stop; cancelling ctx also stops it. It starts in
// stages, each on what the one before made: the data directory, the
// control plane (etcd and kube-apiserver), the APIs (aisched's CRDs, the
// platform's webhook), the components (controllers, nodes, scheduler,
// platform, console) under the supervisor, and the watch of what no
// component supervises (etcd, the apiserver, the disk). A stage that fails
// undoes what the earlier ones started.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	c := &Cluster{DataDir: opts.DataDir, KubeconfigPath: opts.KubeconfigPath, failed: make(chan struct{})}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	disk, err := c.openDataDir(ctx, opts)
	if err != nil {
		return nil, err
	}
	p, err := c.startControlPlane(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := c.installAPIs(ctx, opts, p); err != nil {
		return nil, err
	}
	if err := c.startComponents(ctx, opts, p); err != nil {
		return nil, err
	}
	c.watch(ctx, disk)
	return c, nil
}

// complete fills the options left empty with their defaults.
func (opts *Options) complete() error {
	if opts.DataDir == "" {
		return errors.New("no data directory")
	}
	if opts.Cluster == nil {
		opts.Cluster = clusterfile.Default()
	}
	if opts.SchedulerConfig == nil {
		var err error
		if opts.SchedulerConfig, err = scheduler.LocalConfig(); err != nil {
			return err
		}
	}
	if opts.SharedConfig == nil {
		opts.SharedConfig = aischedconfig.DefaultShared()
	}
	if opts.KubeconfigPath == "" {
		opts.KubeconfigPath = filepath.Join(opts.DataDir, "kubeconfig")
	}
	return nil
}

// The data directory's parts.
func etcdDir(dataDir string) string { return filepath.Join(dataDir, "etcd") }
func pkiDir(dataDir string) string  { return filepath.Join(dataDir, "pki") }

// openDataDir takes the data directory (DataDirInUseError when another
// cluster holds it), wipes it when Fresh, and checks its disk and etcd's
// database before anything writes there. The disk watch it returns keeps
// checking once the cluster runs.
func (c *Cluster) openDataDir(ctx context.Context, opts Options) (*datadir.DiskWatch, error) {
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	var err error
	if c.lock, err = lockDir(opts.DataDir); err != nil {
		return nil, err
	}
	if opts.Fresh {
		for _, path := range []string{etcdDir(opts.DataDir), pkiDir(opts.DataDir), opts.KubeconfigPath} {
			if err := os.RemoveAll(path); err != nil {
				return nil, fmt.Errorf("wipe data dir: %w", err)
			}
		}
	}
	warn := opts.Warn
	if warn == nil {
		warn = func(msg string) { klog.FromContext(ctx).Info("Warning: " + msg) }
	}
	disk := &datadir.DiskWatch{Dir: opts.DataDir, Free: datadir.FreeBytes, Warn: warn}
	if err := disk.Check(); err != nil {
		return nil, err
	}
	if err := datadir.CheckEtcdDB(etcdDir(opts.DataDir)); err != nil {
		return nil, err
	}
	return disk, nil
}

// startControlPlane starts etcd and kube-apiserver on the data directory's
// certificates, and returns once the apiserver is ready, its admin client
// made and its kubeconfig written. The apiserver's port is taken first
// (ListenError when it is in use), so that nothing starts for a port that
// cannot serve.
func (c *Cluster) startControlPlane(ctx context.Context, opts Options) (pki, error) {
	listenIP := net.IPv4(127, 0, 0, 1)
	if opts.AdvertiseAddress != nil {
		listenIP = opts.AdvertiseAddress
	}
	addr := net.JoinHostPort(listenIP.String(), strconv.Itoa(opts.APIServerPort))
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return pki{}, &ListenError{Listener: APIServerListener, Addr: addr, InUse: errors.Is(err, syscall.EADDRINUSE), Err: err}
	}
	c.Host = "https://" + listener.Addr().String()
	p := pki{dir: pkiDir(opts.DataDir)}
	if err := p.ensure(kubernetesServiceIP, opts.AdvertiseAddress); err != nil {
		listener.Close()
		return pki{}, err
	}
	if c.etcd, c.etcdURL, err = startEtcd(etcdDir(opts.DataDir), p, opts.LogOutput); err != nil {
		listener.Close()
		return pki{}, err
	}
	apiCtx, apiCancel := context.WithCancel(context.WithoutCancel(ctx))
	c.apiCtx, c.apiCancel = apiCtx, apiCancel
	c.apiDone, err = startAPIServer(apiCtx, apiserverConfig{listener: listener, etcdURL: c.etcdURL, pki: p, advertise: opts.AdvertiseAddress, extraArgs: opts.APIServerArgs})
	if err != nil {
		listener.Close()
		return pki{}, err
	}
	c.Config = adminRESTConfig(c.Host, p)
	if c.AdminToken, err = p.AdminToken(); err != nil {
		return pki{}, err
	}
	if err := waitReady(ctx, c.Config, c.apiDone); err != nil {
		return pki{}, err
	}
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return pki{}, err
	}
	if err := writeKubeconfig(c.KubeconfigPath, c.Host, p); err != nil {
		return pki{}, err
	}
	return p, nil
}

// installAPIs installs aisched's CRDs and, with the platform, opens its
// listeners and registers its admission webhook: before anything starts,
// so that the listener queues the apiserver's calls until the webhook
// serves, and a configuration left by the last run never points at a dead
// port.
func (c *Cluster) installAPIs(ctx context.Context, opts Options, p pki) error {
	if err := crds.Install(ctx, c.Config); err != nil {
		return err
	}
	if opts.Platform == nil {
		return nil
	}
	var err error
	if c.platform, err = listenPlatform(*opts.Platform, p); err != nil {
		return err
	}
	return c.platform.registerWebhook(ctx, c.Client)
}

// startComponents starts the components under the supervisor (the
// controllers, the simulated nodes, the scheduler unless deferred, the
// platform's controller and gateway, the console) and returns once each
// has started.
func (c *Cluster) startComponents(ctx context.Context, opts Options, p pki) error {
	aischedClient, err := versioned.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	nodeOpts := opts.Nodes
	nodeOpts.Client = c.Client
	nodeOpts.AischedClient = aischedClient
	nodeOpts.Nodes = nodesim.Nodes(opts.Cluster)
	if c.platform != nil {
		nodeOpts.Runtime = c.platform.runtime
	}
	if c.nodes, err = nodesim.New(nodeOpts); err != nil {
		return err
	}
	c.schedulerConfig, c.sharedConfig, c.discardEvents = opts.SchedulerConfig, opts.SharedConfig, opts.DiscardSchedulerEvents
	components := []*component{
		{name: "controllers", run: func(ctx context.Context, started chan<- struct{}) error {
			return runControllers(ctx, c.Config, p.CACert(), opts.AdvertiseAddress != nil, started)
		}},
		{name: "nodes", run: c.nodes.Run},
	}
	if !opts.DeferScheduler {
		c.scheduler = c.newSchedulerComponent()
		components = append(components, c.scheduler)
	}
	if c.platform != nil {
		components = append(components, c.platform.components(c.Config)...)
	}
	if opts.Console != nil {
		if c.console, err = listenConsole(*opts.Console); err != nil {
			return err
		}
		comp, err := c.consoleComponent(c.console, *opts.Console)
		if err != nil {
			return err
		}
		components = append(components, comp)
	}
	return c.startAll(ctx, components)
}

// watch fails the cluster when etcd or the apiserver stops, or the disk
// runs full, and stops it when ctx ends: what no component supervises.
func (c *Cluster) watch(ctx context.Context, disk *datadir.DiskWatch) {
	go disk.Run(c.apiCtx, datadir.CheckInterval, c.fail)
	go func() {
		select {
		case err := <-c.apiDone:
			if c.apiCtx.Err() == nil {
				c.fail(fmt.Errorf("kube-apiserver stopped: %w", err))
			}
		case err := <-c.etcd.Err():
			c.fail(fmt.Errorf("etcd stopped: %w", err))
		case <-c.apiCtx.Done():
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			if err := c.Stop(); err != nil {
				klog.FromContext(ctx).Error(err, "Stopping the local cluster")
			}
		case <-c.apiCtx.Done():
		}
	}()
}

// AddNodes adds simulated nodes to the running cluster, as if their kubelets
// had just started: the pools of cluster, which must have been parsed (and
// so defaulted and validated) with clusterfile. Their names must be new.
// They are not written to any cluster file, so a restart on the same data
// directory removes them.
func (c *Cluster) AddNodes(ctx context.Context, cluster *clusterfile.Cluster) error {
	return c.nodes.AddNodes(ctx, cluster)
}

// EtcdURL is etcd's client URL. It takes TLS only, from clients with a
// certificate of etcd's own CA in DataDir/pki/etcd (the apiserver's).
func (c *Cluster) EtcdURL() string { return c.etcdURL }

// Stop stops the components, then the apiserver, then etcd, and releases
// the data directory. It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		if c.compCancel != nil {
			c.compCancel()
			if !waitGroupTimeout(&c.compWG, componentStopTimeout) {
				errs = append(errs, fmt.Errorf("components did not stop within %s: %s", componentStopTimeout, strings.Join(c.runningNames(), ", ")))
			}
		}
		if c.apiCancel != nil {
			c.apiCancel()
			select {
			case err := <-c.apiDone:
				if err != nil {
					errs = append(errs, fmt.Errorf("kube-apiserver: %w", err))
				}
			case <-time.After(stopTimeout):
				errs = append(errs, errors.New("kube-apiserver did not stop in time"))
			}
		}
		if c.platform != nil {
			c.platform.close()
		}
		if c.etcd != nil {
			c.etcd.Close()
		}
		if c.lock != nil {
			c.lock.Close()
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// lockDir takes an exclusive lock on dir/lock so that two clusters never
// share one etcd data directory.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, &DataDirInUseError{Dir: dir}
	}
	return f, nil
}

// SchedulerPlugins is the plugin list of the running scheduler's profile
// (scheduler.ProfilePlugins); false when no scheduler runs or it has no
// such profile.
func (c *Cluster) SchedulerPlugins(profile string) (*config.Plugins, bool) {
	sched := c.runningScheduler.Load()
	if sched == nil {
		return nil, false
	}
	return scheduler.ProfilePlugins(sched, profile)
}

// KubeletHolders is the simulated kubelets' record of which pod holds
// which card (nodesim.Simulator.Holders).
func (c *Cluster) KubeletHolders() map[string]string { return c.nodes.Holders() }
