package dra

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// Room for a pod's claims on a node. Upstream's allocator runs in Filter
// on every node the scheduler tries, and on a node whose GPUs are all
// held it fails only after reading them; GPUClaims leaves such nodes out
// of the cycle (plugins/gpuclaims). The ledger tells which nodes cannot
// hold what a pod's claims ask, from a necessary condition only: each
// request judged alone, and a device counted free unless a claim holds it
// (a device that takes several claims always), so that a node it calls
// short is one upstream's allocator would refuse too. Whether the
// devices' counters, taints or a claim's constraints allow the rest is
// left to the allocator.

// Need is what a pod's claims not yet allocated ask of the GPU
// driver's devices, in the terms a node's free devices are counted in:
// for each request the ledger can judge, its alternatives, each a count
// of devices of the shapes it selects. A request that reads a per-device
// attribute, asks for all devices, for capacity or for admin access (which
// may take held devices), or of another driver's class, is not judged: it
// never makes a node short.
type Need struct {
	requests []needRequest
	key      string
}

type needRequest struct {
	alts []needAlt
}

type needAlt struct {
	keys  []string
	count int64
}

// IsZero reports whether the need judges no request.
func (n Need) IsZero() bool { return len(n.requests) == 0 }

// Key identifies the need: two pods with the same key make the same nodes
// short.
func (n Need) Key() string { return n.key }

// NeedOf returns what the pod's claims not yet allocated ask of the
// GPU driver's devices (Need).
func (l *Ledger) NeedOf(pod *corev1.Pod) Need {
	if len(pod.Spec.ResourceClaims) == 0 {
		return Need{}
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	var need Need
	var key strings.Builder
	for _, claim := range l.podClaims(pod) {
		for i := range claim.Spec.Devices.Requests {
			req := &claim.Spec.Devices.Requests[i]
			if req.Exactly != nil && ptr.Deref(req.Exactly.AdminAccess, false) {
				continue
			}
			nr, ok := l.judged(alternatives(req))
			if !ok {
				continue
			}
			need.requests = append(need.requests, nr)
			for _, a := range nr.alts {
				key.WriteString(strconv.FormatInt(a.count, 10))
				for _, k := range a.keys {
					key.WriteByte('|')
					key.WriteString(k)
				}
				key.WriteByte(';')
			}
			key.WriteByte('\n')
		}
	}
	need.key = key.String()
	return need
}

// judged is a request's alternatives as counts of shapes, ok false when
// one of them cannot be judged by the shapes. s.mu is held.
func (l *Ledger) judged(alts []exact) (needRequest, bool) {
	var nr needRequest
	for _, e := range alts {
		if e.mode != resourceapi.DeviceAllocationModeExactCount || len(e.capacity) > 0 || readsPerDevice(e.selectors) {
			return needRequest{}, false
		}
		selected, ours := l.shapesFor(e)
		if !ours || len(selected) == 0 {
			return needRequest{}, false
		}
		a := needAlt{count: e.count}
		for _, sh := range selected {
			a.keys = append(a.keys, sh.key)
		}
		nr.alts = append(nr.alts, a)
	}
	return nr, len(nr.alts) > 0
}

// Short reports whether the node cannot hold need: some judged request
// has, for each of its alternatives, fewer free devices of the shapes it
// selects than it asks. Free is as the ledger's claims hold the devices,
// or, with held, as held says (another account of the allocations, such
// as the scheduler's own). A node the GPU driver publishes no devices of
// is short of every judged request.
func (l *Ledger) Short(need Need, node string, held func(DeviceRef) bool) bool {
	if need.IsZero() {
		return false
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	free, n := l.free[node], l.nodes[node]
	// freeOf counts the free devices of an alternative's shapes: from the
	// ledger's counts, or the node's devices as held says (no map built:
	// GPUClaims asks this for every short node of every cycle).
	freeOf := func(a needAlt) (c int64) {
		if held == nil {
			for _, k := range a.keys {
				c += int64(free[k])
			}
			return c
		}
		if n == nil {
			return 0
		}
		for ref, dev := range n.devices {
			if (dev.Shareable || !held(ref)) && slices.Contains(a.keys, n.keys[ref]) {
				c++
			}
		}
		return c
	}
	for _, r := range need.requests {
		if !slices.ContainsFunc(r.alts, func(a needAlt) bool { return freeOf(a) >= a.count }) {
			return true
		}
	}
	return false
}

// SliceCurrent reports whether the ledger's record of the slice's node
// was built from this very slice object, so that what it counts of the
// node is what a lister that returned it holds.
func (l *Ledger) SliceCurrent(sl *resourceapi.ResourceSlice) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.slices[sl.Name] == sl
}

// freeCounts counts the devices of a node (n, nil when the driver
// publishes none) by shape that no claim holds, as held says, or that take
// several claims.
func freeCounts(n *nodeDevices, held func(DeviceRef) bool) map[string]int {
	if n == nil {
		return nil
	}
	free := map[string]int{}
	for ref, dev := range n.devices {
		if dev.Shareable || !held(ref) {
			free[n.keys[ref]]++
		}
	}
	return free
}
