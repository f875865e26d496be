// Package heteropriority is the HeteroPriority score plugin for
// clusters that mix CPU-only and GPU nodes. CPU pods prefer CPU nodes and
// use the spare CPU of GPU nodes only when CPU nodes are full, so GPU pods
// do not find their GPUs stranded without CPU; GPU pods prefer the node
// whose free cards fit them most tightly and whose cards are best.
package heteropriority

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

// Name is the plugin name in KubeSchedulerConfiguration.
const Name = "HeteroPriority"

const preScoreStateKey = "PreScore" + Name

// HeteroPriority scores nodes by node type and, for GPU pods, card fit and quality.
type HeteroPriority struct {
	handle  fwk.Handle
	state   *gpuledger.State
	weights config.CardWeights
	// tier ranks CPU pods by node type alone (cpuPodScore: Tier).
	tier  bool
	kinds podkind.Set
	// scores remembers each node's score of the last GPU pod shape scored
	// while the node is unchanged.
	scores *gpuledger.NodeMemo[scoreKey, int64]
}

var (
	_ fwk.PreScorePlugin = &HeteroPriority{}
	_ fwk.ScorePlugin    = &HeteroPriority{}
	_ fwk.SignPlugin     = &HeteroPriority{}
)

// New builds the plugin; state is the scheduler's GPU ledger, started.
func New(_ context.Context, obj runtime.Object, h fwk.Handle, state *gpuledger.State) (fwk.Plugin, error) {
	args := &config.HeteroPriorityArgs{}
	if err := config.Decode(Name, obj, args); err != nil {
		return nil, err
	}
	return &HeteroPriority{handle: h, state: state, weights: *args.CardWeights,
		tier: args.CPUPodScore == config.CPUPodScoreTier, kinds: podkind.NewSet(args.PodKinds, state),
		scores: gpuledger.NewNodeMemo[scoreKey, int64](state)}, nil
}

// Name implements fwk.Plugin.
func (pl *HeteroPriority) Name() string { return Name }

// podRequest is what the score reads of a pod.
type podRequest struct {
	GPU      gpu.Request
	MilliCPU int64
	Memory   int64
}

// requestOf reads a pod's request; its GPU request is the ledger's
// (gpuledger.State.RequestOf), which reads a DRA pod's claims.
func (pl *HeteroPriority) requestOf(pod *corev1.Pod) (podRequest, error) {
	req, err := pl.state.RequestOf(pod)
	if err != nil {
		return podRequest{}, err
	}
	r := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return podRequest{GPU: req, MilliCPU: r.Cpu().MilliValue(), Memory: r.Memory().Value()}, nil
}

// SignPod implements fwk.SignPlugin: the score depends on the pod through
// its CPU, memory and GPU request only. The cluster-wide terms (the share
// of GPU nodes, the best card values) do not change when a pod is placed.
func (pl *HeteroPriority) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	r, err := pl.requestOf(pod)
	if err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	return []fwk.SignFragment{{Key: "aisched.io/" + Name, Value: r}}, nil
}

type preScoreState struct {
	req podRequest
	// key is everything a GPU pod's score depends on besides the node.
	key scoreKey
	// gpuShare is a: GPU nodes / all nodes.
	gpuShare float64
	// best card values in the cluster, the denominators of S_card.
	maxCC, maxBandwidth, maxClock float64
}

// Clone implements fwk.StateData; the state is read-only after PreScore.
func (s *preScoreState) Clone() fwk.StateData { return s }

// PreScore reads the cluster-wide terms of the score once per cycle. It
// skips the pods of kinds the plugin does not rank, and CPU pods ranked by
// tier where every node is of one tier (all score alike).
func (pl *HeteroPriority) PreScore(_ context.Context, cs fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	req, err := pl.requestOf(pod)
	if !pl.kinds.Has(podkind.Of(req.GPU, err)) {
		return fwk.NewStatus(fwk.Skip)
	}
	s, err := pl.preScore(req, err)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if s.req.GPU.Count == 0 && pl.tier && (s.gpuShare == 0 || s.gpuShare == 1) {
		return fwk.NewStatus(fwk.Skip)
	}
	cs.Write(preScoreStateKey, s)
	return nil
}

// preScore is the state of a cycle that scores a pod asking req (err: its
// request could not be read).
func (pl *HeteroPriority) preScore(req podRequest, err error) (*preScoreState, error) {
	if err != nil {
		// GPUFit rejects such pods first; without GPUFit score them as CPU pods.
		req = podRequest{}
	}
	f := pl.state.Facts()
	s := &preScoreState{req: req, maxCC: f.BestComputeCapability, maxBandwidth: f.BestBandwidthGBps, maxClock: f.BestClockMHz}
	if f.Nodes > 0 {
		s.gpuShare = float64(f.GPUNodes) / float64(f.Nodes)
	}
	if req.GPU.Count > 0 {
		s.key = keyOf(s)
	}
	return s, nil
}

// Score implements fwk.ScorePlugin; see the package README for the formulas.
func (pl *HeteroPriority) Score(_ context.Context, cs fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	var s *preScoreState
	if data, err := cs.Read(preScoreStateKey); err == nil {
		s = data.(*preScoreState)
	} else {
		// The batching path of the scheduler may score without PreScore.
		var err error
		if s, err = pl.preScore(pl.requestOf(pod)); err != nil {
			return 0, fwk.AsStatus(err)
		}
	}
	if s.req.GPU.Count == 0 {
		if pl.tier {
			return tierScore(pl.state.GPUNode(nodeInfo)), nil
		}
		return cpuPodScore(s.gpuShare, pl.state.GPUNode(nodeInfo), leastRequested(s.req, nodeInfo)), nil
	}
	return pl.scores.Get(nodeInfo, s.key, func() int64 { return pl.gpuPodScore(s, pod, nodeInfo) }), nil
}

// ScoreExtensions implements fwk.ScorePlugin: scores are already in [0, 100].
func (pl *HeteroPriority) ScoreExtensions() fwk.ScoreExtensions { return nil }
