package fgd

import (
	"slices"
	"sync"
	"sync/atomic"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
)

// memos remember, per node, the node's fragmentation and the score of the
// last pod shape scored on it, for as long as neither the node's free
// cards nor the typical shapes change. Between two cycles most nodes are
// untouched, and scoring them again would compute the same: a run of pods
// of one shape (a Deployment's replicas) costs a comparison per node, and
// any pod one fragmentation instead of two on the nodes that did not
// change. Nothing is kept across a change: the memo compares the whole
// view (free, compute and memory of every card, free CPU, the card set) and
// the typical shapes (the window's list, a new slice when it changes).
//
// Memos are kept by NodeInfo: the scheduler's snapshot keeps one NodeInfo
// per node for the node's life and updates it in place, a pointer hashes
// fast, and a string key would be an allocation per call. Each memo is
// stamped with the NodeInfo's generation and the GPU ledger's version of
// the node (gpuledger.State.VersionOf) it was last found current at: while
// neither moves, the node's view is the same, and a pod of the shape last
// scored scores without the view being read again (a run of alike pods
// costs a comparison per node).
type memos struct {
	byNode sync.Map // fwk.NodeInfo -> *memo
	cycles atomic.Uint64
}

// pruneEvery cycles, the memos of node objects not scored for as long are
// dropped, so that replaced and deleted nodes do not stay.
const pruneEvery = 1024

// memo is one node's.
type memo struct {
	mu   sync.Mutex
	used atomic.Uint64 // the cycle it was last used in

	// version is the node's counter in the GPU ledger; the view was last
	// found current at NodeInfo generation gen and ledger version ver.
	version *atomic.Uint64
	stamped bool
	gen     int64
	ver     uint64

	// The view and the typical shapes it was computed for, each list
	// known by its first element (a list held here is not reused).
	typical            *Typical
	cards              *gpu.Card
	cpuFree            int64
	free, compute, mem []int64
	before             float64 // the view's fragmentation

	// scored: score (and card, the card index for a share, else -1) is
	// what a pod of shape scores on the view.
	scored bool
	shape  shape
	score  int64
	card   int
}

// cycle starts a scheduling cycle and returns its number; every
// pruneEvery cycles it drops the memos unused for as long.
func (ms *memos) cycle() uint64 {
	c := ms.cycles.Add(1)
	if c%pruneEvery == 0 {
		ms.byNode.Range(func(k, v any) bool {
			if v.(*memo).used.Load()+pruneEvery < c {
				ms.byNode.Delete(k)
			}
			return true
		})
	}
	return c
}

// get returns the memo of ni's node, locked, marked used in cycle;
// ledger gives a new memo its node's version counter.
func (ms *memos) get(ni fwk.NodeInfo, cycle uint64, ledger *gpuledger.State) *memo {
	v, ok := ms.byNode.Load(ni)
	if !ok {
		v, _ = ms.byNode.LoadOrStore(ni, &memo{version: ledger.VersionOf(ni.Node().Name)})
	}
	m := v.(*memo)
	m.mu.Lock()
	m.used.Store(cycle)
	return m
}

// current reports whether the memo's view is ni's still: neither the
// NodeInfo nor the ledger's record of the node changed since it was
// stamped.
func (m *memo) current(ni fwk.NodeInfo) bool {
	return m.stamped && m.gen == ni.GetGeneration() && m.ver == m.version.Load()
}

// stamp records that the view is ni's at ledger version ver, read before
// the view was.
func (m *memo) stamp(ni fwk.NodeInfo, ver uint64) {
	m.stamped, m.gen, m.ver = true, ni.GetGeneration(), ver
}

// holds reports whether the memo was computed for view n and the typical
// shapes.
func (m *memo) holds(n *nodeView, typical []Typical) bool {
	return m.typical == first(typical) && m.cards == first(n.cards) && m.cpuFree == n.cpuFree &&
		slices.Equal(m.free, n.free) && slices.Equal(m.compute, n.compute) && slices.Equal(m.mem, n.mem)
}

// record remembers view n, the typical shapes, and the fragmentation
// before; it forgets the score.
func (m *memo) record(n *nodeView, typical []Typical, before float64) {
	m.typical, m.cards, m.cpuFree, m.before = first(typical), first(n.cards), n.cpuFree, before
	m.free = append(m.free[:0], n.free...)
	m.compute = append(m.compute[:0], n.compute...)
	m.mem = append(m.mem[:0], n.mem...)
	m.scored = false
}

// first is the list's first element, nil for an empty list.
func first[T any](list []T) *T {
	if len(list) == 0 {
		return nil
	}
	return &list[0]
}
