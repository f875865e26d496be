// Package fgd is the FGD score plugin: Fragmentation Gradient Descent
// ("Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
// Fragmentation Gradient Descent", USENIX ATC '23). It learns the typical
// pod shapes from the pods it sees, measures how much of a node's free GPU
// those pods could not use (the node's fragmentation), and prefers the
// node, and for a pod that shares a card the card, whose fragmentation the
// placement grows least. See README.md for the formula and measurements.
package fgd

import (
	"context"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/scheduler/gpustate"
)

// Name is the plugin name in KubeSchedulerConfiguration.
const Name = "FGD"

const preScoreStateKey fwk.StateKey = "PreScore" + Name

// FGD scores placements by the fragmentation they add.
type FGD struct {
	state  *gpustate.State
	shapes *window
}

var (
	_ fwk.PreFilterPlugin = &FGD{}
	_ fwk.PreScorePlugin  = &FGD{}
	_ fwk.ScorePlugin     = &FGD{}
)

// New builds the plugin; state is the scheduler's shared GPU view.
func New(_ context.Context, obj runtime.Object, _ fwk.Handle, state *gpustate.State) (fwk.Plugin, error) {
	args := &config.FGDArgs{}
	if err := config.Decode(Name, obj, args); err != nil {
		return nil, err
	}
	return &FGD{state: state, shapes: newWindow(int(args.Window), args.CoveragePercent)}, nil
}

// Name implements fwk.Plugin.
func (pl *FGD) Name() string { return Name }

// podShape reads the pod's CPU and GPU request.
func podShape(pod *corev1.Pod) (milliCPU int64, r gpu.Request, err error) {
	q := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[corev1.ResourceCPU]
	r, err = gpu.ParseRequest(pod)
	return q.MilliValue(), r, err
}

// PreFilter learns the pod's shape: every pod reaches PreFilter, also the
// ones no node fits, which are as much a part of the workload.
func (pl *FGD) PreFilter(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if cpu, r, err := podShape(pod); err == nil {
		pl.shapes.observe(pod.UID, shapeOf(cpu, r))
	}
	return nil, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin.
func (pl *FGD) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

type preScoreState struct {
	milliCPU int64
	req      gpu.Request
	typical  []Typical
	choice   *gpustate.CardChoice
}

// Clone implements fwk.StateData; the state is read-only.
func (s *preScoreState) Clone() fwk.StateData { return s }

// PreScore reads the pod and the typical shapes once per cycle, and opens
// the cycle's card choice for GPUFit's Reserve.
func (pl *FGD) PreScore(_ context.Context, cs fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	cpu, r, err := podShape(pod)
	if err != nil {
		return fwk.NewStatus(fwk.Skip)
	}
	s := &preScoreState{milliCPU: cpu, req: r, typical: pl.shapes.Typical()}
	if r.Shared() {
		s.choice = gpustate.NewCardChoice()
		cs.Write(gpustate.CardChoiceKey, s.choice)
	}
	cs.Write(preScoreStateKey, s)
	return nil
}

// Score is 100 * sigmoid((F_before - F_after) / 1000), F the node's
// fragmentation for the typical shapes. A pod that shares a card is tried
// on every card with room, and the node scores its best card, which it
// hands to GPUFit's Reserve; a whole-card pod takes the lowest free cards
// that meet its constraints; a CPU pod changes only the free CPU.
func (pl *FGD) Score(_ context.Context, cs fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := pl.readState(cs, pod)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	var buf [64]int64
	n := nodeView{cpuFree: ni.GetAllocatable().GetMilliCPU() - ni.GetRequested().GetMilliCPU()}
	if set := pl.state.Cards(ni.Node()); set != nil && len(set.Cards) <= len(buf) {
		usage := pl.state.Usage(ni, pod.UID, s.req.WholeCards())
		n.cards, n.free = set.Cards, buf[:len(set.Cards)]
		for i := range set.Cards {
			if set.Cards[i].Healthy {
				n.free[i] = gpu.WholeCardMilli - usage.HeldMilli(set.Cards[i].Index)
			}
		}
	}
	before := n.fragment(s.typical)
	n.cpuFree -= s.milliCPU
	switch {
	case s.req.Shared():
		best, card := math.Inf(-1), -1
		for i := range n.free {
			if n.free[i] < s.req.Milli || !n.cards[i].Satisfies(s.req) {
				continue
			}
			n.free[i] -= s.req.Milli
			if change := before - n.fragment(s.typical); change > best {
				best, card = change, i
			}
			n.free[i] += s.req.Milli
		}
		if card < 0 {
			// Filter found room; the state moved on since.
			return 0, nil
		}
		if s.choice != nil {
			s.choice.Set(ni.Node().Name, n.cards[card].Index)
		}
		return score(best), nil
	case s.req.Count > 0:
		taken := int64(0)
		for i := range n.free {
			if taken < s.req.Count && n.free[i] == gpu.WholeCardMilli && n.cards[i].Satisfies(s.req) {
				n.free[i] = 0
				taken++
			}
		}
	}
	return score(before - n.fragment(s.typical)), nil
}

// readState returns the PreScore state, or, when the scheduler scores
// without PreScore, the same read from the pod (without a card choice).
func (pl *FGD) readState(cs fwk.CycleState, pod *corev1.Pod) (*preScoreState, error) {
	if data, err := cs.Read(preScoreStateKey); err == nil {
		if s, ok := data.(*preScoreState); ok {
			return s, nil
		}
	}
	cpu, r, err := podShape(pod)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return &preScoreState{milliCPU: cpu, req: r, typical: pl.shapes.Typical()}, nil
}

// ScoreExtensions implements fwk.ScorePlugin: scores are in [0, 100].
func (pl *FGD) ScoreExtensions() fwk.ScoreExtensions { return nil }
