package gpuledger

import (
	"cmp"
	"context"
	"maps"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu"
)

// DefaultDRADriver is the DRA driver whose devices are GPUs, unless the
// shared configuration names another (gpus.draDriver): NVIDIA's.
const DefaultDRADriver = "gpu.nvidia.com"

// draLedger is what the State knows of the GPU driver's devices and of the
// claims allocated from them: one more source of cards (the devices of a
// node's slices) and one more source of holdings (allocated claims), so
// that every part of aisched that counts cards counts DRA GPUs too. Its
// maps are guarded by State.mu.
type draLedger struct {
	driver string
	// slices are the driver's node-local slices by name; byNode their
	// names by node.
	slices map[string]*resourceapi.ResourceSlice
	byNode map[string]map[string]bool
	// nodes are the nodes' cards and devices; poolNode is the node of each
	// pool.
	nodes    map[string]*draNode
	poolNode map[string]string
	// claims are the claims that hold devices of the driver, allocated or
	// pending (the scheduler's Reserve to its PreBind); byPool their UIDs
	// by the pools of their devices.
	claims map[types.UID]*draClaim
	byPool map[string]map[types.UID]bool
	// usage is what the claims hold of each node's cards, free the devices
	// of each node no claim holds (or that take several), by shape key
	// (dra_room.go). next counts the
	// changes of a node's devices or usage, and changed lists the last
	// ones, oldest first (DRAChangedSince).
	usage   map[string]Usage
	free    map[string]map[string]int
	next    uint64
	changed []draChange
	// named are the claims by namespace/name and classes the device
	// classes: what pods ask for (RequestOf, NeverFits).
	named   map[string]*resourceapi.ResourceClaim
	classes map[string]*resourceapi.DeviceClass
	// shapes counts the devices of each shape, cluster-wide and per
	// node, for matching requests (dra_request.go).
	shapes *shapeIndex
}

// draClaim is a claim's hold on the driver's devices.
type draClaim struct {
	name    string // namespace/name
	results []resourceapi.DeviceRequestAllocationResult
	// pending: allocated by the scheduler, not yet written (Reserve).
	pending bool
	// pods are the pods the claim is reserved for (namespace/name).
	pods []string
}

func newDRALedger(driver string) draLedger {
	if driver == "" {
		driver = DefaultDRADriver
	}
	return draLedger{driver: driver, slices: map[string]*resourceapi.ResourceSlice{}, byNode: map[string]map[string]bool{},
		nodes: map[string]*draNode{}, poolNode: map[string]string{}, claims: map[types.UID]*draClaim{},
		byPool: map[string]map[types.UID]bool{}, usage: map[string]Usage{}, free: map[string]map[string]int{},
		named: map[string]*resourceapi.ResourceClaim{}, classes: map[string]*resourceapi.DeviceClass{}, shapes: newShapeIndex(driver)}
}

// startDRA follows the driver's slices, the claims and the device classes
// through the scheduler's informers; it returns what tells that each has
// seen its first list.
func (s *State) startDRA(_ context.Context, factory informers.SharedInformerFactory) ([]cache.InformerSynced, error) {
	r := factory.Resource().V1()
	var synced []cache.InformerSynced
	for _, h := range []struct {
		informer        cache.SharedIndexInformer
		observe, forget func(interface{})
	}{
		{r.ResourceSlices().Informer(), s.ObserveSlice, s.ForgetSlice},
		{r.ResourceClaims().Informer(), s.ObserveClaim, s.ForgetClaim},
		{r.DeviceClasses().Informer(), s.ObserveClass, s.ForgetClass},
	} {
		reg, err := h.informer.AddEventHandler(handlers(h.observe, h.forget))
		if err != nil {
			return nil, err
		}
		synced = append(synced, reg.HasSynced)
	}
	return synced, nil
}

// DRADriver is the DRA driver whose devices the ledger counts as cards.
func (s *State) DRADriver() string { return s.dra.driver }

// ObserveSlice records the devices of one of the GPU driver's
// ResourceSlices; the slice informer's add and update handler. Slices of
// other drivers, and slices not local to one node, are not the ledger's.
func (s *State) ObserveSlice(obj interface{}) {
	slice, ok := obj.(*resourceapi.ResourceSlice)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &s.dra
	old := l.slices[slice.Name]
	if slice.Spec.Driver != l.driver || ptr.Deref(slice.Spec.NodeName, "") == "" {
		if old != nil {
			s.dropSliceLocked(old)
		}
		return
	}
	node := *slice.Spec.NodeName
	if old != nil && ptr.Deref(old.Spec.NodeName, "") != node {
		s.dropSliceLocked(old)
	}
	l.slices[slice.Name] = slice
	if l.byNode[node] == nil {
		l.byNode[node] = map[string]bool{}
	}
	l.byNode[node][slice.Name] = true
	s.rebuildDRANodeLocked(node)
}

