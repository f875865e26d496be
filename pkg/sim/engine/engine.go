// Package engine runs the simulated clusters that `aisched sim` and
// `aisched whatif` place pods on. Two engines run the same scheduler (the
// same plugins, the same configuration, kube-scheduler's own scheduling
// cycle) and the same simulated kubelets (package nodesim):
//
//   - APIServer is `aisched up`'s cluster: a real etcd, kube-apiserver and
//     controllers, in real time. It models everything a cluster does,
//     ResourceQuota admission and controllers included, at the speed of a
//     real control plane.
//   - Fast has no apiserver: client-go's fake clientset with the apiserver
//     behaviours the scheduler and the kubelets rely on (fakeAPI), and a
//     virtual clock (package vclock) that jumps from one event to the next
//     once the cluster is quiet, so that arrivals, run durations, backoffs
//     and Permit timeouts cost no wall time. Of admission it models
//     priority and, when asked (Options.ResourceQuotas), ResourceQuota
//     for pods with its controller's counting; it cannot model LimitRange,
//     webhooks or controllers (Jobs, Deployments, garbage collection):
//     runs that need them use APIServer.
package engine

import (
	"context"
	"fmt"
	"time"

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
	// APIServer engine waits, the fast engine moves its clock from event
	// to event, each handled before the next.
	RunUntil(ctx context.Context, t time.Time) error
	// WaitAdmissible waits until the apiserver admits pods in the
	// namespaces (their service account and quotas are in place).
	WaitAdmissible(ctx context.Context, namespaces []string) error
	// KubeletHolders is the simulated kubelets' record of which pod holds
	// which card (nodesim.Simulator.Holders).
	KubeletHolders() map[string]string
	// Stop stops the cluster and frees what it holds.
	Stop() error
}

// Kind names an engine.
type Kind string

// The engines.
const (
	Fast      Kind = "fast"
	APIServer Kind = "apiserver"
)

// ParseKind reads an engine name.
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case Fast, APIServer:
		return k, nil
	}
	return "", fmt.Errorf("unknown engine %q: want %s or %s", s, Fast, APIServer)
}

// Options configure a cluster.
type Options struct {
	// NodePools are the simulated nodes.
	NodePools []clusterfile.NodePool
	// SchedulerConfig is the scheduler's configuration.
	SchedulerConfig *config.KubeSchedulerConfiguration
	// Services configures the scheduler-wide services; nil: defaults.
	Services *aischedconfig.SchedulerServices
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
}

// Start starts a cluster of the given kind.
func Start(ctx context.Context, kind Kind, opts Options) (Cluster, error) {
	if opts.Services == nil {
		opts.Services = aischedconfig.DefaultServices()
	}
	switch kind {
	case Fast:
		return startFast(ctx, opts)
	case APIServer:
		return startAPIServer(ctx, opts)
	}
	return nil, fmt.Errorf("unknown engine %q", kind)
}
