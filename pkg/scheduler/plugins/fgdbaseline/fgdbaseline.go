// Package fgdbaseline holds the two baselines of the FGD paper ("Beware of
// Fragmentation", USENIX ATC '23) as score plugins, BestFit and DotProd,
// written as that paper's simulator (hkust-adsl/kubernetes-scheduler-
// simulator) computes them, so that `aisched sim trace` can check its
// harness against the paper's published numbers. Both look at two
// dimensions only, CPU and GPU, in thousandths of a core and of a card;
// memory is left to NodeResourcesFit's filter, as in the paper.
package fgdbaseline

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
	"github.com/aisched/aisched/pkg/scheduler/podkind"
)

// Plugin names in KubeSchedulerConfiguration.
const (
	BestFitName = "BestFit"
	DotProdName = "DotProd"
)

// defaultMilliCPU is what a pod without a CPU request counts for, as the
// scheduler's non-zero requests (and the paper's simulator) count it.
const defaultMilliCPU = 100

// vectors is the state both plugins score from.
type vectors struct {
	state          *gpuledger.State
	maxCPU, maxGPU float64
	// kinds are the pod kinds the plugin ranks nodes for.
	kinds podkind.Set
	// gpuFree remembers each node's free GPU while the node is unchanged.
	gpuFree *gpuledger.NodeMemo[struct{}, int64]
}

func newVectors(plugin string, obj runtime.Object, state *gpuledger.State) (vectors, error) {
	args := &config.FGDBaselineArgs{}
	if err := config.Decode(plugin, obj, args); err != nil {
		return vectors{}, err
	}
	return vectors{state: state, maxCPU: float64(args.MaxMilliCPU), maxGPU: float64(args.MaxGPUs * gpu.WholeCardMilli), kinds: podkind.NewSet(args.PodKinds, state),
		gpuFree: gpuledger.NewNodeMemo[struct{}, int64](state)}, nil
}

// request is the pod's CPU (non-zero) and GPU in thousandths; a pod's
// claims for the GPU driver's devices count as the ledger reads them
// (gpuledger.State.RequestOf).
func (v vectors) request(pod *corev1.Pod) (cpu int64, r gpu.Request) {
	q := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[corev1.ResourceCPU]
	cpu = q.MilliValue()
	if cpu == 0 {
		cpu = defaultMilliCPU
	}
	// An invalid request never passes GPUFit's PreFilter; 0 here is moot.
	r, _ = v.state.RequestOf(pod)
	return cpu, r
}

// free is what the node has left: CPU in thousandths of a core, GPU in
// thousandths of a card (whole free cards and what shared cards have left),
// the latter remembered while the node is unchanged, and not looked for
// on a cluster without cards. The pod being scored is pending, so none of
// the node's holdings is its own.
func (v vectors) free(ni fwk.NodeInfo, cards bool) (cpu, gpuMilli int64) {
	cpu = ni.GetAllocatable().GetMilliCPU() - ni.GetRequested().GetMilliCPU()
	if !cards {
		return cpu, 0
	}
	gpuMilli = v.gpuFree.Get(ni, struct{}{}, func() int64 {
		if set := v.state.Cards(ni.Node()); set != nil {
			return v.state.Usage(ni, "", 0).FreeMilli(set.Cards)
		}
		return 0
	})
	return cpu, gpuMilli
}

// preScoreState is the pod's request, and whether the cluster has GPU
// nodes, read once per cycle.
type preScoreState struct {
	cpu, gpu int64
	cards    bool
}

// Clone implements fwk.StateData; the state is read-only.
func (s *preScoreState) Clone() fwk.StateData { return s }

// preScore writes the pod's request, or skips the pods of kinds the plugin
// does not rank.
func (v vectors) preScore(cs fwk.CycleState, key fwk.StateKey, pod *corev1.Pod) *fwk.Status {
	cpu, r := v.request(pod)
	if !v.kinds.Has(podkind.Of(r, nil)) {
		return fwk.NewStatus(fwk.Skip)
	}
	cs.Write(key, &preScoreState{cpu: cpu, gpu: r.TotalMilli(), cards: v.state.Facts().GPUNodes > 0})
	return nil
}

// podRequest reads the PreScore state, or the pod when the scheduler
// scored without PreScore (cards then says to look for them).
func (v vectors) podRequest(cs fwk.CycleState, key fwk.StateKey, pod *corev1.Pod) (cpu, gpuMilli int64, cards bool) {
	if s, err := cs.Read(key); err == nil {
		if st, ok := s.(*preScoreState); ok {
			return st.cpu, st.gpu, st.cards
		}
	}
	cpu, r := v.request(pod)
	return cpu, r.TotalMilli(), true
}

// signPod is the SignPlugin answer of both: the score depends on the pod
// only through its CPU and GPU request (which hold its kind).
func (v vectors) signPod(name string, pod *corev1.Pod) []fwk.SignFragment {
	cpu, r := v.request(pod)
	return []fwk.SignFragment{{Key: "aisched.io/" + name, Value: [2]int64{cpu, r.TotalMilli()}}}
}

// BestFit prefers the node left with the least CPU and GPU after the pod.
type BestFit struct{ vectors }

var (
	_ fwk.PreScorePlugin  = &BestFit{}
	_ fwk.ScorePlugin     = &BestFit{}
	_ fwk.ScoreExtensions = &BestFit{}
	_ fwk.SignPlugin      = &BestFit{}
)