// ForgetSlice forgets a deleted slice; the slice informer's delete handler.
func (s *State) ForgetSlice(obj interface{}) {
	slice, ok := obj.(*resourceapi.ResourceSlice)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.dra.slices[slice.Name]; old != nil {
		s.dropSliceLocked(old)
	}
}

func (s *State) dropSliceLocked(old *resourceapi.ResourceSlice) {
	l := &s.dra
	delete(l.slices, old.Name)
	node := ptr.Deref(old.Spec.NodeName, "")
	delete(l.byNode[node], old.Name)
	if len(l.byNode[node]) == 0 {
		delete(l.byNode, node)
	}
	s.rebuildDRANodeLocked(node)
}

// rebuildDRANodeLocked rebuilds a node's cards and devices from its slices.
func (s *State) rebuildDRANodeLocked(node string) {
	l := &s.dra
	var list []*resourceapi.ResourceSlice
	for _, name := range slices.Sorted(maps.Keys(l.byNode[node])) {
		list = append(list, l.slices[name])
	}
	if old := l.nodes[node]; old != nil {
		l.shapes.remove(node, old)
		for _, p := range old.pools() {
			if l.poolNode[p] == node {
				delete(l.poolNode, p)
			}
		}
	}
	n := buildDRANode(l.driver, list)
	e := s.cards[node]
	if n == nil {
		delete(l.nodes, node)
		e.dra = nil
	} else {
		l.nodes[node] = n
		for _, p := range n.pools() {
			l.poolNode[p] = node
		}
		l.shapes.add(node, n)
		e.dra = n.set
	}
	if e == (nodeCards{}) {
		delete(s.cards, node)
	} else {
		s.cards[node] = e
	}
	s.draNodes.Store(int64(len(l.nodes)))
	s.dropCachedLocked(node)
	s.recomputeDRAUsageLocked(node)
}

