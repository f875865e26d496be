// Package pccbalance is the PCCBalance score plugin: it prefers
// the node whose resource utilisation is least correlated with the pod's
// request (Pearson correlation coefficient), so that CPU-heavy pods go where
// memory or GPUs are busy and the other way round, balancing every node's
// CPU, memory and GPU use.
package pccbalance

import (
	"context"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/scheduler/podkind"
	"github.com/aisched/aisched/pkg/scheduler/workload"
)

// Name is the plugin name in KubeSchedulerConfiguration.
const Name = "PCCBalance"

// preScoreStateKey holds the pod's request vector for Score.
const preScoreStateKey = "PreScore" + Name

// PCCBalance scores nodes by the complementarity of the pod's request and
// the node's utilisation.
type PCCBalance struct {
	mode      config.PCCBalanceMode
	resources []corev1.ResourceName
	kinds     podkind.Set
	// yieldGPUNodes is cpuPodsOnGPUNodes: WithoutGPUWork; work tells
	// whether GPU pods arrive.
	yieldGPUNodes bool
	work          *workload.Workload
}

var (
	_ fwk.PreScorePlugin = &PCCBalance{}
	_ fwk.ScorePlugin    = &PCCBalance{}
	_ fwk.SignPlugin     = &PCCBalance{}
)

// New builds the plugin from its pluginConfig arguments; work is the
// scheduler's view of the arriving pods (nil: no pod asks for GPUs), and
// requests tells what a pod asks of GPUs (the GPU ledger; nil: read from
// the pod alone).
func New(_ context.Context, obj runtime.Object, _ fwk.Handle, work *workload.Workload, requests podkind.Requests) (fwk.Plugin, error) {
	args := &config.PCCBalanceArgs{}
	if err := config.Decode(Name, obj, args); err != nil {
		return nil, err
	}
	pl := &PCCBalance{mode: args.Mode, kinds: podkind.NewSet(args.PodKinds, requests), work: work,
		yieldGPUNodes: args.CPUPodsOnGPUNodes == config.CPUPodsOnGPUNodesWithoutGPUWork}
	for _, r := range args.Resources {
		pl.resources = append(pl.resources, corev1.ResourceName(r))
	}
	return pl, nil
}

// Name implements fwk.Plugin.
func (pl *PCCBalance) Name() string { return Name }

type preScoreState struct {
	// requests holds the pod's request of each resource, in the plugin's order.
	requests []int64
	// yield: the pod is a CPU pod and GPU work arrives, so every GPU node
	// scores the same (cpuPodsOnGPUNodes: WithoutGPUWork).
	yield bool
}

// Clone implements fwk.StateData; the state is read-only after PreScore.
func (s *preScoreState) Clone() fwk.StateData { return s }

// SignPod implements fwk.SignPlugin: the score depends on the pod only
// through its requests of the configured resources, and whether the
// plugin ranks its kind.
func (pl *PCCBalance) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	sign := []fwk.SignFragment{{Key: "aisched.io/" + Name, Value: pl.podRequests(pod)}}
	if !pl.kinds.All() || pl.yieldGPUNodes {
		kind := pl.kinds.Of(pod)
		sign = append(sign, fwk.SignFragment{Key: "aisched.io/" + Name + "/ranks", Value: [2]bool{pl.kinds.Has(kind), kind == config.PodKindCPU}})
	}
	return sign, nil
}

// PreScore computes the pod's request vector once per cycle; it skips the
// pods of kinds the plugin does not rank.
func (pl *PCCBalance) PreScore(_ context.Context, cs fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	kind := pl.kinds.Of(pod)
	if !pl.kinds.Has(kind) {
		return fwk.NewStatus(fwk.Skip)
	}
	cs.Write(preScoreStateKey, &preScoreState{requests: pl.podRequests(pod), yield: pl.yields(kind)})
	return nil
}

