// Package loadaware is the LoadAware plugin: it scores nodes by
// their measured CPU, memory, network and disk load and by their
// performance, from the NodeMetrics that `aisched agent` publishes, and
// optionally filters out nodes above per-resource thresholds. Pods bound
// since a node's last sample are added from their declared load or their
// requests, so a burst of pods does not pile onto the node that looked idle;
// a sample older than a TTL is ignored and the node is scored from its pods'
// requests instead.
package loadaware

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/podload"
	"github.com/aisched/aisched/pkg/scheduler/podkind"
	"github.com/aisched/aisched/pkg/scheduler/workload"
)

// Name is the plugin name in KubeSchedulerConfiguration.
const Name = "LoadAware"

// MetricsEvent is the scheduler event resource of NodeMetrics objects,
// <plural>.<version>.<group> as the scheduler's dynamic informers want it.
const MetricsEvent fwk.EventResource = "nodemetrics.v1alpha1.aisched.io"

const preScoreStateKey = "PreScore" + Name

// LoadAware scores nodes by measured load and performance.
type LoadAware struct {
	handle fwk.Handle
	// metrics holds the NodeMetrics by name; nil when the CRD is not
	// served: every node is then scored from requests. It is read with
	// GetByKey, not a lister, whose Get builds an error for every node
	// without a sample.
	metrics cache.Indexer
	clock   clock.PassiveClock
	weights [numResources]float64
	// thresholds are fractions; 0 is none.
	thresholds [numResources]float64
	filtering  bool
	ttl        time.Duration
	// kinds are the pod kinds the plugin ranks nodes for.
	kinds podkind.Set
	// yieldGPUNodes is cpuPodsOnGPUNodes: WithoutGPUWork; work tells
	// whether GPU pods arrive.
	yieldGPUNodes bool
	work          *workload.Workload
	// lastPreScore is the state of the last PreScore, for the cycles that
	// score without one.
	lastPreScore atomic.Pointer[preScoreState]
	// stale records the nodes whose sample is too old, so that each
	// episode is logged and counted once.
	stale sync.Map
}

var (
	_ fwk.PreFilterPlugin   = &LoadAware{}
	_ fwk.FilterPlugin      = &LoadAware{}
	_ fwk.PreScorePlugin    = &LoadAware{}
	_ fwk.ScorePlugin       = &LoadAware{}
	_ fwk.EnqueueExtensions = &LoadAware{}
	_ fwk.SignPlugin        = &LoadAware{}
)

// New builds the plugin; metrics is the scheduler's NodeMetrics store (nil
// when the CRD is not served: every node is scored from its pods'
// requests), clk its clock, work its view of the arriving pods and
// requests what a pod asks of GPUs (the GPU ledger; nil: read from the pod
// alone), all part of the state every profile shares (scheduler.Shared).
func New(_ context.Context, obj runtime.Object, h fwk.Handle, metrics cache.Indexer, clk clock.PassiveClock, work *workload.Workload, requests podkind.Requests) (fwk.Plugin, error) {
	args := &config.LoadAwareArgs{}
	if err := config.Decode(Name, obj, args); err != nil {
		return nil, err
	}
	pl := newPlugin(h, args, clk)
	pl.metrics, pl.work = metrics, work
	pl.kinds = podkind.NewSet(args.PodKinds, requests)
	registerMetrics()
	return pl, nil
}

// newPlugin builds the plugin without a NodeMetrics lister.
func newPlugin(h fwk.Handle, args *config.LoadAwareArgs, clk clock.PassiveClock) *LoadAware {
	w, th := args.Weights, args.Thresholds
	pl := &LoadAware{
		handle:     h,
		clock:      clk,
		weights:    [numResources]float64{float64(w.CPU), float64(w.Memory), float64(w.Network), float64(w.Disk)},
		thresholds: [numResources]float64{float64(th.CPU) / 100, float64(th.Memory) / 100, float64(th.Network) / 100, float64(th.Disk) / 100},
		ttl:        time.Duration(*args.MetricsTTLSeconds) * time.Second,
		kinds:      podkind.NewSet(args.PodKinds, nil),

		yieldGPUNodes: args.CPUPodsOnGPUNodes == config.CPUPodsOnGPUNodesWithoutGPUWork,
	}
	for _, t := range pl.thresholds {
		pl.filtering = pl.filtering || t > 0
	}
	return pl
}

// Name implements fwk.Plugin.
func (pl *LoadAware) Name() string { return Name }

// PreFilter rejects a pod whose expected-load annotation cannot be read,
// naming the key and the value, instead of guessing its load.
func (pl *LoadAware) PreFilter(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if _, err := podload.Of(pod); err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	if !pl.filtering {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// SignPod implements fwk.SignPlugin: neither the filter nor the score
// reads the pod, only the nodes, and batching re-scores the node a batch
// placed its last pod on; a pod with a bad annotation is not signed.
func (pl *LoadAware) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if _, err := podload.Of(pod); err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	if pl.kinds.All() && !pl.yieldGPUNodes {
		return nil, nil
	}
	// Whether the plugin ranks the pod's kind, and whether it is a CPU pod
	// (which may yield GPU nodes).
	kind := pl.kinds.Of(pod)
	return []fwk.SignFragment{{Key: "aisched.io/" + Name + "/ranks", Value: [2]bool{pl.kinds.Has(kind), kind == config.PodKindCPU}}}, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin.
func (pl *LoadAware) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// EventsToRegister implements fwk.EnqueueExtensions. Only the filter
// rejects pods: a node's load falls with a new sample or when a pod on it
// goes away, and a pod with a bad annotation is retried when it changes.
func (pl *LoadAware) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	events := []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.Update}},
	}
	if !pl.filtering {
		return events, nil
	}
	events = append(events,
		fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}},
		fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}},
	)
	if pl.metrics != nil {
		events = append(events, fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: MetricsEvent, ActionType: fwk.Add | fwk.Update}})
	}
	return events, nil
}

// sample returns the node's NodeMetrics status when it is fresh; nil when
// there is none or it is older than the TTL. A node that turns stale is
// logged and counted once, until it is fresh again.
func (pl *LoadAware) sample(ctx context.Context, node string, now time.Time) *aischedv1alpha1.NodeMetricsStatus {
	if pl.metrics == nil {
		return nil
	}
	obj, ok, err := pl.metrics.GetByKey(node)
	if err != nil || !ok {
		return nil
	}
	m, ok := obj.(*aischedv1alpha1.NodeMetrics)
	if !ok {
		return nil
	}
	age := now.Sub(m.Status.SampleTime.Time)
	if age <= pl.ttl {
		if _, was := pl.stale.LoadAndDelete(node); was {
			klog.FromContext(ctx).Info("Node metrics fresh again", "node", node)
		}
		return &m.Status
	}
	if _, was := pl.stale.LoadOrStore(node, true); !was {
		staleSamples.Inc()
		klog.FromContext(ctx).Info("Node metrics older than the TTL; scoring the node from its pods' requests until a new sample arrives",
			"node", node, "sampleTime", m.Status.SampleTime.Time, "age", age.Round(time.Second), "ttl", pl.ttl)
	}
	return nil
}
