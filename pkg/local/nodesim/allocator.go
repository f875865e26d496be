package nodesim

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"

	"github.com/aisched/aisched/pkg/gpu"
)

// allocator is what the simulated kubelets have admitted: per node the
// resources in use, the pod IPs and the GPU cards handed out, per pod what
// it holds. It is the kubelet's admission check, so a pod bound to a full
// node (by a scheduler bug or a hand-written spec.nodeName) fails like on a
// real node, and it plays the node's device layer: a pod gets the cards of
// its gpu.aisched.io/assigned annotation, or the lowest free ones, a card
// is never given whole twice nor whole beside a share, and the shares of a
// card stay within its compute and memory. It is the kubelets' own record,
// kept apart from the scheduler's GPU ledger; Holders lets the simulator
// compare the two.
type allocator struct {
	mu    sync.Mutex
	nodes map[string]*nodeAllocator
	pods  map[string]*podRecord
}

type nodeAllocator struct {
	allocatable corev1.ResourceList
	maxPods     int64
	used        corev1.ResourceList
	pods        int64
	cidr        *net.IPNet
	hostIP      string
	// ips[i] is true when network address + i is taken; 0 and the last are
	// the network and broadcast addresses.
	ips  []bool
	next int
	// cards[i] is who holds GPU i.
	cards []cardHolders
	// cardMemMiB is the memory of each card (the node's GPU Feature
	// Discovery label), 0 when unknown.
	cardMemMiB int64
}

// cardHolders is who holds one card: one pod whole, or pods with shares.
type cardHolders struct {
	whole  string
	shares map[string]share
}

// share is what a pod holds of a card it shares.
type share struct{ milli, memMiB int64 }

func (c *cardHolders) free() bool { return c.whole == "" && len(c.shares) == 0 }

// left is the compute and memory of the card not held by shares.
func (c *cardHolders) left(memMiB int64) (milli, mem int64) {
	milli, mem = gpu.WholeCardMilli, memMiB
	for _, sh := range c.shares {
		milli -= sh.milli
		mem -= sh.memMiB
	}
	return milli, mem
}

type podRecord struct {
	uid  types.UID
	node string
	ip   string
	// ipIndex is the host offset in the node CIDR, 0 for host-network pods.
	ipIndex  int
	requests corev1.ResourceList
	cards    []int
	share    share
}

// claim is what a pod asks of its node.
type claim struct {
	uid         types.UID
	node        string
	hostNetwork bool
	requests    corev1.ResourceList
	// ip is the address to keep (a pod restored after a restart).
	ip string
	// cards are the GPU indices the scheduler assigned; nil when it did not.
	cards []int
	// share is what the pod asks of each of its cards when it shares
	// cards, shareCards how many; zero for whole cards.
	share      share
	shareCards int64
	// badShare says why a share cannot be given: a share in percent
	// without the MiB the scheduler recorded.
	badShare string
}

// claimOf reads the claim of a pod.
func claimOf(pod *corev1.Pod) claim {
	c := claim{
		uid: pod.UID, node: pod.Spec.NodeName, hostNetwork: pod.Spec.HostNetwork,
		requests: resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}),
		ip:       pod.Status.PodIP,
	}
	if v, ok := pod.Annotations[gpu.AssignedAnnotation]; ok {
		c.cards, ok = gpu.ParseIndices(v)
		if !ok {
			// Malformed: let admission reject it rather than guess.
			c.cards = []int{-1}
		}
	}
	if r, err := gpu.ParseRequest(pod); err == nil && r.Shared() {
		mib, ok := r.BoundMemMiB(pod.Annotations)
		if !ok {
			// Any share, so that the pod is not taken for a whole-card one.
			mib = 1
			c.badShare = fmt.Sprintf("a share of %d%% of each card's memory without its MiB in %s", r.GPUMemPercent, gpu.AssignedGPUMemAnnotation)
		}
		c.share, c.shareCards = share{milli: r.Milli, memMiB: mib}, r.Count
	}
	return c
}

// rejection is an admission failure as the kubelet reports it.
type rejection struct {
	Reason  string
	Message string
}

func newAllocator() *allocator {
	return &allocator{nodes: map[string]*nodeAllocator{}, pods: map[string]*podRecord{}}
}

// addNode registers the node as registered in the apiserver; its pod CIDR
// comes from the node object, which keeps the first one it was given.
func (l *allocator) addNode(n *corev1.Node) error {
	_, cidr, err := net.ParseCIDR(n.Spec.PodCIDR)
	if err != nil {
		return fmt.Errorf("node %s: spec.podCIDR: %w", n.Name, err)
	}
	ones, bits := cidr.Mask.Size()
	l.mu.Lock()
	defer l.mu.Unlock()
	gpus := n.Status.Allocatable[gpu.ResourceName]
	cardMem, _ := strconv.ParseInt(n.Labels[gpu.GFDMemoryLabel], 10, 64)
	l.nodes[n.Name] = &nodeAllocator{
		cards:       make([]cardHolders, gpus.Value()),
		cardMemMiB:  cardMem,
		allocatable: n.Status.Allocatable.DeepCopy(),
		maxPods:     n.Status.Allocatable.Pods().Value(),
		used:        corev1.ResourceList{},
		cidr:        cidr,
		hostIP:      nodeIP(n),
		ips:         make([]bool, 1<<(bits-ones)),
		next:        1,
	}
	return nil
}

