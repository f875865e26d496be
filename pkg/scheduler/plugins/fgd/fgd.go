// Package fgd is the FGD score plugin: Fragmentation Gradient Descent
// ("Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
// Fragmentation Gradient Descent", USENIX ATC '23). It learns the typical
// pod shapes from the pods it sees, measures how much of a node's free GPU
// those pods could not use (the node's fragmentation), and prefers the
// node, and for a pod that shares a card the card, whose fragmentation the
// placement grows least. It proposes that card to GPUFit, which owns card
// choice (gpuledger.CardProposer). See README.md for the formula and
// measurements.
package fgd

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

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
const Name = "FGD"

const preScoreStateKey fwk.StateKey = "PreScore" + Name

// FGD scores placements by the fragmentation they add.
type FGD struct {
	state  *gpuledger.State
	shapes *window
	exact  bool
	memos  memos
	// kinds are the pod kinds the plugin ranks nodes for; it learns the
	// shapes of every pod.
	kinds podkind.Set
}

var (
	_ fwk.PreFilterPlugin = &FGD{}
	_ fwk.PreScorePlugin  = &FGD{}
	_ fwk.ScorePlugin     = &FGD{}
	_ fwk.ScoreExtensions = &FGD{}
	_ fwk.SignPlugin      = &FGD{}

	_ gpuledger.CardProposer = &FGD{}
)

// New builds the plugin; state is the scheduler's GPU ledger, started. The
// plugin is its profile's card proposer.
func New(_ context.Context, obj runtime.Object, h fwk.Handle, state *gpuledger.State) (fwk.Plugin, error) {
	args := &config.FGDArgs{}
	if err := config.Decode(Name, obj, args); err != nil {
		return nil, err
	}
	shapes := newWindow(int(args.Window), args.CoveragePercent)
	if len(args.TypicalPods) > 0 {
		shapes = newFixedWindow(args.TypicalPods, args.CoveragePercent)
	}
	pl := &FGD{state: state, shapes: shapes, exact: args.Resolution == config.FGDExact, kinds: podkind.NewSet(args.PodKinds, state)}
	if err := state.SetProposer(h, Name, pl); err != nil {
		return nil, err
	}
	return pl, nil
}

// Name implements fwk.Plugin.
func (pl *FGD) Name() string { return Name }

// podShape reads the pod's CPU and GPU request; a pod's claims for the
// GPU driver's devices are read by the ledger as a GPU request
// (gpuledger.State.RequestOf).
func (pl *FGD) podShape(pod *corev1.Pod) (milliCPU int64, r gpu.Request, err error) {
	q := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[corev1.ResourceCPU]
	r, err = pl.state.RequestOf(pod)
	return q.MilliValue(), r, err
}

// shapeSign is what FGD's score reads of a pod.
type shapeSign struct {
	MilliCPU int64
	Request  gpu.Request
}

// SignPod implements fwk.SignPlugin. The score depends on the pod only
// through its shape, and on the node it scores; the scheduler scores again
// the node a batch placed its last pod on. Learning online, the typical
// shapes move by one pod of the window a cycle, so a batch's scores of the
// other nodes are that much stale; with typicalPods they are exact. Pods
// with an invalid GPU request are not batched.
func (pl *FGD) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	cpu, r, err := pl.podShape(pod)
	if err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	// The shape holds the pod's kind, which decides whether the plugin ranks.
	return []fwk.SignFragment{{Key: "aisched.io/" + Name, Value: shapeSign{MilliCPU: cpu, Request: r}}}, nil
}

