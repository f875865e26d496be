package gpufit

import (
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/pkg/gpu"
)

// Skipping the nodes that cannot fit. On a busy GPU cluster most nodes
// have no free card, and a packing profile fills nodes on purpose; the
// scheduler would run every filter on each of them, and look further for
// the share of feasible nodes it scores. GPUFit's PreFilter lists the
// nodes with room instead (a PreFilterResult), so that the scheduler
// filters and scores only those; when no node has room, it says so at
// once instead of letting every node fail its filters.
//
// The scheduler treats the nodes a PreFilterResult leaves out as
// UnschedulableAndUnresolvable, and preemption never tries them. That is
// right for a node without room only when no pod on it could be preempted
// for the cards: the list is made only when no pod that holds cards has a
// lower priority than the pod (gpuledger.State.HolderBelow), or the pod
// never preempts.

const (
	// minCandidateNodes: on smaller clusters filtering every node costs
	// less than listing the candidates.
	minCandidateNodes = 100
	// skipShare: the list is made when at least 1/skipShare of the nodes
	// have no room. Each node listed costs three map operations (the list,
	// the scheduler's copy of it, its lookup of the name); each left out
	// saves its filters, and the scheduler scores its share of fewer
	// nodes. Measured on 1,000 GPU nodes, a list pays from about a quarter
	// of the nodes left out.
	skipShare = 4
)

// Why a GPU pod fits no node, when no node has the cards it asks for free.
const (
	reasonNoRoomWhole = "no node has as many free GPUs as the pod asks for"
	reasonNoRoomShare = "no node has a GPU with the pod's share left"
)

// candidates returns the nodes on which GPUFit's Filter may pass r (the
// snapshot's, nodes), or nil for every node: on small clusters, when few
// nodes are left out, or when preemption could free cards. When no node
// has room it returns the status that rejects the pod.
func (pl *GPUFit) candidates(pod *corev1.Pod, r gpu.Request, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if len(nodes) < minCandidateNodes || preempts(pod) && pl.state.HolderBelow(corev1helpers.PodPriority(pod)) {
		return nil, nil
	}
	pl.scan.mu.Lock()
	defer pl.scan.mu.Unlock()
	seen := pl.scan.update(nodes, pl)
	fits := 0
	for i := range seen {
		if seen[i].room(r) {
			fits++
		}
	}
	switch {
	case fits == 0 && r.Shared():
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reasonNoRoomShare)
	case fits == 0:
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reasonNoRoomWhole)
	case (len(nodes)-fits)*skipShare < len(nodes):
		return nil, nil
	}
	names := make(sets.Set[string], fits)
	for i := range seen {
		if n := &seen[i]; n.room(r) {
			names.Insert(n.name)
		}
	}
	return &fwk.PreFilterResult{NodeNames: names}, nil
}

// preempts reports whether the pod may preempt others.
func preempts(pod *corev1.Pod) bool {
	p := pod.Spec.PreemptionPolicy
	return p == nil || *p != corev1.PreemptNever
}

// nodeScan remembers the cards of the nodes of the snapshot's list, by
// position, as of the NodeInfo generation and the ledger's version of the
// node they were read at: the list keeps its order from cycle to cycle
// and few nodes change between two, so listing the candidates reads again
// only those, and otherwise costs two comparisons per node. The scheduler
// runs one PreFilter at a time; the lock only makes that safe to rely on.
type nodeScan struct {
	mu   sync.Mutex
	seen []seenNode
}

// seenNode is a node's free cards as the ledger and a NodeInfo generation
// count them.
type seenNode struct {
	ni      fwk.NodeInfo
	name    string
	version *atomic.Uint64
	gen     int64
	ver     uint64
	// whole is how many cards no pod holds, whole or in part (less those
	// of pods whose cards are unknown, and at most what the node offers
	// that no pod requests); compute and memMiB are the most compute (in
	// thousandths) and memory a card not held whole has left.
	whole, compute, memMiB int64
}

// room reports whether the node may have room for r: a whole-card request
// needs that many cards nobody holds, a share cards with as much compute
// and memory left (Filter checks the rest, on one card).
func (n *seenNode) room(r gpu.Request) bool {
	if !r.Shared() {
		return n.whole >= r.Count
	}
	return n.compute >= r.Milli && n.memMiB >= r.GPUMemMiB && (n.compute > 0 || n.memMiB > 0)
}

// update brings the record up to nodes and returns it, one entry per node
// in order.
func (s *nodeScan) update(nodes []fwk.NodeInfo, pl *GPUFit) []seenNode {
	if len(s.seen) != len(nodes) {
		s.seen = make([]seenNode, len(nodes))
	}
	for i, ni := range nodes {
		n := &s.seen[i]
		if n.ni != ni {
			name := ni.Node().Name
			*n = seenNode{ni: ni, name: name, version: pl.state.VersionOf(name), gen: -1}
		}
		if gen, ver := ni.GetGeneration(), n.version.Load(); n.gen != gen || n.ver != ver {
			n.gen, n.ver = gen, ver
			n.whole, n.compute, n.memMiB = pl.free(ni)
		}
	}
	return s.seen
}

// free counts a node's free cards from the ledger (seenNode.whole,
// compute, memMiB).
func (pl *GPUFit) free(ni fwk.NodeInfo) (whole, compute, memMiB int64) {
	allocatable := ni.GetAllocatable().GetScalarResources()[gpu.ResourceName]
	if allocatable == 0 {
		return 0, 0, 0
	}
	g := pl.state.NodeGPUsOf(ni)
	if g.Cards == nil || g.Usage.Unlocated() {
		return 0, 0, 0
	}
	for i := range g.Cards.Cards {
		c := &g.Cards.Cards[i]
		if !c.Healthy {
			continue
		}
		if !g.Usage.Used(c.Index) {
			whole++
		}
		if !g.Usage.Whole(c.Index) {
			compute = max(compute, gpu.WholeCardMilli-g.Usage.HeldMilli(c.Index))
			memMiB = max(memMiB, c.MemoryMiB-g.Usage.HeldMemMiB(c.Index))
		}
	}
	unrequested := allocatable - ni.GetRequested().GetScalarResources()[gpu.ResourceName]
	return min(whole-g.Usage.Unknown, unrequested), compute, memMiB
}
