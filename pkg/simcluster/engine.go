package simcluster

import (
	"context"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	aischedconfig "github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
)

// Cluster is a running simulated cluster.
type Cluster interface {
	// Client and Aisched reach the cluster's objects.
	Client() kubernetes.Interface
	Aisched() versioned.Interface
	// Now is the cluster's time: the real time, or the fast engine's
	// virtual time.
	Now() time.Time
	// RunUntil lets the cluster work until its time reaches t: the
	// apiserver engine waits, the fast engine moves its clock from event
	// to event, each handled before the next.
	RunUntil(ctx context.Context, t time.Time) error
	// WaitAdmissible waits until the apiserver admits pods in the
	// namespaces (their service account and quotas are in place).
	WaitAdmissible(ctx context.Context, namespaces []string) error
	// KubeletHolders is the simulated kubelets' record of which pod holds
	// which card (nodesim.Simulator.Holders).
	KubeletHolders() map[string]string
	// SchedulerPlugins is the plugin list of the scheduler's profile, as
	// its framework lists them (scheduler.ProfilePlugins); false when the
	// scheduler has no such profile.
	SchedulerPlugins(profile string) (*config.Plugins, bool)
	// Stop stops the cluster and frees what it holds.
	Stop() error
}

// Engine starts simulated clusters of one kind: Fast, or the embedded
// control plane's (package apiserver, which links kube-apiserver and etcd,
// so that the runners that need only Fast do not).
type Engine struct {
	// Name names the engine on the command line (--engine).
	Name string
	// Parallel is how many of its clusters a runner runs at once unless
	// told.
	Parallel int
	// Start starts a cluster.
	Start func(ctx context.Context, opts Options) (Cluster, error)
}

// Fast is the fast engine, one run per core at once unless told: its
// runs are light.
var Fast = Engine{Name: "fast", Parallel: runtime.NumCPU(), Start: startFast}

// Options configure a cluster.
type Options struct {
	// NodePools are the simulated nodes.
	NodePools []clusterfile.NodePool
	// SchedulerConfig is the scheduler's configuration.
	SchedulerConfig *config.KubeSchedulerConfiguration
	// SharedConfig configures the state every profile shares; nil:
	// defaults.
	SharedConfig *aischedconfig.SharedConfiguration
	// NodesOnly registers the nodes but runs no pods: bound pods stay
	// Pending (the FGD protocol's replay).
	NodesOnly bool
	// MetricsInterval is how often the nodes publish their NodeMetrics;
	// negative: never (nodesim.Options).
	MetricsInterval time.Duration
	// DiscardSchedulerEvents drops the scheduler's Events.
	DiscardSchedulerEvents bool
	// ResourceQuotas makes the fast engine admit pods against their
	// namespaces' ResourceQuotas and count the quotas' use, as
	// kube-apiserver's quota admission and the quota controller do
	// (modelQuotas); without it the fast engine refuses to create a
	// ResourceQuota. The apiserver engine always does.
	ResourceQuotas bool
	// Slowdown makes the simulated kubelets run some pods longer than their
	// duration (nodesim.Options.Slowdown); nil: none.
	Slowdown func(pod *corev1.Pod, pods corelisters.PodLister) float64
}
