package gpufit

import (
	"sync"

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
// filters and scores only those.
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

// candidates returns the nodes on which GPUFit's Filter may pass r (the
// snapshot's, nodes), or nil for every node: on small clusters, when few
// nodes are left out, when none has room (the filters then say why, node
// by node), or when preemption could free cards.
func (pl *GPUFit) candidates(pod *corev1.Pod, r gpu.Request, nodes []fwk.NodeInfo) *fwk.PreFilterResult {
	if len(nodes) < minCandidateNodes || preempts(pod) && pl.state.HolderBelow(corev1helpers.PodPriority(pod)) {
		return nil
	}
	pl.scan.mu.Lock()
	defer pl.scan.mu.Unlock()
	seen := pl.scan.update(nodes)
	fits := 0
	for i := range seen {
		if pl.room(&seen[i], r) {
			fits++
		}
	}
	if fits == 0 || (len(nodes)-fits)*skipShare < len(nodes) {
		return nil
	}
	names := make(sets.Set[string], fits)
	for i := range seen {
		if n := &seen[i]; pl.room(n, r) {
			names.Insert(n.name)
		}
	}
	return &fwk.PreFilterResult{NodeNames: names}
}

// room reports whether the node may have room for r, from the NodeInfo's
// counts alone: a whole-card request needs that many cards no pod
// requests (Filter checks this first), a share a card not held whole, or
// a card pods share.
func (pl *GPUFit) room(n *seenNode, r gpu.Request) bool {
	if n.allocatable == 0 {
		return false
	}
	if !r.Shared() {
		return n.free >= r.Count
	}
	return n.free >= 1 || pl.state.HasShared(n.name)
}

// nodeScan remembers the cards of the nodes of the snapshot's list, by
// position, as of the NodeInfo generation they were read at: the list
// keeps its order from cycle to cycle and few nodes change between two,
// so listing the candidates reads again only those, and otherwise costs
// a comparison per node. The scheduler runs one PreFilter at a time; the
// lock only makes that safe to rely on.
type nodeScan struct {
	mu   sync.Mutex
	seen []seenNode
}

// seenNode is a node's name and its cards as a NodeInfo generation counts
// them: nvidia.com/gpu allocatable, and of those not requested by its pods.
type seenNode struct {
	ni                fwk.NodeInfo
	gen               int64
	name              string
	allocatable, free int64
}

// update brings the record up to nodes and returns it, one entry per node
// in order.
func (s *nodeScan) update(nodes []fwk.NodeInfo) []seenNode {
	if len(s.seen) != len(nodes) {
		s.seen = make([]seenNode, len(nodes))
	}
	for i, ni := range nodes {
		n := &s.seen[i]
		if gen := ni.GetGeneration(); n.ni != ni || n.gen != gen {
			allocatable := ni.GetAllocatable().GetScalarResources()[gpu.ResourceName]
			*n = seenNode{ni: ni, gen: gen, name: ni.Node().Name, allocatable: allocatable,
				free: allocatable - ni.GetRequested().GetScalarResources()[gpu.ResourceName]}
		}
	}
	return s.seen
}

// preempts reports whether the pod may preempt others.
func preempts(pod *corev1.Pod) bool {
	p := pod.Spec.PreemptionPolicy
	return p == nil || *p != corev1.PreemptNever
}
