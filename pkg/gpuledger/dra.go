package gpuledger

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/aisched/aisched/pkg/gpu"
)

// DRA is the ledger of the GPUs a DRA driver publishes in ResourceSlices
// and of the ResourceClaims allocated from them (package gpuledger/dra),
// as the card ledger consults it. The DRA ledger tells the State each
// node's cards and what claims hold of them through SetDRANode; the State
// asks it only what follows.
//
// Locking: the DRA ledger calls SetDRANode holding its own lock, so that
// its reports reach the State in the order of its changes; the State
// never calls a DRA method while it holds its own lock.
type DRA interface {
	// Start follows the driver's objects through the scheduler's
	// informers; it returns what tells that each informer's handler has
	// seen its first list (the State's HasSynced waits for them too), or
	// the error of registering a handler. The State's Start calls it
	// once.
	Start(ctx context.Context, factory informers.SharedInformerFactory) ([]cache.InformerSynced, error)
	// ClaimsSeen reports whether the DRA ledger has seen every claim the
	// pod names; Request reads only those.
	ClaimsSeen(pod *corev1.Pod) bool
	// Request returns what the pod's claims not yet allocated ask of the
	// driver's GPUs, in gpu.Request terms (RequestOf); the zero Request
	// when they ask nothing of them.
	Request(pod *corev1.Pod) gpu.Request
}

// UseDRA makes d the State's DRA ledger: the State starts it (Start),
// and consults it for the pods that ask for GPUs through claims
// (RequestOf, ClaimsSeen). Call it before Start; package dra's New does.
func (s *State) UseDRA(d DRA) { s.dra = d }

// DRA returns the State's DRA ledger (UseDRA); nil when it has none.
func (s *State) DRA() DRA { return s.dra }

// SetDRANode records what the DRA ledger knows of a node: the cards its
// driver publishes (nil when it publishes none), and what claims hold of
// them. A cards pointer other than the last one given is a change of the
// node's cards. Only the DRA ledger calls it, after every change of a
// node's devices or claims.
func (s *State) SetDRANode(node string, cards *gpu.Set, usage Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.cards[node]; e.dra != cards {
		switch {
		case e.dra == nil:
			s.draNodes.Add(1)
		case cards == nil:
			s.draNodes.Add(-1)
		}
		e.dra = cards
		if e == (nodeCards{}) {
			delete(s.cards, node)
		} else {
			s.cards[node] = e
		}
		s.dropCachedLocked(node)
	}
	if usage.used == 0 {
		delete(s.draUsage, node)
	} else {
		s.draUsage[node] = usage
	}
	if h := s.held[node]; h != nil {
		h.usage.Store(nil)
	}
}

// draUsageLocked is what claims hold of the node's cards; s.mu is held.
func (s *State) draUsageLocked(node string) Usage { return s.draUsage[node] }

// ClaimsSeen reports whether the ledger has seen every claim the pod names
// (RequestOf reads only those); without a DRA ledger, whether it names
// none.
func (s *State) ClaimsSeen(pod *corev1.Pod) bool {
	if s.dra == nil {
		return len(pod.Spec.ResourceClaims) == 0
	}
	return s.dra.ClaimsSeen(pod)
}

// RequestOf returns what a pod asks of GPUs, for the plugins that rank
// nodes: its GPU request (gpu.ParseRequest), or, for a pod that asks for
// the DRA driver's devices through its claims (and for no nvidia.com/gpu),
// what its claims not yet allocated ask, in the same terms (DRA.Request).
func (s *State) RequestOf(pod *corev1.Pod) (gpu.Request, error) {
	r, err := gpu.ParseRequest(pod)
	if err != nil || r.Count > 0 || len(pod.Spec.ResourceClaims) == 0 || s.dra == nil {
		return r, err
	}
	return s.dra.Request(pod), nil
}
