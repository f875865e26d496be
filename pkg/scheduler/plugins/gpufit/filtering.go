package gpufit

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/pkg/gpu"
)

// Filter reasons; stable strings, so that the scheduler's summary counts
// nodes per reason ("0/4 nodes are available: 2 node(s) have no GPUs, ...").
// A node whose cards can never serve the pod says why in words of its own
// (never), the same for nodes with the same cards.
const (
	reasonNoGPUs    = "node(s) have no GPUs"
	reasonNotEnough = "node(s) have too few free GPUs that meet the pod's request"
	reasonNoShare   = "node(s) have no GPU with the pod's share left"
	// A pod another scheduler placed holds cards the node agent has not
	// located yet: any card chosen may be one of them (gpuledger.Usage's
	// Unlocated). The agent's annotation requeues the pod.
	reasonUnlocated = "node(s) have GPUs held by pods of another scheduler whose cards the node agent has not located yet"
)

// never is the status of a node whose cards cannot serve the request
// whatever pods leave it: UnschedulableAndUnresolvable, so that
// preemption does not try it, with the constraint no card meets, the
// pod's key and value, and the node's closest card (gpu.Request.Shortfall).
func never(req gpu.Request, cards []gpu.Card) *fwk.Status {
	why := req.Shortfall(cards)
	if why == "" {
		why = "have no GPU that meets the pod's per-card request"
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) "+why)
}

type preFilterState struct {
	req gpu.Request
}

// Clone implements fwk.StateData; the state is read-only.
func (s *preFilterState) Clone() fwk.StateData { return s }

// PreFilter reads the pod's GPU request and lists the nodes that may have
// room for it, or rejects it when none has (candidates.go). CPU pods skip
// the plugin; an invalid request makes the pod unschedulable until it is
// fixed, with a message that names the annotation and its value.
func (pl *GPUFit) PreFilter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	req, err := gpu.ParseRequest(pod)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	if req.Count == 0 {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if !pl.state.WaitSynced(ctx) {
		return nil, fwk.NewStatus(fwk.Unschedulable, "the scheduler has not yet seen which cards the bound pods hold")
	}
	cs.Write(preFilterStateKey, &preFilterState{req: req})
	return pl.candidates(pod, req, nodes)
}

// PreFilterExtensions implements fwk.PreFilterPlugin. Filter reads the
// pods of the node from the NodeInfo it is given, so preemption's what-if
// additions and removals need no bookkeeping here.
func (pl *GPUFit) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

func getPreFilterState(cs fwk.CycleState) (*preFilterState, bool) {
	s, err := cs.Read(preFilterStateKey)
	if err != nil {
		return nil, false
	}
	st, ok := s.(*preFilterState)
	return st, ok
}

// Filter admits nodes with enough free healthy cards that meet the
// per-card request. Cards of GPU pods that no aisched profile placed are
// counted as taken from the qualifying ones, the worst case, since which
// cards they hold is not known.
func (pl *GPUFit) Filter(_ context.Context, cs fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, ok := getPreFilterState(cs)
	if !ok {
		return fwk.AsStatus(fmt.Errorf("%s: no PreFilter state", Name))
	}
	// Counts first, without looking at the cards: a node without GPUs, or
	// with fewer free than asked (a full node, common when packing), is
	// rejected in two map lookups, before NodeResourcesFit's costlier
	// check (the aisched profiles run GPUFit's Filter first).
	allocatable := nodeInfo.GetAllocatable().GetScalarResources()[gpu.ResourceName]
	if s.req.Shared() {
		return pl.filterShared(pod, s.req, nodeInfo, allocatable)
	}
	requested := nodeInfo.GetRequested().GetScalarResources()[gpu.ResourceName]
	switch {
	case allocatable == 0:
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reasonNoGPUs)
	case allocatable < s.req.Count:
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node(s) have %d GPUs, fewer than the pod's %d", allocatable, s.req.Count))
	case allocatable-requested < s.req.Count:
		// Too few free cards; but a node whose cards could never serve
		// the pod says so, full or not, so that the pod is not sent to
		// preemption for it.
		if set := pl.state.Cards(nodeInfo.Node()); set != nil && s.req.Shortfall(set.Cards) != "" {
			return never(s.req, set.Cards)
		}
		return fwk.NewStatus(fwk.Unschedulable, reasonNotEnough)
	}
	set := pl.state.Cards(nodeInfo.Node())
	if set == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reasonNoGPUs)
	}
	if set.Interchangeable(allocatable, s.req) && pl.state.AllKnown(nodeInfo.Node().Name, requested) {
		// All cards alike, none shared, and the cards of every pod
		// known: no scan of the node's pods.
		if !set.First.Satisfies(s.req) {
			return never(s.req, set.Cards)
		}
		return nil
	}
	u := pl.state.Usage(nodeInfo, pod.UID, s.req.Count)
	capable, free := u.Fit(set.Cards, s.req)
	switch {
	case capable < s.req.Count:
		return never(s.req, set.Cards)
	case u.Unlocated():
		return fwk.NewStatus(fwk.Unschedulable, reasonUnlocated)
	case free < s.req.Count:
		return fwk.NewStatus(fwk.Unschedulable, reasonNotEnough)
	}
	return nil
}

// filterShared admits nodes with as many cards as the pod shares that
// meet the per-card request and have the pod's share left.
func (pl *GPUFit) filterShared(pod *corev1.Pod, req gpu.Request, nodeInfo fwk.NodeInfo, allocatable int64) *fwk.Status {
	set := pl.state.Cards(nodeInfo.Node())
	if allocatable == 0 || set == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reasonNoGPUs)
	}
	u := pl.state.Usage(nodeInfo, pod.UID, 0)
	capable, free := u.Fit(set.Cards, req)
	switch {
	case capable < req.Count:
		return never(req, set.Cards)
	case u.Unlocated():
		return fwk.NewStatus(fwk.Unschedulable, reasonUnlocated)
	case free < req.Count:
		return fwk.NewStatus(fwk.Unschedulable, reasonNoShare)
	}
	return nil
}