func (pl *PCCBalance) podRequests(pod *corev1.Pod) []int64 {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	out := make([]int64, len(pl.resources))
	for i, name := range pl.resources {
		q := req[name]
		if name == corev1.ResourceCPU {
			out[i] = q.MilliValue()
		} else {
			out[i] = q.Value()
		}
	}
	return out
}

// Score returns the complementarity of the pod and the node in [0, 100].
func (pl *PCCBalance) Score(_ context.Context, cs fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	var podReq []int64
	var yield bool
	if s, err := cs.Read(preScoreStateKey); err == nil {
		podReq, yield = s.(*preScoreState).requests, s.(*preScoreState).yield
	} else {
		// The batching path of the scheduler may score without PreScore.
		podReq, yield = pl.podRequests(pod), pl.yields(pl.kinds.Of(pod))
	}
	if yield && pl.work.GPUNode(nodeInfo) {
		return 0, nil
	}
	alloc, used := nodeInfo.GetAllocatable(), nodeInfo.GetRequested()
	// On the stack for the usual few resources: Score runs for every node.
	var pBuf, nBuf [8]float64
	p, n := pBuf[:0], nBuf[:0]
	if len(pl.resources) > len(pBuf) {
		p, n = make([]float64, 0, len(pl.resources)), make([]float64, 0, len(pl.resources))
	}
	p, n = p[:len(pl.resources)], n[:len(pl.resources)]
	for i, name := range pl.resources {
		a := amount(alloc, name)
		if a <= 0 {
			// A dimension the node lacks counts as 0 in both vectors.
			continue
		}
		p[i] = float64(podReq[i]) / float64(a)
		n[i] = float64(amount(used, name)) / float64(a)
	}
	rho := Pearson(p, n)
	return Complementarity(pl.mode, rho), nil
}

// ScoreExtensions implements fwk.ScorePlugin: scores are already in [0, 100].
func (pl *PCCBalance) ScoreExtensions() fwk.ScoreExtensions { return nil }

// yields reports whether a pod of the kind is a CPU pod that GPU nodes
// should all score the same for (cpuPodsOnGPUNodes: WithoutGPUWork, and
// GPU pods arrive).
func (pl *PCCBalance) yields(kind config.PodKind) bool {
	return pl.yieldGPUNodes && pl.work != nil && kind == config.PodKindCPU && pl.work.GPUWork()
}

// amount reads one resource of a scheduler Resource: millicores for CPU,
// bytes for memory and ephemeral storage, units for extended resources.
func amount(r fwk.Resource, name corev1.ResourceName) int64 {
	switch name {
	case corev1.ResourceCPU:
		return r.GetMilliCPU()
	case corev1.ResourceMemory:
		return r.GetMemory()
	case corev1.ResourceEphemeralStorage:
		return r.GetEphemeralStorage()
	case corev1.ResourcePods:
		return int64(r.GetAllowedPodNumber())
	default:
		return r.GetScalarResources()[name]
	}
}

// Pearson is the correlation coefficient of x and y; 0 when either has no
// variance (a constant vector correlates with nothing).
func Pearson(x, y []float64) float64 {
	if len(x) != len(y) || len(x) == 0 {
		return 0
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= float64(len(x))
	my /= float64(len(y))
	var sxy, sxx, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	// Variances below this are rounding noise of equal values.
	const eps = 1e-12
	if sxx < eps || syy < eps {
		return 0
	}
	return math.Max(-1, math.Min(1, sxy/math.Sqrt(sxx*syy)))
}

// Complementarity turns a correlation into a framework score in [0, 100]:
// abs: (1 - |rho|) * 100; signed (every other
// mode, which validation rules out): (1 - rho) / 2 * 100.
func Complementarity(mode config.PCCBalanceMode, rho float64) int64 {
	s := (1 - rho) / 2 * float64(fwk.MaxScore)
	if mode == config.PCCBalanceAbs {
		s = (1 - math.Abs(rho)) * float64(fwk.MaxScore)
	}
	return int64(math.Round(s))
}
