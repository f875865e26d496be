package gpuledger

import (
	"sync"
	"sync/atomic"

	fwk "k8s.io/kube-scheduler/framework"
)

// NodeMemo remembers, for each node of the scheduler's snapshot, the last
// value a plugin computed from the node's NodeInfo and its record in the
// ledger for a key (what the value also depends on, such as the pod's
// request), and gives it back while neither changed: not the NodeInfo (its
// generation; the snapshot keeps one NodeInfo per node and updates it in
// place) nor the ledger's record (VersionOf). Between two cycles most
// nodes do not change, so a score computed for a run of alike pods costs
// a lookup per node instead of reading the ledger again.
//
// Give it only the snapshot's NodeInfos (Score's): preemption's what-if
// copies would each add an entry. Entries of deleted nodes are dropped.
// It is safe for concurrent use; calls for one node are serialised.
type NodeMemo[K comparable, V any] struct {
	state  *State
	byNode sync.Map // fwk.NodeInfo -> *nodeMemo[K, V]
}

type nodeMemo[K comparable, V any] struct {
	mu      sync.Mutex
	name    string
	version *atomic.Uint64
	ok      bool
	gen     int64
	ver     uint64
	key     K
	value   V
}

// NewNodeMemo returns an empty memo over the ledger s's records.
func NewNodeMemo[K comparable, V any](s *State) *NodeMemo[K, V] {
	m := &NodeMemo[K, V]{state: s}
	s.onNodeGone(m.forget)
	return m
}

// Get returns the value remembered for ni's node and key when it is
// current, else compute's, which it remembers.
func (m *NodeMemo[K, V]) Get(ni fwk.NodeInfo, key K, compute func() V) V {
	v, ok := m.byNode.Load(ni)
	if !ok {
		name := ni.Node().Name
		v, _ = m.byNode.LoadOrStore(ni, &nodeMemo[K, V]{name: name, version: m.state.VersionOf(name)})
	}
	e := v.(*nodeMemo[K, V])
	e.mu.Lock()
	defer e.mu.Unlock()
	gen := ni.GetGeneration()
	ver := e.version.Load()
	if e.ok && e.gen == gen && e.ver == ver && e.key == key {
		return e.value
	}
	// The version is read before compute reads the ledger: a change
	// meanwhile leaves the entry stale, not wrong.
	e.value = compute()
	e.ok, e.gen, e.ver, e.key = true, gen, ver, key
	return e.value
}

// forget drops the entries of a deleted node.
func (m *NodeMemo[K, V]) forget(name string) {
	m.byNode.Range(func(k, v any) bool {
		if v.(*nodeMemo[K, V]).name == name {
			m.byNode.Delete(k)
		}
		return true
	})
}
