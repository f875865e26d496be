package gpuledger

import (
	"iter"
	"slices"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/pkg/gpu"
)

type holding struct {
	node  string
	cards []int
	// share is what a shared pod holds of each of its cards; zero for
	// whole cards.
	share Share
}

// Share is what a pod that shares cards holds of each: thousandths of its
// compute and MiB of its memory, either of which may be 0.
type Share struct {
	Milli, MemMiB int64
}

// IsZero reports whether s holds nothing: a whole-card holding.
func (s Share) IsZero() bool { return s == Share{} }

// ShareOf is the share the request r holds of card c, one of the cards
// chosen for it (a share of memory in percent is MiB of that card); zero
// for whole cards.
func ShareOf(r gpu.Request, c *gpu.Card) Share {
	if !r.Shared() {
		return Share{}
	}
	sh := Share{Milli: r.Milli, MemMiB: r.GPUMemMiB}
	if c != nil {
		sh.MemMiB = r.MemMiBOn(c)
	}
	return sh
}

// ObservePod records the cards of a bound, running pod from its assigned
// annotation (and, for a pod that shares a card, its share from its
// request), and forgets the pod once it has ended. It is the pod
// informer's add and update handler; after a scheduler restart it
// rebuilds every holding. It also keeps the priority of every pod bound
// (PodBelow).
func (s *State) ObservePod(obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	s.observeBound(pod)
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		s.Release(pod.UID, "")
		return
	}
	if cards, share, ok := HoldingOf(pod); ok {
		s.AssignPod(pod, pod.Spec.NodeName, cards, share)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observeUnknownLocked(pod)
}

// HoldingOf reads what a running pod holds from its own record: the cards
// of its assigned annotation and, for a pod that shares cards, its share
// of each (of memory in percent, the MiB recorded beside the cards); for a
// pod another scheduler placed, the whole cards the node agent located. ok
// is false for a pod not bound, without either annotation, or with a
// record no aisched profile writes (another number of shared cards than
// it asks for, a share in percent without its MiB).
func HoldingOf(pod *corev1.Pod) (cards []int, share Share, ok bool) {
	if pod.Spec.NodeName == "" {
		// An unbound pod may carry the annotation of an attempt that failed
		// to bind; only binding makes it true.
		return nil, Share{}, false
	}
	v, assigned := pod.Annotations[gpu.AssignedAnnotation]
	if !assigned {
		cards, ok = gpu.ParseIndices(pod.Annotations[gpu.LocatedAnnotation])
		return cards, Share{}, ok && int64(len(cards)) == gpu.RequestedCards(pod)
	}
	cards, ok = gpu.ParseIndices(v)
	if !ok {
		return nil, Share{}, false
	}
	req, err := gpu.ParseRequest(pod)
	switch {
	case err != nil:
		// A request edited into nonsense after binding: whole cards still
		// hold what the kubelet gave them; a share cannot be read.
		return cards, Share{}, gpu.RequestedCards(pod) > 0
	case !req.Shared():
		return cards, Share{}, true
	case int64(len(cards)) != req.Count:
		return nil, Share{}, false
	}
	mib, ok := req.BoundMemMiB(pod.Annotations)
	if !ok {
		return nil, Share{}, false
	}
	return cards, Share{Milli: req.Milli, MemMiB: mib}, true
}

// ForgetPod forgets a deleted pod's cards and priority; the pod
// informer's delete handler.
func (s *State) ForgetPod(obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	s.Release(pod.UID, "")
	s.mu.Lock()
	s.bound.forget(pod.UID)
	s.mu.Unlock()
}

// Assign records that the pod holds the cards of node (Reserve): whole
// cards with a zero share, else the share of each.
func (s *State) Assign(uid types.UID, node string, cards []int, share Share) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.assignLocked(uid, node, cards, share)
}

// AssignPod is Assign for a pod at hand, whose priority the ledger keeps
// too (HolderBelow): GPUFit's Reserve and the pod informer's handler.
func (s *State) AssignPod(pod *corev1.Pod, node string, cards []int, share Share) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.assignLocked(pod.UID, node, cards, share)
	s.notePriorityLocked(pod)
}