// holds reports whether key is admitted with this UID.
func (l *allocator) holds(key string, uid types.UID) (ip string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.pods[key]
	if !ok || r.uid != uid {
		return "", false
	}
	return r.ip, true
}

// admit checks that the pod fits next to what the node already runs and
// records it. force skips the checks; it is for pods that were already
// running before a restart.
func (l *allocator) admit(key string, c claim, force bool) (string, *rejection) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseLocked(key)
	n, ok := l.nodes[c.node]
	if !ok {
		return "", &rejection{Reason: "NodeNotSimulated", Message: fmt.Sprintf("node %s is not simulated here", c.node)}
	}
	requests := c.requests
	// Like the kubelet (lifecycle.removeMissingExtendedResources), admit
	// extended resources the node does not have: a scheduler that
	// understands them (HAMi's nvidia.com/gpumem, for one) has placed the
	// pod. The simulated device plugin's nvidia.com/gpu is always checked.
	missing := func(name corev1.ResourceName) bool {
		_, ok := n.allocatable[name]
		return !ok && name != gpu.ResourceName && v1helper.IsExtendedResourceName(name)
	}
	if slices.ContainsFunc(slices.Collect(maps.Keys(requests)), missing) {
		requests = requests.DeepCopy()
		maps.DeleteFunc(requests, func(name corev1.ResourceName, _ resource.Quantity) bool { return missing(name) })
	}
	if !force {
		if n.pods+1 > n.maxPods {
			return "", &rejection{Reason: "OutOfpods", Message: fmt.Sprintf("Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", n.pods, n.maxPods)}
		}
		for name, req := range requests {
			if req.IsZero() {
				continue
			}
			capacity, ok := n.allocatable[name]
			if !ok {
				capacity = resource.Quantity{}
			}
			used := n.used[name]
			total := used.DeepCopy()
			total.Add(req)
			if total.Cmp(capacity) > 0 {
				return "", &rejection{
					Reason:  "OutOf" + string(name),
					Message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %s, used: %s, capacity: %s", name, req.String(), used.String(), capacity.String()),
				}
			}
		}
	}
	gpus := requests[gpu.ResourceName]
	var cards []int
	var rej *rejection
	switch {
	case c.badShare != "" && c.cards != nil && !force:
		rej = allocationError("%s", c.badShare)
	case c.share != (share{}):
		cards, rej = n.allocateShare(c.cards, c.share, c.shareCards, force)
	default:
		cards, rej = n.allocateCards(c.cards, gpus.Value(), force)
	}
	if rej != nil {
		return "", rej
	}
	r := &podRecord{uid: c.uid, node: c.node, requests: requests.DeepCopy(), cards: cards, share: c.share}
	if c.hostNetwork {
		r.ip = n.hostIP
	} else {
		idx := n.take(c.ip)
		if idx == 0 {
			return "", &rejection{Reason: "PodIPsExhausted", Message: fmt.Sprintf("no free address in pod CIDR %s", n.cidr)}
		}
		r.ipIndex, r.ip = idx, nthIP(n.cidr.IP, uint32(idx)).String()
	}
	for name, q := range requests {
		sum := n.used[name]
		sum.Add(q)
		n.used[name] = sum
	}
	for _, i := range cards {
		if i < 0 || i >= len(n.cards) {
			continue
		}
		h := &n.cards[i]
		if c.share == (share{}) {
			h.whole = key
			continue
		}
		if h.shares == nil {
			h.shares = map[string]share{}
		}
		h.shares[key] = c.share
	}
	n.pods++
	l.pods[key] = r
	return r.ip, nil
}

func allocationError(format string, args ...interface{}) *rejection {
	return &rejection{Reason: "UnexpectedAdmissionError", Message: "Allocate failed due to " + fmt.Sprintf(format, args...)}
}

// allocateCards plays the device plugin for whole cards: the assigned
// cards when the scheduler chose them, else the lowest free ones.
func (n *nodeAllocator) allocateCards(assigned []int, count int64, force bool) ([]int, *rejection) {
	if count == 0 {
		return nil, nil
	}
	if assigned != nil {
		if int64(len(assigned)) != count && !force {
			return nil, allocationError("%s=%v naming %d cards for a request of %d", gpu.AssignedAnnotation, assigned, len(assigned), count)
		}
		for _, i := range assigned {
			switch {
			case i < 0 || i >= len(n.cards):
				return nil, allocationError("%s=%v: no card %d on a node with %d", gpu.AssignedAnnotation, assigned, i, len(n.cards))
			case n.cards[i].whole != "" && !force:
				return nil, allocationError("card %d of %s is already allocated to pod %s", i, gpu.ResourceName, n.cards[i].whole)
			case len(n.cards[i].shares) > 0 && !force:
				return nil, allocationError("card %d of %s is shared by %d pods", i, gpu.ResourceName, len(n.cards[i].shares))
			}
		}
		return assigned, nil
	}
	var picked []int
	for i := range n.cards {
		if n.cards[i].free() && int64(len(picked)) < count {
			picked = append(picked, i)
		}
	}
	if int64(len(picked)) < count && !force {
		return nil, allocationError("%d free cards of %s for a request of %d", len(picked), gpu.ResourceName, count)
	}
	return picked, nil
}