// pools lists the pools of a node's devices.
func (n *draNode) pools() []string {
	seen := map[string]bool{}
	for ref := range n.devices {
		seen[ref.Pool] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// ObserveClaim records what an allocated claim holds of the driver's
// devices, and forgets it once it is deallocated; every claim is kept for
// what pods ask for. The claim informer's add and update handler.
func (s *State) ObserveClaim(obj interface{}) {
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &s.dra
	key := claim.Namespace + "/" + claim.Name
	l.named[key] = claim
	var pods []string
	for _, r := range claim.Status.ReservedFor {
		if r.Resource == "pods" {
			pods = append(pods, claim.Namespace+"/"+r.Name)
		}
	}
	results := l.driverResults(claim.Status.Allocation)
	old := l.claims[claim.UID]
	switch {
	case len(results) > 0:
		s.setClaimLocked(claim.UID, &draClaim{name: key, results: results, pods: pods})
	case old != nil && !old.pending:
		s.setClaimLocked(claim.UID, nil)
	}
}

// ForgetClaim forgets a deleted claim; the claim informer's delete handler.
func (s *State) ForgetClaim(obj interface{}) {
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := claim.Namespace + "/" + claim.Name
	if c := s.dra.named[key]; c != nil && c.UID == claim.UID {
		delete(s.dra.named, key)
	}
	s.setClaimLocked(claim.UID, nil)
}

// AssumeClaim records the scheduler's allocation of a claim that its
// PreBind has yet to write (DynamicResources' pending allocation), so that
// what the pods scheduled meanwhile are ranked on counts it. The claim's
// own record, once the informer has it, replaces it.
func (s *State) AssumeClaim(uid types.UID, name string, allocation *resourceapi.AllocationResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.dra.claims[uid]; old != nil && !old.pending {
		return
	}
	if results := s.dra.driverResults(allocation); len(results) > 0 {
		s.setClaimLocked(uid, &draClaim{name: name, results: results, pending: true})
	}
}

// ForgetAssumed forgets an allocation AssumeClaim recorded that was not
// written (Unreserve).
func (s *State) ForgetAssumed(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.dra.claims[uid]; old != nil && old.pending {
		s.setClaimLocked(uid, nil)
	}
}

// driverResults are the results of an allocation that hold the driver's
// devices: admin access holds none (upstream counts it so too).
func (l *draLedger) driverResults(a *resourceapi.AllocationResult) []resourceapi.DeviceRequestAllocationResult {
	if a == nil {
		return nil
	}
	var out []resourceapi.DeviceRequestAllocationResult
	for _, r := range a.Devices.Results {
		if r.Driver == l.driver && !ptr.Deref(r.AdminAccess, false) {
			out = append(out, r)
		}
	}
	return out
}

// setClaimLocked replaces the record of claim uid (nil forgets it) and
// recomputes the nodes it touches.
func (s *State) setClaimLocked(uid types.UID, c *draClaim) {
	l := &s.dra
	touched := map[string]bool{}
	if old := l.claims[uid]; old != nil {
		for _, r := range old.results {
			delete(l.byPool[r.Pool], uid)
			if len(l.byPool[r.Pool]) == 0 {
				delete(l.byPool, r.Pool)
			}
			touched[r.Pool] = true
		}
		delete(l.claims, uid)
	}
	if c != nil {
		l.claims[uid] = c
		for _, r := range c.results {
			if l.byPool[r.Pool] == nil {
				l.byPool[r.Pool] = map[types.UID]bool{}
			}
			l.byPool[r.Pool][uid] = true
			touched[r.Pool] = true
		}
	}
	nodes := map[string]bool{}
	for p := range touched {
		if node, ok := l.poolNode[p]; ok {
			nodes[node] = true
		}
	}
	for node := range nodes {
		s.recomputeDRAUsageLocked(node)
	}
}

// recomputeDRAUsageLocked sums what the claims hold of a node's cards.
func (s *State) recomputeDRAUsageLocked(node string) {
	l := &s.dra
	l.next++
	if len(l.changed) == maxDRAChanges {
		l.changed = append(l.changed[:0], l.changed[maxDRAChanges/2:]...)
	}
	l.changed = append(l.changed, draChange{gen: l.next, node: node})
	n := l.nodes[node]
	var u Usage
	held := map[DeviceRef]bool{}
	if n != nil {
		for _, pool := range n.pools() {
			for uid := range l.byPool[pool] {
				for i := range l.claims[uid].results {
					r := &l.claims[uid].results[i]
					ref := DeviceRef{Pool: r.Pool, Device: r.Device}
					if dev := n.devices[ref]; r.Pool == pool && dev != nil {
						u = u.with([]int{dev.Card}, partOf(dev, r))
						held[ref] = true
					}
				}
			}
		}
	}
	if free := freeCounts(n, func(ref DeviceRef) bool { return held[ref] }); len(free) > 0 {
		l.free[node] = free
	} else {
		delete(l.free, node)
	}
	if u.used == 0 {
		delete(l.usage, node)
	} else {
		l.usage[node] = u
	}
	if h := s.held[node]; h != nil {
		h.usage.Store(nil)
	}
}

// partOf is what one result holds of its device's card: the card whole,
// a MIG device's part of it, or the capacity a claim consumes of a shared
// device (memory in MiB, shares as thousandths of the card or of the MIG
// device's part). A share that consumes nothing (the driver's unlimited
// sharing) still shares the card: it holds one thousandth.
func partOf(dev *Device, r *resourceapi.DeviceRequestAllocationResult) Share {
	if !dev.Shareable || r.ShareID == nil && r.ConsumedCapacity == nil {
		return dev.Part
	}
	var sh Share
	if q, ok := r.ConsumedCapacity[draCapMemory]; ok {
		sh.MemMiB = q.Value() >> 20
	}
	whole := int64(gpu.WholeCardMilli)
	if dev.MIG {
		whole = dev.Part.Milli
	}
	if q, ok := r.ConsumedCapacity[draCapShares]; ok && dev.Shares > 0 {
		sh.Milli = q.Value() * whole / dev.Shares
	}
	if sh.IsZero() {
		sh.Milli = 1
	}
	return sh
}

// draUsageLocked is what claims hold of the node's cards; s.mu is held.
func (s *State) draUsageLocked(node string) Usage { return s.dra.usage[node] }

// merged returns u with o's holdings added; neither changes.
func (u Usage) merged(o Usage) Usage {
	if o.used == 0 && o.Unknown == 0 {
		return u
	}
	out := Usage{used: u.used | o.used, whole: u.whole | o.whole, Unknown: u.Unknown + o.Unknown, unlocated: u.unlocated || o.unlocated}
	if u.shared == nil && o.shared == nil {
		// Every held card is held whole.
		out.whole = out.used
		return out
	}
	out.shared = new(cardShares)
	for _, x := range []Usage{u, o} {
		if x.shared == nil {
			out.whole |= x.used
			continue
		}
		for i := range out.shared.milli {
			out.shared.milli[i] += x.shared.milli[i]
			out.shared.memMiB[i] += x.shared.memMiB[i]
		}
	}
	return out
}

// DRAView is what the ledger knows of a node whose cards the GPU driver
// publishes: its cards, its devices, and what claims hold of the cards
// (DRAChangedSince says when any of them changed). It is shared: callers
// must not modify it.
type DRAView struct {
	Cards   *gpu.Set
	Devices map[DeviceRef]*Device
	Usage   Usage
}

// DRA returns the view of a node whose cards the GPU driver publishes; ok
// is false for other nodes.
func (s *State) DRA(node string) (view DRAView, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := s.dra.nodes[node]
	if n == nil {
		return DRAView{}, false
	}
	return DRAView{Cards: n.set, Devices: n.devices, Usage: s.dra.usage[node]}, true
}

// DRAInUse reports whether a claim holds a device of the node's GPU
// driver, allocated or pending in the scheduler: whether the node is in
// use for GPU work, rather than empty.
func (s *State) DRAInUse(node string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.dra.usage[node]
	return ok
}

// draChange is one change of a node's view: its generation, and the node.
type draChange struct {
	gen  uint64
	node string
}

// maxDRAChanges bounds the changes DRAChangedSince can report: a reader
// further behind reads every node again.
const maxDRAChanges = 4096

// DRAChangedSince returns the nodes whose view (DRA) changed after
// generation gen, and the generation now, for a reader that keeps
// something per node; ok is false when the changes since gen are no
// longer all known (the reader must read every node again).
func (s *State) DRAChangedSince(gen uint64) (nodes []string, now uint64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l := &s.dra
	if gen == l.next {
		return nil, gen, true
	}
	if gen > l.next || len(l.changed) == 0 || l.changed[0].gen > gen+1 {
		return nil, l.next, false
	}
	i, _ := slices.BinarySearchFunc(l.changed, gen+1, func(c draChange, g uint64) int { return cmp.Compare(c.gen, g) })
	for _, c := range l.changed[i:] {
		nodes = append(nodes, c.node)
	}
	return nodes, l.next, true
}

// DRAHolder is a claim's hold on one device of a node.
type DRAHolder struct {
	// Claim is the claim (namespace/name), Pods the pods it is reserved
	// for; Pending when the scheduler allocated it and has not written it.
	Claim   string
	Pods    []string
	Pending bool
	Device  Device
	// Share is what the claim holds of the device's card (zero: whole).
	Share Share
}

// DRAHolders lists the claims that hold devices of a node, by card index.
func (s *State) DRAHolders(node string) map[int][]DRAHolder {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l := &s.dra
	n := l.nodes[node]
	if n == nil {
		return nil
	}
	out := map[int][]DRAHolder{}
	for _, pool := range n.pools() {
		for _, uid := range slices.Sorted(maps.Keys(l.byPool[pool])) {
			c := l.claims[uid]
			for i := range c.results {
				r := &c.results[i]
				dev := n.devices[DeviceRef{Pool: r.Pool, Device: r.Device}]
				if r.Pool != pool || dev == nil {
					continue
				}
				out[dev.Card] = append(out[dev.Card], DRAHolder{Claim: c.name, Pods: c.pods, Pending: c.pending, Device: *dev, Share: partOf(dev, r)})
			}
		}
	}
	return out
}

// migKey is a kind of MIG device in aisched_gpu_mig_devices.
type migKey struct{ model, profile, state string }

// migDevices counts the MIG devices of every DRA node by the model of
// their card, profile and state: allocated when a claim holds it (pending
// in the scheduler or written), free otherwise. A free placement of a
// card partitioned dynamically (its devices consume the card's counters)
// is one of several that overlap, not a device: only held ones count.
func (s *State) migDevices() map[string]map[migKey]int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l := &s.dra
	out := map[string]map[migKey]int{}
	for node, n := range l.nodes {
		held := map[DeviceRef]bool{}
		for _, pool := range n.pools() {
			for uid := range l.byPool[pool] {
				for _, r := range l.claims[uid].results {
					held[DeviceRef{Pool: r.Pool, Device: r.Device}] = true
				}
			}
		}
		for ref, dev := range n.devices {
			if !dev.MIG {
				continue
			}
			state := cardWhole
			if !held[ref] {
				if len(n.raw[ref].ConsumesCounters) > 0 {
					continue
				}
				state = cardFree
			}
			model := ""
			if c := gpu.CardByIndex(n.set.Cards, dev.Card); c != nil {
				model = c.Model
			}
			if out[node] == nil {
				out[node] = map[migKey]int{}
			}
			out[node][migKey{model: model, profile: dev.Profile, state: state}]++
		}
	}
	return out
}
