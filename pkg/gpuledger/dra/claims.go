package dra

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
)

// ObserveClaim records what an allocated claim holds of the driver's
// devices, and forgets it once it is deallocated; every claim is kept for
// what pods ask for. The claim informer's add and update handler.
func (l *Ledger) ObserveClaim(obj interface{}) {
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
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
		l.setClaimLocked(claim.UID, &claimHold{name: key, results: results, pods: pods})
	case old != nil && !old.pending:
		l.setClaimLocked(claim.UID, nil)
	}
}

// ForgetClaim forgets a deleted claim; the claim informer's delete handler.
func (l *Ledger) ForgetClaim(obj interface{}) {
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	key := claim.Namespace + "/" + claim.Name
	if c := l.named[key]; c != nil && c.UID == claim.UID {
		delete(l.named, key)
	}
	l.setClaimLocked(claim.UID, nil)
}

// AssumeClaim records the scheduler's allocation of a claim that its
// PreBind has yet to write (DynamicResources' pending allocation), so that
// what the pods scheduled meanwhile are ranked on counts it. The claim's
// own record, once the informer has it, replaces it.
func (l *Ledger) AssumeClaim(uid types.UID, name string, allocation *resourceapi.AllocationResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old := l.claims[uid]; old != nil && !old.pending {
		return
	}
	if results := l.driverResults(allocation); len(results) > 0 {
		l.setClaimLocked(uid, &claimHold{name: name, results: results, pending: true})
	}
}

// ForgetAssumed forgets an allocation AssumeClaim recorded that was not
// written (Unreserve).
func (l *Ledger) ForgetAssumed(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old := l.claims[uid]; old != nil && old.pending {
		l.setClaimLocked(uid, nil)
	}
}

// driverResults are the results of an allocation that hold the driver's
// devices: admin access holds none (upstream counts it so too).
func (l *Ledger) driverResults(a *resourceapi.AllocationResult) []resourceapi.DeviceRequestAllocationResult {
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
func (l *Ledger) setClaimLocked(uid types.UID, c *claimHold) {
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
		l.recomputeUsageLocked(node)
	}
}

// recomputeUsageLocked sums what the claims hold of a node's cards, and
// reports the node to the card ledger.
func (l *Ledger) recomputeUsageLocked(node string) {
	l.next++
	if len(l.changed) == maxChanges {
		l.changed = append(l.changed[:0], l.changed[maxChanges/2:]...)
	}
	l.changed = append(l.changed, viewChange{gen: l.next, node: node})
	n := l.nodes[node]
	var u gpuledger.Usage
	held := map[DeviceRef]bool{}
	if n != nil {
		for _, pool := range n.pools() {
			for uid := range l.byPool[pool] {
				for i := range l.claims[uid].results {
					r := &l.claims[uid].results[i]
					ref := DeviceRef{Pool: r.Pool, Device: r.Device}
					if dev := n.devices[ref]; r.Pool == pool && dev != nil {
						u = u.With([]int{dev.Card}, partOf(dev, r))
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
	var set *gpu.Set
	if n != nil {
		set = n.set
	}
	if u.Count() == 0 {
		delete(l.usage, node)
	} else {
		l.usage[node] = u
	}
	l.cards.SetDRANode(node, set, u)
}

// partOf is what one result holds of its device's card: the card whole,
// a MIG device's part of it, or the capacity a claim consumes of a shared
// device (memory in MiB, shares as thousandths of the card or of the MIG
// device's part). A share that consumes nothing (the driver's unlimited
// sharing) still shares the card: it holds one thousandth.
func partOf(dev *Device, r *resourceapi.DeviceRequestAllocationResult) gpuledger.Share {
	if !dev.Shareable || r.ShareID == nil && r.ConsumedCapacity == nil {
		return dev.Part
	}
	var sh gpuledger.Share
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
