package fgd

import (
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"github.com/aisched/aisched/pkg/gpu"
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
// Memos are kept by node object (*corev1.Node), as gpuledger keeps cards: the
// scheduler hands the same object to every call until the node changes, a
// pointer hashes fast, and a string key would be an allocation per call.
type memos struct {
	byNode sync.Map // *corev1.Node -> *memo
	cycles atomic.Uint64
}

// pruneEvery cycles, the memos of node objects not scored for as long are
// dropped, so that replaced and deleted nodes do not stay.
const pruneEvery = 1024

// memo is one node's.
type memo struct {
	mu   sync.Mutex
	used atomic.Uint64 // the cycle it was last used in

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

// get returns node's memo, locked, marked used in cycle.
func (ms *memos) get(node *corev1.Node, cycle uint64) *memo {
	v, ok := ms.byNode.Load(node)
	if !ok {
		v, _ = ms.byNode.LoadOrStore(node, &memo{})
	}
	m := v.(*memo)
	m.mu.Lock()
	m.used.Store(cycle)
	return m
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