// allocateShare plays a sharing device layer (HAMi's, say): the pod gets
// its share of each of the count cards the scheduler assigned, if each is
// not held whole and has the share's compute and memory left. A pod with
// a share and no assigned card (placed by a scheduler that does not share
// cards) gets no card, as on a real node.
func (n *nodeAllocator) allocateShare(assigned []int, sh share, count int64, force bool) ([]int, *rejection) {
	if assigned == nil {
		return nil, nil
	}
	if int64(len(assigned)) != count {
		return nil, allocationError("%s=%v naming %d cards for a share of each of %d", gpu.AssignedAnnotation, assigned, len(assigned), count)
	}
	for k, i := range assigned {
		if i < 0 || i >= len(n.cards) {
			return nil, allocationError("%s=%v: no card %d on a node with %d", gpu.AssignedAnnotation, assigned, i, len(n.cards))
		}
		if slices.Contains(assigned[:k], i) {
			return nil, allocationError("%s=%v names card %d twice", gpu.AssignedAnnotation, assigned, i)
		}
		if force {
			continue
		}
		h := &n.cards[i]
		if h.whole != "" {
			return nil, allocationError("card %d of %s is allocated whole to pod %s", i, gpu.ResourceName, h.whole)
		}
		milli, mem := h.left(n.cardMemMiB)
		if sh.milli > milli || n.cardMemMiB > 0 && sh.memMiB > mem {
			return nil, allocationError("card %d has %d thousandths and %d MiB left, the share asks %d and %d", i, milli, mem, sh.milli, sh.memMiB)
		}
	}
	return assigned, nil
}

// Holders is the kubelets' card record in the form of gpuledger.Holders:
// for each held card, "node/index", who holds it ("ns/pod" whole,
// "ns/pod@milli/memMiB" shared, sorted, comma-separated).
func (l *allocator) Holders() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]string{}
	for name, n := range l.nodes {
		for i := range n.cards {
			h := &n.cards[i]
			var who []string
			if h.whole != "" {
				who = append(who, h.whole)
			}
			for key, sh := range h.shares {
				who = append(who, fmt.Sprintf("%s@%d/%d", key, sh.milli, sh.memMiB))
			}
			if len(who) == 0 {
				continue
			}
			slices.Sort(who)
			out[fmt.Sprintf("%s/%d", name, i)] = strings.Join(who, ",")
		}
	}
	return out
}

// hostIP returns the InternalIP of a registered node.
func (l *allocator) hostIP(node string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n, ok := l.nodes[node]; ok {
		return n.hostIP
	}
	return ""
}

// cardsOf returns the indices of the cards the pod with this key holds.
func (l *allocator) cardsOf(key string) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.pods[key]; ok {
		return slices.Clone(r.cards)
	}
	return nil
}

// release frees what key holds; releasing an unknown key does nothing.
func (l *allocator) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseLocked(key)
}

func (l *allocator) releaseLocked(key string) {
	r, ok := l.pods[key]
	if !ok {
		return
	}
	delete(l.pods, key)
	n, ok := l.nodes[r.node]
	if !ok {
		return
	}
	for name, q := range r.requests {
		sum := n.used[name]
		sum.Sub(q)
		n.used[name] = sum
	}
	n.pods--
	if r.ipIndex > 0 {
		n.ips[r.ipIndex] = false
	}
	for _, i := range r.cards {
		if i < 0 || i >= len(n.cards) {
			continue
		}
		if h := &n.cards[i]; h.whole == key {
			h.whole = ""
		} else {
			delete(h.shares, key)
		}
	}
}

// take reserves want when it is a free address of the CIDR, otherwise the
// next free one; 0 means none is left.
func (n *nodeAllocator) take(want string) int {
	if ip := net.ParseIP(want); ip != nil && n.cidr.Contains(ip) {
		idx := int(ipToUint(ip) - ipToUint(n.cidr.IP))
		if idx > 0 && idx < len(n.ips)-1 && !n.ips[idx] {
			n.ips[idx] = true
			return idx
		}
	}
	for range len(n.ips) {
		idx := n.next
		n.next++
		if n.next >= len(n.ips)-1 {
			n.next = 1
		}
		if !n.ips[idx] {
			n.ips[idx] = true
			return idx
		}
	}
	return 0
}

func ipToUint(ip net.IP) uint32 {
	v4 := ip.To4()
	return uint32(v4[0])<<24 | uint32(v4[1])<<16 | uint32(v4[2])<<8 | uint32(v4[3])
}
