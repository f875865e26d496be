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
	// milli is the share of its one card a shared pod holds; 0 for whole
	// cards.
	milli int64
}

// ObservePod records the cards of a bound, running pod from its assigned
// annotation (and, for a pod that shares a card, its share from its
// request), and forgets the pod once it has ended. It is the pod
// informer's add and update handler; after a scheduler restart it
// rebuilds every holding.
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
	var milli int64
	if _, shared := pod.Annotations[gpu.MilliAnnotation]; shared {
		req, err := gpu.ParseRequest(pod)
		if err != nil || len(cards) != 1 {
			// A request that no aisched profile would have placed.
			return
		}
		milli = req.Milli
	}
	s.Assign(pod.UID, pod.Spec.NodeName, cards, milli)
}

// ForgetPod forgets a deleted pod's cards; the pod informer's delete handler.
func (s *State) ForgetPod(obj interface{}) {
	if pod, ok := obj.(*corev1.Pod); ok {
		s.Release(pod.UID, "")
	}
}

// Assign records that the pod holds the cards of node (Reserve): whole
// cards with milli 0, else the share milli of its one card.
func (s *State) Assign(uid types.UID, node string, cards []int, milli int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(uid, "")
	s.pods[uid] = holding{node: node, cards: cards, milli: milli}
	if milli > 0 {
		s.shared[node]++
	}
}

// Release forgets the pod's cards. With a node name it only forgets cards
// on that node (Unreserve of a placement that was replaced does nothing).
func (s *State) Release(uid types.UID, node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(uid, node)
}

func (s *State) releaseLocked(uid types.UID, node string) {
	h, ok := s.pods[uid]
	if !ok || (node != "" && h.node != node) {
		return
	}
	delete(s.pods, uid)
	if h.milli > 0 {
		if s.shared[h.node]--; s.shared[h.node] <= 0 {
			delete(s.shared, h.node)
		}
	}
}

// Held returns the cards the pod holds and on which node.
func (s *State) Held(uid types.UID) (node string, cards []int, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.pods[uid]
	return h.node, h.cards, ok
}

// maxCards bounds the cards of a node (Usage keeps one bit per card).
const maxCards = 64

// Usage is what the pods of a node hold.
type Usage struct {
	// used has bit i set when card i is held, whole or in part, by a pod
	// with a known assignment; whole has it set when a pod holds it whole.
	used, whole uint64
	// shared holds the thousandths of each card held by pods that share
	// it, by card index; nil when no pod of the node shares a card.
	shared *[maxCards]int64
	// Unknown counts the cards held by GPU pods that no aisched profile
	// placed (another scheduler's): which cards they have is not known.
	Unknown int64
}

// Used reports whether card i is held, whole or in part, by a pod with a
// known assignment: a whole-card pod cannot have it.
func (u Usage) Used(i int) bool { return i >= 0 && i < maxCards && u.used&(1<<i) != 0 }

// HeldMilli is the thousandths of card i held: 1000 for a card held whole.
func (u Usage) HeldMilli(i int) int64 {
	switch {
	case !u.Used(i):
		return 0
	case u.whole&(1<<i) != 0 || u.shared == nil:
		return gpu.WholeCardMilli
	}
	return min(u.shared[i], gpu.WholeCardMilli)
}

// Count is the number of cards known to be held, whole or in part.
func (u Usage) Count() int { return bits.OnesCount64(u.used) }

// Fit counts the cards that satisfy the per-card part of r (capable) and,
// of those, the ones r could have: for whole cards the cards not held,
// less the cards held by pods whose cards are unknown; for a share, the
// cards with at least that much left (free; it may be negative).
func (u Usage) Fit(cards []gpu.Card, r gpu.Request) (capable, free int64) {
	for i := range cards {
		if !cards[i].Satisfies(r) {
			continue
		}
		capable++
		if gpu.WholeCardMilli-u.HeldMilli(cards[i].Index) >= r.Milli && (r.Shared() || !u.Used(cards[i].Index)) {
			free++
		}
	}
	return capable, free - u.Unknown
}

// PickShared returns the card for a share r.Milli of one card: of the
// cards that satisfy r and have that much left, the one with the least
// left (best fit, ties to the lowest index), so that whole free cards stay
// whole. ok is false when no card has room.
func (u Usage) PickShared(cards []gpu.Card, r gpu.Request) (index int, ok bool) {
	var best int64
	for i := range cards {
		c := &cards[i]
		left := gpu.WholeCardMilli - u.HeldMilli(c.Index)
		if left < r.Milli || !c.Satisfies(r) {
			continue
		}
		if ok && (left > best || (left == best && c.Index > index)) {
			continue
		}
		best, index, ok = left, c.Index, true
	}
	return index, ok
}

// Pick appends to dst the cards for r: the card PickShared chooses for a
// share, else the best-fit whole cards of gpu.Pick. ok is false when the
// node has no room.
func (u Usage) Pick(cards []gpu.Card, r gpu.Request, dst []int) (picked []int, ok bool) {
	if r.Shared() {
		idx, ok := u.PickShared(cards, r)
		if !ok {
			return dst, false
		}
		return append(dst, idx), true
	}
	return gpu.Pick(cards, u.Used, r, dst)
}

// FreeMilli is the thousandths of the node's healthy cards not held, less
// the cards held by pods whose cards are unknown.
func (u Usage) FreeMilli(cards []gpu.Card) int64 {
	var free int64
	for i := range cards {
		if cards[i].Healthy {
			free += gpu.WholeCardMilli - u.HeldMilli(cards[i].Index)
		}
	}
	return max(free-u.Unknown*gpu.WholeCardMilli, 0)
}

// HasShared reports whether pods share cards of the node.
func (s *State) HasShared(node string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.shared[node] > 0
}

// Usage returns the cards held by the pods of nodeInfo, leaving out the
// pod being placed (UID skip, holding skipGPUs whole cards) should the
// node already list it. It reads the node's pods from nodeInfo, so that
// preemption's what-if copies (victims removed) are honoured.
func (s *State) Usage(nodeInfo fwk.NodeInfo, skip types.UID, skipGPUs int64) Usage {
	var u Usage
	requested := nodeInfo.GetRequested().GetScalarResources()[gpu.ResourceName]
	node := nodeInfo.Node().Name
	s.mu.RLock()
	defer s.mu.RUnlock()
	shared := s.shared[node] > 0
	if requested == 0 && !shared {
		// No pod of the node holds GPUs (the common case of idle nodes).
		return u
	}
	if shared {
		u.shared = new([maxCards]int64)
	}
	var known int64
	for _, pi := range nodeInfo.GetPods() {
		pod := pi.GetPod()
		if pod.UID == skip {
			requested -= skipGPUs
			continue
		}
		h, ok := s.pods[pod.UID]
		if !ok || h.node != node {
			continue
		}
		for _, c := range h.cards {
			if c < 0 || c >= maxCards {
				continue
			}
			u.used |= 1 << c
			if h.milli > 0 && u.shared != nil {
				u.shared[c] += h.milli
			} else {
				u.whole |= 1 << c
			}
		}
		if h.milli == 0 {
			known += int64(len(h.cards))
		}
	}
	u.Unknown = max(requested-known, 0)
	return u
}
