package gpustate

import (
	"math/bits"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/pkg/gpu"
)

type holding struct {
	node  string
	cards []int
	// share is what a shared pod holds of its one card; zero for whole
	// cards.
	share Share
}

// Share is what a pod that shares a card holds of it: thousandths of its
// compute and MiB of its memory, either of which may be 0.
type Share struct {
	Milli, MemMiB int64
}

// IsZero reports whether s holds nothing: a whole-card holding.
func (s Share) IsZero() bool { return s == Share{} }

// ShareOf is the share a request holds; zero for whole cards.
func ShareOf(r gpu.Request) Share { return Share{Milli: r.Milli, MemMiB: r.GPUMemMiB} }

// shareKeys are the annotations that make a pod's request a share.
var shareKeys = [...]string{gpu.MilliAnnotation, gpu.GPUMemAnnotation, gpu.HAMiGPUCoresAnnotation, gpu.HAMiGPUMemAnnotation}

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
	var share Share
	for _, k := range shareKeys {
		if _, ok := pod.Annotations[k]; !ok {
			continue
		}
		req, err := gpu.ParseRequest(pod)
		if err != nil || len(cards) != 1 {
			// A request that no aisched profile would have placed.
			return
		}
		share = ShareOf(req)
		break
	}
	s.Assign(pod.UID, pod.Spec.NodeName, cards, share)
}

// ForgetPod forgets a deleted pod's cards; the pod informer's delete handler.
func (s *State) ForgetPod(obj interface{}) {
	if pod, ok := obj.(*corev1.Pod); ok {
		s.Release(pod.UID, "")
	}
}

// Assign records that the pod holds the cards of node (Reserve): whole
// cards with a zero share, else the share of its one card.
func (s *State) Assign(uid types.UID, node string, cards []int, share Share) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(uid, "")
	s.pods[uid] = holding{node: node, cards: cards, share: share}
	h := s.held[node]
	if h == nil {
		h = &heldOn{}
		s.held[node] = h
	}
	h.pods++
	if !share.IsZero() {
		h.shared++
	}
	h.usage.Store(nil)
}

// heldOn is what the State knows of one node's holdings.
type heldOn struct {
	// pods counts the pods that hold cards of the node, shared those that
	// hold a share of one.
	pods, shared int
	// usage is the node's Usage at one NodeInfo generation, dropped when a
	// holding of the node changes. Filters and scores of every plugin ask
	// for it on every node in every cycle, and most nodes do not change
	// between two cycles.
	usage atomic.Pointer[usageEntry]
}

