package gpustate

import (
	"math/bits"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/pkg/gpu"
)

type holding struct {
	node  string
	cards []int
}

// ObservePod records the cards of a bound, running pod from its assigned
// annotation, and forgets the pod once it has ended. It is the pod
// informer's add and update handler.
func (s *State) ObservePod(obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		s.Release(pod.UID, "")
		return
	}
	if pod.Spec.NodeName == "" {
		// An unbound pod may carry the annotation of an attempt that failed
		// to bind; only binding makes it true.
		return
	}
	cards, ok := gpu.ParseIndices(pod.Annotations[gpu.AssignedAnnotation])
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods[pod.UID] = holding{node: pod.Spec.NodeName, cards: cards}
}

// ForgetPod forgets a deleted pod's cards; the pod informer's delete handler.
func (s *State) ForgetPod(obj interface{}) {
	if pod, ok := obj.(*corev1.Pod); ok {
		s.Release(pod.UID, "")
	}
}

// Assign records that the pod holds the cards of node (Reserve).
func (s *State) Assign(uid types.UID, node string, cards []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods[uid] = holding{node: node, cards: cards}
}

// Release forgets the pod's cards. With a node name it only forgets cards
// on that node (Unreserve of a placement that was replaced does nothing).
func (s *State) Release(uid types.UID, node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.pods[uid]; ok && (node == "" || h.node == node) {
		delete(s.pods, uid)
	}
}

// Held returns the cards the pod holds and on which node.
func (s *State) Held(uid types.UID) (node string, cards []int, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.pods[uid]
	return h.node, h.cards, ok
}

// Usage is what the pods of a node hold.
type Usage struct {
	// used has bit i set when card i is held by a pod with a known
	// assignment (a node has at most 64 cards).
	used uint64
	// Unknown counts the cards held by GPU pods that no aisched profile
	// placed (another scheduler's): which cards they have is not known.
	Unknown int64
}

// Used reports whether card i is held by a pod with a known assignment.
func (u Usage) Used(i int) bool { return i >= 0 && i < 64 && u.used&(1<<i) != 0 }

// Count is the number of cards known to be held.
func (u Usage) Count() int { return bits.OnesCount64(u.used) }

// Fit counts the cards that satisfy the per-card part of r (capable) and,
// of those, the ones not held, less the cards held by pods whose cards are
// unknown (free; it may be negative).
func (u Usage) Fit(cards []gpu.Card, r gpu.Request) (capable, free int64) {
	for i := range cards {
		if !cards[i].Satisfies(r) {
			continue
		}
		capable++
		if !u.Used(cards[i].Index) {
			free++
		}
	}
	return capable, free - u.Unknown
}

// Usage returns the cards held by the pods of nodeInfo, leaving out the
// pod being placed (UID skip, requesting skipGPUs cards) should the node
// already list it. It reads the node's pods from nodeInfo, so that
// preemption's what-if copies (victims removed) are honoured.
func (s *State) Usage(nodeInfo fwk.NodeInfo, skip types.UID, skipGPUs int64) Usage {
	var u Usage
	requested := nodeInfo.GetRequested().GetScalarResources()[gpu.ResourceName]
	if requested == 0 {
		// No pod of the node asks for GPUs (the common case of idle nodes).
		return u
	}
	node := nodeInfo.Node().Name
	var known int64
	s.mu.RLock()
	for _, pi := range nodeInfo.GetPods() {
		pod := pi.GetPod()
		if pod.UID == skip {
			requested -= skipGPUs
			continue
		}
		if h, ok := s.pods[pod.UID]; ok && h.node == node {
			for _, c := range h.cards {
				if c >= 0 && c < 64 {
					u.used |= 1 << c
				}
			}
			known += int64(len(h.cards))
		}
	}
	s.mu.RUnlock()
	u.Unknown = max(requested-known, 0)
	return u
}
