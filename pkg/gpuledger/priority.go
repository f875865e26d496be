package gpuledger

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/aisched/aisched/pkg/gpu"
)

// priorities counts pods by priority. The State keeps two, under
// State.mu: the pods that hold cards, or ask for whole cards another
// scheduler placed (what preemption could free for a GPU pod,
// HolderBelow), and every pod bound to a node (what preemption could
// free at all, PodBelow).
type priorities struct {
	of    map[types.UID]int32
	count map[int32]int
}

// note records the pod's priority.
func (c *priorities) note(pod *corev1.Pod) {
	p := corev1helpers.PodPriority(pod)
	if old, ok := c.of[pod.UID]; ok {
		if old == p {
			return
		}
		c.forget(pod.UID)
	}
	if c.of == nil {
		c.of, c.count = map[types.UID]int32{}, map[int32]int{}
	}
	c.of[pod.UID] = p
	c.count[p]++
}

// forget forgets the pod.
func (c *priorities) forget(uid types.UID) {
	p, ok := c.of[uid]
	if !ok {
		return
	}
	delete(c.of, uid)
	if c.count[p]--; c.count[p] <= 0 {
		delete(c.count, p)
	}
}

// below reports whether a pod counted has a priority below p.
func (c *priorities) below(p int32) bool {
	for q := range c.count {
		if q < p {
			return true
		}
	}
	return false
}

// notePriorityLocked records that pod holds cards, or is bound with a
// request for them; s.mu is held.
func (s *State) notePriorityLocked(pod *corev1.Pod) { s.prio.note(pod) }

// forgetPriorityLocked forgets the pod; s.mu is held.
func (s *State) forgetPriorityLocked(uid types.UID) { s.prio.forget(uid) }

// observeUnknownLocked records the priority of a bound pod that asks for
// whole cards without a record of which it holds (another scheduler's):
// preemption may free its cards too. s.mu is held.
func (s *State) observeUnknownLocked(pod *corev1.Pod) {
	if pod.Spec.NodeName != "" && gpu.RequestedCards(pod) > 0 {
		s.notePriorityLocked(pod)
	}
}

// observeBound records the priority of a pod bound to a node and not
// ended, and forgets any other (PodBelow).
func (s *State) observeBound(pod *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		s.bound.forget(pod.UID)
		return
	}
	s.bound.note(pod)
}

// HolderBelow reports whether a pod that holds cards (or is bound with a
// request for whole cards) has a priority below p: only then can
// preemption free cards for a pod of priority p, so a scheduler that
// leaves full nodes out of a GPU pod's cycle (GPUFit's PreFilter) must
// keep them in.
func (s *State) HolderBelow(p int32) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.prio.below(p)
}

// PodBelow reports whether a pod bound to a node, of any kind, has a
// priority below p: only then can preemption make room of any kind for a
// pod of priority p, so a scheduler that tries a pod on fewer nodes than
// have room for it (GPUClaims' narrowing) must not while this holds.
func (s *State) PodBelow(p int32) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.bound.below(p)
}