type usageEntry struct {
	node *corev1.Node
	gen  int64
	u    Usage
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
	on := s.held[h.node]
	if on == nil {
		return
	}
	on.pods--
	if !h.share.IsZero() {
		on.shared--
	}
	on.usage.Store(nil)
	if on.pods <= 0 {
		delete(s.held, h.node)
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
	// shared holds what pods that share a card hold of each, by card
	// index; nil when no pod of the node shares a card.
	shared *cardShares
	// Unknown counts the cards held by GPU pods that no aisched profile
	// placed (another scheduler's): which cards they have is not known.
	Unknown int64
}

// cardShares sums the shares of each card of a node.
type cardShares struct {
	milli, memMiB [maxCards]int64
}

// Used reports whether card i is held, whole or in part, by a pod with a
// known assignment: a whole-card pod cannot have it.
func (u Usage) Used(i int) bool { return i >= 0 && i < maxCards && u.used&(1<<i) != 0 }

// Whole reports whether a pod holds card i whole.
func (u Usage) Whole(i int) bool {
	return u.Used(i) && (u.whole&(1<<i) != 0 || u.shared == nil)
}

// HeldMilli is the thousandths of card i held: 1000 for a card held whole.
func (u Usage) HeldMilli(i int) int64 {
	switch {
	case !u.Used(i):
		return 0
	case u.Whole(i):
		return gpu.WholeCardMilli
	}
	return min(u.shared.milli[i], gpu.WholeCardMilli)
}

// HeldMemMiB is the memory of card i held by the pods that share it.
func (u Usage) HeldMemMiB(i int) int64 {
	if !u.Used(i) || u.shared == nil {
		return 0
	}
	return u.shared.memMiB[i]
}

// Room reports whether the share r can go on card c: the card meets r's
// per-card constraints, no pod holds it whole, and it has r's compute and
// memory left.
func (u Usage) Room(c *gpu.Card, r gpu.Request) bool {
	return c.Satisfies(r) && u.shareLeft(c, r)
}

// shareLeft is Room for a card known to satisfy r.
func (u Usage) shareLeft(c *gpu.Card, r gpu.Request) bool {
	i := c.Index
	return !u.Whole(i) && gpu.WholeCardMilli-u.HeldMilli(i) >= r.Milli && (r.GPUMemMiB == 0 || c.MemoryMiB-u.HeldMemMiB(i) >= r.GPUMemMiB)
}

// FreeOn is what card c has free in thousandths of the card: the lesser
// of its compute and its memory left (a card whose memory is taken by
// shares is used up even with compute left). 0 for a card held whole.
func (u Usage) FreeOn(c *gpu.Card) int64 {
	free := gpu.WholeCardMilli - u.HeldMilli(c.Index)
	if held := u.HeldMemMiB(c.Index); held > 0 && c.MemoryMiB > 0 {
		free = min(free, max(c.MemoryMiB-held, 0)*gpu.WholeCardMilli/c.MemoryMiB)
	}
	return free
}

// Count is the number of cards known to be held, whole or in part.
func (u Usage) Count() int { return bits.OnesCount64(u.used) }

// Fit counts the cards that satisfy the per-card part of r (capable) and,
// of those, the ones r could have: for whole cards the cards not held,
// less the cards held by pods whose cards are unknown; for a share, the
// cards with Room for it (free; it may be negative).
func (u Usage) Fit(cards []gpu.Card, r gpu.Request) (capable, free int64) {
	for i := range cards {
		if !cards[i].Satisfies(r) || cards[i].MemoryMiB < r.GPUMemMiB {
			continue
		}
		capable++
		if r.Shared() && u.shareLeft(&cards[i], r) || !r.Shared() && !u.Used(cards[i].Index) {
			free++
		}
	}
	return capable, free - u.Unknown
}

// PickShared returns the card for the share r of one card: of the cards
// with Room for it, the one with the least free (FreeOn: best fit, ties to
// the lowest index), so that whole free cards stay whole. ok is false when
// no card has room.
func (u Usage) PickShared(cards []gpu.Card, r gpu.Request) (index int, ok bool) {
	var best int64
	for i := range cards {
		c := &cards[i]
		if !u.Room(c, r) {
			continue
		}
		left := u.FreeOn(c)
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

// FreeMilli is the thousandths free (FreeOn) of the node's healthy
// cards, less the cards held by pods whose cards are unknown.
func (u Usage) FreeMilli(cards []gpu.Card) int64 {
	var free int64
	for i := range cards {
		if cards[i].Healthy {
			free += u.FreeOn(&cards[i])
		}
	}
	return max(free-u.Unknown*gpu.WholeCardMilli, 0)
}

// HasShared reports whether pods share cards of the node.
func (s *State) HasShared(node string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h := s.held[node]
	return h != nil && h.shared > 0
}

// Usage returns the cards held by the pods of nodeInfo, leaving out the
// pod being placed (UID skip, holding skipGPUs whole cards) should the
// node already list it. It reads the node's pods from nodeInfo, so that
// preemption's what-if copies (victims removed) are honoured.
func (s *State) Usage(nodeInfo fwk.NodeInfo, skip types.UID, skipGPUs int64) Usage {
	requested := nodeInfo.GetRequested().GetScalarResources()[gpu.ResourceName]
	node := nodeInfo.Node()
	s.mu.RLock()
	defer s.mu.RUnlock()
	h := s.held[node.Name]
	shared := h != nil && h.shared > 0
	if requested == 0 && !shared {
		// No pod of the node holds GPUs (the common case of idle nodes).
		return Usage{}
	}
	// The memo holds the node's usage with no pod left out: it serves
	// unless the pod to leave out is one of the node's.
	memo := h != nil && !listed(nodeInfo, skip)
	if memo {
		if e := h.usage.Load(); e != nil && e.gen == nodeInfo.GetGeneration() && e.node == node {
			return e.u
		}
	}
	u := s.usageLocked(nodeInfo, requested, shared, skip, skipGPUs)
	if memo {
		// Stored under the read lock: a change of the node's holdings,
		// which drops it, waits for the write lock.
		h.usage.Store(&usageEntry{node: node, gen: nodeInfo.GetGeneration(), u: u})
	}
	return u
}

// listed reports whether the pod uid is one of the node's.
func listed(nodeInfo fwk.NodeInfo, uid types.UID) bool {
	if uid == "" {
		return false
	}
	for _, pi := range nodeInfo.GetPods() {
		if pi.GetPod().UID == uid {
			return true
		}
	}
	return false
}

// usageLocked computes Usage from the holdings; s.mu is held.
func (s *State) usageLocked(nodeInfo fwk.NodeInfo, requested int64, shared bool, skip types.UID, skipGPUs int64) Usage {
	var u Usage
	node := nodeInfo.Node().Name
	if shared {
		u.shared = new(cardShares)
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
			if !h.share.IsZero() && u.shared != nil {
				u.shared.milli[c] += h.share.Milli
				u.shared.memMiB[c] += h.share.MemMiB
			} else {
				u.whole |= 1 << c
			}
		}
		if h.share.IsZero() {
			known += int64(len(h.cards))
		}
	}
	u.Unknown = max(requested-known, 0)
	return u
}