func (s *State) assignLocked(uid types.UID, node string, cards []int, share Share) {
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
	} else {
		h.whole += int64(len(cards))
	}
	h.usage.Store(nil)
	s.changedLocked(node)
}

// heldOn is what the State knows of one node's holdings.
type heldOn struct {
	// pods counts the pods that hold cards of the node, shared those that
	// hold a share of one; whole counts the cards held whole.
	pods, shared int
	whole        int64
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
	if node == "" || ok && h.node == node {
		s.forgetPriorityLocked(uid)
	}
	if !ok || (node != "" && h.node != node) {
		return
	}
	delete(s.pods, uid)
	s.changedLocked(h.node)
	on := s.held[h.node]
	if on == nil {
		return
	}
	on.pods--
	if !h.share.IsZero() {
		on.shared--
	} else {
		on.whole -= int64(len(h.cards))
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

// HasShared reports whether pods share cards of the node.
func (s *State) HasShared(node string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h := s.held[node]
	return h != nil && h.shared > 0
}

// AllKnown reports whether the node's holdings are whole cards of pods
// whose cards are known, requested being the whole cards its pods request
// (a NodeInfo's): no pod shares a card, and none holds cards that were
// not recorded or located. GPUFit admits a pod to such a node from the
// counts alone.
func (s *State) AllKnown(node string, requested int64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h := s.held[node]
	if h == nil {
		return requested == 0
	}
	return h.shared == 0 && h.whole >= requested
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
	dra := s.draUsageLocked(node.Name)
	if requested == 0 && !shared {
		// No pod of the node holds GPUs (the common case of idle nodes).
		return dra
	}
	// The memo holds the node's usage with no pod left out: it serves
	// unless the pod to leave out is one of the node's. Claims do not
	// change the NodeInfo: a node whose claims hold cards is not memoized.
	memo := h != nil && dra.used == 0 && !listed(nodeInfo, skip)
	if memo {
		if e := h.usage.Load(); e != nil && e.gen == nodeInfo.GetGeneration() && e.node == node {
			return e.u
		}
	}
	u := s.usageLocked(node.Name, podsOf(nodeInfo), requested, shared, skip, skipGPUs).merged(dra)
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

// UsageOf returns the cards held by pods, the pods bound to node as a pod
// informer lists them: the usage the job queue places on. requested is
// the whole cards the pods request (gpu.RequestedCardsOf(pods)), which a
// caller that keeps its pods' requests passes without reading them anew.
// Pods that no aisched profile placed count as holding unknown cards, as
// in Usage.
func (s *State) UsageOf(node string, pods []*corev1.Pod, requested int64) Usage {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h := s.held[node]
	shared := h != nil && h.shared > 0
	dra := s.draUsageLocked(node)
	if requested == 0 && !shared {
		return dra
	}
	return s.usageLocked(node, slices.Values(pods), requested, shared, "", 0).merged(dra)
}

// podsOf lists the pods of a NodeInfo.
func podsOf(nodeInfo fwk.NodeInfo) iter.Seq[*corev1.Pod] {
	return func(yield func(*corev1.Pod) bool) {
		for _, pi := range nodeInfo.GetPods() {
			if !yield(pi.GetPod()) {
				return
			}
		}
	}
}

// usageLocked computes the Usage of the pods on node from the holdings,
// leaving out the pod skip (which holds skipGPUs whole cards); requested
// is the whole cards the pods request. s.mu is held.
func (s *State) usageLocked(node string, pods iter.Seq[*corev1.Pod], requested int64, shared bool, skip types.UID, skipGPUs int64) Usage {
	var u Usage
	if shared {
		u.shared = new(cardShares)
	}
	var known int64
	for pod := range pods {
		if pod.UID == skip {
			requested -= skipGPUs
			continue
		}
		h, ok := s.pods[pod.UID]
		if !ok || h.node != node {
			continue
		}
		for _, c := range h.cards {
			if c < 0 || c >= MaxCards {
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
		} else {
			// HAMi's form of a share names its cards in nvidia.com/gpu too:
			// those are the shared cards, known, not cards of unknown pods.
			known += gpu.RequestedCards(pod)
		}
	}
	u.Unknown = max(requested-known, 0)
	u.unlocated = u.Unknown > 0 && s.cards[node].inventory != nil
	return u
}
