package gpuledger

import "sync/atomic"

// Versions count the changes of what the ledger knows of each node: its
// cards (inventory, labels) and what pods hold of them. A plugin that
// remembers per node what it computed from the ledger and the NodeInfo
// (FGD's fragmentation, say) computes again only when the node's version
// or the NodeInfo's generation moved, instead of reading the ledger for
// every node in every cycle. A node's counter exists from the first
// VersionOf until the node is deleted; changes before it count nothing,
// as nobody remembered anything yet.

// VersionOf returns the counter of node's changes. It stays the node's
// until the node is deleted (a node of the same name later gets a new
// one), so that a caller may keep it and read it without a lookup.
func (s *State) VersionOf(node string) *atomic.Uint64 {
	s.mu.RLock()
	v := s.versions[node]
	s.mu.RUnlock()
	if v != nil {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v = s.versions[node]; v == nil {
		v = new(atomic.Uint64)
		s.versions[node] = v
	}
	return v
}

// changedLocked counts a change of node; s.mu is held for writing.
func (s *State) changedLocked(node string) {
	if v := s.versions[node]; v != nil {
		v.Add(1)
	}
}

// goneLocked counts the last change of a deleted node and forgets its
// counter and what memos remember of it; s.mu is held for writing.
func (s *State) goneLocked(node string) {
	s.changedLocked(node)
	delete(s.versions, node)
	for _, forget := range s.gone {
		forget(node)
	}
}

// onNodeGone makes forget run with the name of each node deleted.
func (s *State) onNodeGone(forget func(node string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone = append(s.gone, forget)
}