// PreFilter learns the pod's shape: pods that no node fits are as much a
// part of the workload. (A pod an earlier PreFilter rejects, such as one
// with an invalid GPU request, is not seen.)
func (pl *FGD) PreFilter(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	cpu, r, err := pl.podShape(pod)
	if err != nil {
		return nil, nil
	}
	pl.shapes.observe(pod.UID, shapeOf(cpu, r))
	return nil, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin.
func (pl *FGD) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

type preScoreState struct {
	milliCPU int64
	req      gpu.Request
	shape    shape
	typical  []Typical
	cycle    uint64 // the memos'
}

// Clone implements fwk.StateData; the state is read-only.
func (s *preScoreState) Clone() fwk.StateData { return s }

// PreScore reads the pod and the typical shapes once per cycle; it skips
// the pods of kinds the plugin does not rank, and every pod on a cluster
// without GPUs, where no placement fragments anything.
func (pl *FGD) PreScore(_ context.Context, cs fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	cpu, r, err := pl.podShape(pod)
	if err != nil || !pl.kinds.Has(podkind.Of(r, nil)) || pl.state.Facts().GPUNodes == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	cs.Write(preScoreStateKey, pl.newState(cpu, r))
	return nil
}

// newState is the state of a cycle that scores a pod of the shape given.
func (pl *FGD) newState(milliCPU int64, r gpu.Request) *preScoreState {
	return &preScoreState{milliCPU: milliCPU, req: r, shape: shapeOf(milliCPU, r), typical: pl.shapes.Typical(), cycle: pl.memos.cycle()}
}

// Score is 100 * sigmoid((F_before - F_after) / 1000), F the node's
// fragmentation for the typical shapes. A pod that shares one card is
// tried on every card with room, and the node scores its best card, which
// ProposeCard proposes to GPUFit's Reserve; a whole-card pod, and a pod
// with a share of each of several cards, takes the cards GPUFit gives
// (the ledger's best fit); a CPU pod changes only the free CPU.
func (pl *FGD) Score(_ context.Context, cs fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := pl.readState(cs, pod)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	m := pl.memos.get(ni, s.cycle, pl.state)
	defer m.mu.Unlock()
	if m.current(ni) && m.typical == first(s.typical) && m.scored && m.shape == s.shape {
		return m.score, nil
	}
	ver := m.version.Load()
	n := pl.view(pod, s.req, ni)
	defer viewPool.Put(n)
	if !m.holds(n, s.typical) {
		m.record(n, s.typical, n.fragment(s.typical))
	}
	m.stamp(ni, ver)
	if !m.scored || m.shape != s.shape {
		m.score, m.card = pl.scoreView(n, s, m.before)
		m.scored, m.shape = true, s.shape
	}
	return m.score, nil
}

// ProposeCard implements gpuledger.CardProposer: the card of the node that
// the share r grows the fragmentation least on, the one Score scored the
// node with when it did in this state of the node, else computed now (the
// scheduler skips scoring when one node is feasible).
func (pl *FGD) ProposeCard(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, r gpu.Request, ni fwk.NodeInfo) (int, bool) {
	cpu, _, err := pl.podShape(pod)
	if err != nil || !r.Shared() || r.Count != 1 {
		return 0, false
	}
	typical := pl.shapes.Typical()
	m := pl.memos.get(ni, pl.memos.cycles.Load(), pl.state)
	defer m.mu.Unlock()
	ver := m.version.Load()
	n := pl.view(pod, r, ni)
	defer viewPool.Put(n)
	if !m.holds(n, typical) {
		m.record(n, typical, n.fragment(typical))
	}
	m.stamp(ni, ver)
	if !m.scored || m.shape != shapeOf(cpu, r) {
		s := &preScoreState{milliCPU: cpu, req: r, shape: shapeOf(cpu, r), typical: typical}
		m.score, m.card = pl.scoreView(n, s, m.before)
		m.scored, m.shape = true, s.shape
	}
	return m.card, m.card >= 0
}

// scoreView scores the pod of s on view n of fragmentation before, and
// returns the card a share of one card goes on (its index), else -1. It
// changes n.
func (pl *FGD) scoreView(n *nodeView, s *preScoreState, before float64) (score int64, card int) {
	if s.req.Shared() && s.req.Count == 1 {
		best, i := n.bestCard(s.typical, before, s.milliCPU, s.req)
		if i < 0 {
			// Filter found room; the state moved on since.
			return 0, -1
		}
		return pl.score(best), n.cards[i].Index
	}
	n.cpuFree -= s.milliCPU
	var buf [64]int
	picked, _ := n.usage.Pick(n.cards, s.req, buf[:0])
	for _, idx := range picked {
		for i := range n.free {
			switch {
			case n.cards[i].Index != idx:
			case s.req.Shared():
				n.take(i, s.req, 1)
			default:
				n.free[i], n.compute[i], n.mem[i] = 0, 0, 0
			}
		}
	}
	return pl.score(before - n.fragment(s.typical)), -1
}

// score is the paper's score of a change, or with Exact resolution the
// change itself in millionths of a card, for NormalizeScore to rank.
func (pl *FGD) score(change float64) int64 {
	if pl.exact {
		return int64(math.Round(change * 1000))
	}
	return score(change)
}

// viewPool keeps the node views that Score fills, a few KiB each: one
// per node and pod would be most of the plugin's cost in allocation and
// garbage collection.
var viewPool = sync.Pool{New: func() any { return new(nodeView) }}

// view returns the node as the fragmentation sees it, leaving out the pod
// being placed should the node already list it. The caller puts it back
// in viewPool.
func (pl *FGD) view(pod *corev1.Pod, r gpu.Request, ni fwk.NodeInfo) *nodeView {
	n := viewPool.Get().(*nodeView)
	n.cpuFree = ni.GetAllocatable().GetMilliCPU() - ni.GetRequested().GetMilliCPU()
	n.cards, n.free, n.compute, n.mem, n.usage = nil, nil, nil, nil, gpuledger.Usage{}
	set := pl.state.Cards(ni.Node())
	if set == nil {
		return n
	}
	usage := pl.state.Usage(ni, pod.UID, r.WholeCards())
	n.usage = usage
	k := min(len(set.Cards), len(n.buf[0]))
	n.cards, n.free, n.compute, n.mem = set.Cards, n.buf[0][:k], n.buf[1][:k], n.buf[2][:k]
	for i := range n.free {
		c := &set.Cards[i]
		if !c.Healthy || usage.Whole(c.Index) {
			// Nothing free.
			n.free[i], n.compute[i], n.mem[i] = 0, 0, 0
			continue
		}
		n.free[i] = usage.FreeOn(c)
		n.compute[i] = gpu.WholeCardMilli - usage.HeldMilli(c.Index)
		n.mem[i] = c.MemoryMiB - usage.HeldMemMiB(c.Index)
	}
	return n
}

// readState returns the PreScore state, or, when the scheduler scores
// without PreScore, the same read from the pod (without a card choice).
func (pl *FGD) readState(cs fwk.CycleState, pod *corev1.Pod) (*preScoreState, error) {
	if data, err := cs.Read(preScoreStateKey); err == nil {
		if s, ok := data.(*preScoreState); ok {
			return s, nil
		}
	}
	cpu, r, err := pl.podShape(pod)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return pl.newState(cpu, r), nil
}

// ScoreExtensions implements fwk.ScorePlugin.
func (pl *FGD) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore leaves the paper's scores (already 0..100) alone. With
// Exact resolution it ranks the changes: the largest (the least growth of
// fragmentation) scores 100, the next distinct value 99, and so on down
// to 0, so that only exactly equal changes tie.
func (pl *FGD) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *corev1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	if !pl.exact {
		return nil
	}
	distinct := make([]int64, 0, len(scores))
	for _, s := range scores {
		distinct = append(distinct, s.Score)
	}
	slices.Sort(distinct)
	distinct = slices.Compact(distinct)
	for i := range scores {
		// Position from the top among the distinct values.
		pos, _ := slices.BinarySearch(distinct, scores[i].Score)
		scores[i].Score = max(fwk.MaxScore-int64(len(distinct)-1-pos), 0)
	}
	return nil
}
