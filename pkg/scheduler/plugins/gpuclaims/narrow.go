package gpuclaims

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// Narrowing: fewer nodes tried, the nodes aisched would choose among kept.
// Upstream's allocator runs in Filter on every node the scheduler tries,
// and the scheduler tries nodes until it has its share of feasible ones
// (numFeasibleNodesToFind: 50 % less 1 % per 125 nodes, at least 100): on
// 5,000 empty nodes some 500 allocator runs a pod, three quarters of its
// cycle (docs/dra.md, "Throughput"). Among nodes with room, aisched's
// policy prefers the nodes in use (best fit, fragmentation); the empty
// nodes of one kind are alike to it. So GPUClaims' PreFilter lists, for a
// pod whose claims the ledger can judge (DRANeed), every node in use for
// GPU work that has room, every node the ledger has not read as listed,
// and emptyNodesToTry empty nodes with room, taken in turn from a cursor
// that moves on each cycle as kube-scheduler's start index does. The
// scheduler then tries only those. The list is made only when the
// scheduler would try at most half as many nodes from it as from every
// node, and only on a profile that leaves the share to kube-scheduler
// (percentageOfNodesToScore 0): a profile that asks for more nodes scored
// gets them.
//
// The scheduler looks no further than the list in that cycle, so when
// other filters (CPU, memory, affinity, taints) reject every node listed,
// PostFilter sends the pod back to the queue at once, and from then on it
// is tried on every node, until it is placed. Preemption never runs on a
// narrowed cycle's view: the list is not made for a pod that could
// preempt some pod (a priority above a pod bound), as preemption would
// then choose victims among the listed nodes only.

// narrowState is written to the cycle state of a narrowed cycle.
type narrowState struct{ listed int }

func (s *narrowState) Clone() fwk.StateData { return s }

const narrowKey fwk.StateKey = Name + "/narrowed"

// maxWidened bounds the pods remembered as tried on every node; past it
// the record starts again (a pod forgotten is narrowed once more, and
// widened again if that fails).
const maxWidened = 4096

// narrowing is what GPUClaims keeps across cycles to narrow them.
type narrowing struct {
	// empty is how many empty nodes a cycle lists (emptyNodesToTry);
	// adaptive whether the profile leaves the share of nodes to
	// kube-scheduler. Set at construction.
	empty    int
	adaptive bool

	mu sync.Mutex
	// cursor is where the next cycle starts looking for empty nodes.
	cursor int
	// widened are the pods whose narrowed cycle found no node.
	widened sets.Set[types.UID]
}

// nodesToFind is kube-scheduler's numFeasibleNodesToFind with the
// adaptive share (percentageOfNodesToScore 0): how many feasible nodes
// the scheduler looks for among n.
func nodesToFind(n int) int {
	const minNodes, minPercent = 100, 5
	if n < minNodes {
		return n
	}
	percent := max(50-n/125, minPercent)
	return max(n*percent/100, minNodes)
}

// narrowed returns the nodes a pod with need is tried on, or nil to try
// it as the scheduler would. ns is the need's scan (s.mu of the room scan
// held), unsure the nodes whose slices the ledger has not read as listed.
func (pl *GPUClaims) narrowed(pod *corev1.Pod, ns *needScan, nodes []fwk.NodeInfo, unsure sets.Set[string]) sets.Set[string] {
	n := &pl.narrow
	if n.empty == 0 || !n.adaptive || len(nodes) == 0 {
		return nil
	}
	if p := pod.Spec.PreemptionPolicy; (p == nil || *p != corev1.PreemptNever) && pl.gpus.PodBelow(corev1helpers.PodPriority(pod)) {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.widened.Has(pod.UID) {
		return nil
	}
	most := len(ns.open) + unsure.Len() + n.empty
	if 2*nodesToFind(most) > nodesToFind(len(nodes)) {
		return nil
	}
	out := make(sets.Set[string], most)
	for node := range ns.open {
		out.Insert(node)
	}
	for node := range unsure {
		out.Insert(node)
	}
	taken, i := 0, 0
	for ; i < len(nodes) && taken < n.empty; i++ {
		name := nodes[(n.cursor+i)%len(nodes)].Node().Name
		if ns.short[name] || ns.open[name] || out.Has(name) {
			continue
		}
		out.Insert(name)
		taken++
	}
	n.cursor = (n.cursor + i) % len(nodes)
	if out.Len() == 0 {
		return nil
	}
	return out
}

// widen records that the pod is tried on every node from now on, until
// it is placed (forget).
func (n *narrowing) widen(uid types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.widened == nil || n.widened.Len() >= maxWidened {
		n.widened = sets.New[types.UID]()
	}
	n.widened.Insert(uid)
}

// forget forgets a placed pod.
func (n *narrowing) forget(uid types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.widened.Delete(uid)
}

// PostFilter: after a narrowed cycle found no node, the pod goes back to
// the queue at once to be tried on every node; otherwise upstream's. The
// narrowed miss is UnschedulableAndUnresolvable, which ends the PostFilter
// plugins there: neither upstream's PostFilter (which may deallocate the
// pod's claims) nor those after GPUClaims (Coscheduling's, which would
// release a gang's waiting members or back off a team queue's admission)
// treat it as a failure; the aisched profiles list GPUClaims before
// Coscheduling. Preemption runs before, and finds nothing: a pod that
// could preempt is never narrowed.
func (pl *GPUClaims) PostFilter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	data, err := cs.Read(narrowKey)
	if err != nil {
		return pl.DynamicResources.PostFilter(ctx, cs, pod, m)
	}
	pl.narrow.widen(pod.UID)
	pl.handle.Activate(klog.FromContext(ctx), map[string]*corev1.Pod{pod.Namespace + "/" + pod.Name: pod})
	return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("no node fits of the %d tried first (nodes in use with room for the pod's claims and some empty ones); trying every node", data.(*narrowState).listed))
}