// NewBestFit builds BestFit; state is the scheduler's GPU ledger, started.
func NewBestFit(_ context.Context, obj runtime.Object, _ fwk.Handle, state *gpuledger.State) (fwk.Plugin, error) {
	v, err := newVectors(BestFitName, obj, state)
	if err != nil {
		return nil, err
	}
	return &BestFit{v}, nil
}

// Name implements fwk.Plugin.
func (pl *BestFit) Name() string { return BestFitName }

// SignPod implements fwk.SignPlugin.
func (pl *BestFit) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return pl.signPod(BestFitName, pod), nil
}

// PreScore reads the pod's request.
func (pl *BestFit) PreScore(_ context.Context, cs fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	return pl.preScore(cs, BestFitName, pod)
}

// Score is int(100 * (1 - (0.5 (cpuFree-cpuReq)/maxCPU + 0.5 (gpuFree-gpuReq)/maxGPU))),
// truncated like the paper's; NormalizeScore then stretches the scores to
// [0, 100]. A node the pod does not fit (which the filters rule out)
// scores 0.
func (pl *BestFit) Score(_ context.Context, cs fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	cpuReq, gpuReq, cards := pl.podRequest(cs, BestFitName, pod)
	cpuFree, gpuFree := pl.free(ni, cards)
	return BestFitScore(cpuFree, gpuFree, cpuReq, gpuReq, pl.maxCPU, pl.maxGPU), nil
}

// BestFitScore is BestFit's raw score for what a node has free and what
// the pod asks, before normalisation.
func BestFitScore(cpuFree, gpuFree, cpuReq, gpuReq int64, maxCPU, maxGPU float64) int64 {
	if cpuFree < cpuReq || gpuFree < gpuReq {
		return 0
	}
	left := 0.5*float64(cpuFree-cpuReq)/maxCPU + 0.5*float64(gpuFree-gpuReq)/maxGPU
	return int64((1 - left) * float64(fwk.MaxScore))
}

// ScoreExtensions implements fwk.ScorePlugin.
func (pl *BestFit) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore maps the lowest score to 0 and the highest to 100 in
// whole numbers, (s-lowest)*100/(highest-lowest); all equal gives all 0.
func (pl *BestFit) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *corev1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	if len(scores) == 0 {
		return nil
	}
	lowest, highest := scores[0].Score, scores[0].Score
	for _, s := range scores {
		lowest, highest = min(lowest, s.Score), max(highest, s.Score)
	}
	for i := range scores {
		if highest == lowest {
			scores[i].Score = 0
			continue
		}
		scores[i].Score = (scores[i].Score - lowest) * fwk.MaxScore / (highest - lowest)
	}
	return nil
}

// DotProd prefers the node whose free CPU and GPU are least aligned with
// the pod's request: score 100 * (1 - dot/2) over normalised vectors.
type DotProd struct{ vectors }

var (
	_ fwk.PreScorePlugin = &DotProd{}
	_ fwk.ScorePlugin    = &DotProd{}
	_ fwk.SignPlugin     = &DotProd{}
)

// NewDotProd builds DotProd; state is the scheduler's GPU ledger, started.
func NewDotProd(_ context.Context, obj runtime.Object, _ fwk.Handle, state *gpuledger.State) (fwk.Plugin, error) {
	v, err := newVectors(DotProdName, obj, state)
	if err != nil {
		return nil, err
	}
	return &DotProd{v}, nil
}

// Name implements fwk.Plugin.
func (pl *DotProd) Name() string { return DotProdName }

// SignPod implements fwk.SignPlugin.
func (pl *DotProd) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return pl.signPod(DotProdName, pod), nil
}

// PreScore reads the pod's request.
func (pl *DotProd) PreScore(_ context.Context, cs fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	return pl.preScore(cs, DotProdName, pod)
}

// Score is DotProdScore of the node's free resources and the pod's request.
func (pl *DotProd) Score(_ context.Context, cs fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	cpuReq, gpuReq, cards := pl.podRequest(cs, DotProdName, pod)
	cpuFree, gpuFree := pl.free(ni, cards)
	return DotProdScore(cpuFree, gpuFree, cpuReq, gpuReq, pl.maxCPU, pl.maxGPU), nil
}

// DotProdScore is int(100 * (1 - ((cpuFree/maxCPU)(cpuReq/maxCPU) +
// (gpuFree/maxGPU)(gpuReq/maxGPU)) / 2)), truncated like the paper's, and
// 0 when the node has less CPU free than asked. Scores need no
// normalisation: they are in [0, 100] as long as nothing exceeds the maxima.
func DotProdScore(cpuFree, gpuFree, cpuReq, gpuReq int64, maxCPU, maxGPU float64) int64 {
	if cpuFree < cpuReq {
		return 0
	}
	dot := float64(cpuFree)/maxCPU*float64(cpuReq)/maxCPU + float64(gpuFree)/maxGPU*float64(gpuReq)/maxGPU
	return min(max(int64((1-dot/2)*float64(fwk.MaxScore)), 0), fwk.MaxScore)
}

// ScoreExtensions implements fwk.ScorePlugin.
func (pl *DotProd) ScoreExtensions() fwk.ScoreExtensions { return nil }
