package gpuledger

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/aisched/aisched/pkg/gpu"
)

// priorities counts the pods that hold cards, or ask for whole cards
// another scheduler placed, by priority: what preemption could free for a
// GPU pod. It is kept under State.mu.
type priorities struct {
	of    map[types.UID]int32
	count map[int32]int
}

// notePriorityLocked records that pod holds cards, or is bound with a
// request for them; s.mu is held.
func (s *State) notePriorityLocked(pod *corev1.Pod) {
	p := corev1helpers.PodPriority(pod)
	if old, ok := s.prio.of[pod.UID]; ok {
		if old == p {
			return
		}
		s.forgetPriorityLocked(pod.UID)
	}
	if s.prio.of == nil {
		s.prio.of, s.prio.count = map[types.UID]int32{}, map[int32]int{}
	}
	s.prio.of[pod.UID] = p
	s.prio.count[p]++
}

// forgetPriorityLocked forgets the pod; s.mu is held.
func (s *State) forgetPriorityLocked(uid types.UID) {
	p, ok := s.prio.of[uid]
	if !ok {
		return
	}
	delete(s.prio.of, uid)
	if s.prio.count[p]--; s.prio.count[p] <= 0 {
		delete(s.prio.count, p)
	}
}

// observeUnknownLocked records the priority of a bound pod that asks for
// whole cards without a record of which it holds (another scheduler's):
// preemption may free its cards too. s.mu is held.
func (s *State) observeUnknownLocked(pod *corev1.Pod) {
	if pod.Spec.NodeName != "" && gpu.RequestedCards(pod) > 0 {
		s.notePriorityLocked(pod)
	}
}

// HolderBelow reports whether a pod that holds cards (or is bound with a
// request for whole cards) has a priority below p: only then can
// preemption free cards for a pod of priority p, so a scheduler that
// leaves full nodes out of a GPU pod's cycle (GPUFit's PreFilter) must
// keep them in.
func (s *State) HolderBelow(p int32) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for q := range s.prio.count {
		if q < p {
			return true
		}
	}
	return false
}
