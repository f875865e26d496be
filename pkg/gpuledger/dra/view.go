package dra

import (
	"cmp"
	"maps"
	"slices"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
)

// View is what the ledger knows of a node whose cards the GPU driver
// publishes: its cards, its devices, and what claims hold of the cards
// (ChangedSince says when any of them changed). It is shared: callers
// must not modify it.
type View struct {
	Cards   *gpu.Set
	Devices map[DeviceRef]*Device
	Usage   gpuledger.Usage
}

// View returns the view of a node whose cards the GPU driver publishes; ok
// is false for other nodes, and for every node of a nil Ledger (a card
// ledger without one: Of).
func (l *Ledger) View(node string) (view View, ok bool) {
	if l == nil {
		return View{}, false
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := l.nodes[node]
	if n == nil {
		return View{}, false
	}
	return View{Cards: n.set, Devices: n.devices, Usage: l.usage[node]}, true
}

// InUse reports whether a claim holds a device of the node's GPU
// driver, allocated or pending in the scheduler: whether the node is in
// use for GPU work, rather than empty.
func (l *Ledger) InUse(node string) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	_, ok := l.usage[node]
	return ok
}

// viewChange is one change of a node's view: its generation, and the node.
type viewChange struct {
	gen  uint64
	node string
}

// maxChanges bounds the changes ChangedSince can report: a reader
// further behind reads every node again.
const maxChanges = 4096

// ChangedSince returns the nodes whose view (View) changed after
// generation gen, and the generation now, for a reader that keeps
// something per node; ok is false when the changes since gen are no
// longer all known (the reader must read every node again).
func (l *Ledger) ChangedSince(gen uint64) (nodes []string, now uint64, ok bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if gen == l.next {
		return nil, gen, true
	}
	if gen > l.next || len(l.changed) == 0 || l.changed[0].gen > gen+1 {
		return nil, l.next, false
	}
	i, _ := slices.BinarySearchFunc(l.changed, gen+1, func(c viewChange, g uint64) int { return cmp.Compare(c.gen, g) })
	for _, c := range l.changed[i:] {
		nodes = append(nodes, c.node)
	}
	return nodes, l.next, true
}

// Holder is a claim's hold on one device of a node.
type Holder struct {
	// Claim is the claim (namespace/name), Pods the pods it is reserved
	// for; Pending when the scheduler allocated it and has not written it.
	Claim   string
	Pods    []string
	Pending bool
	Device  Device
	// Share is what the claim holds of the device's card (zero: whole).
	Share gpuledger.Share
}

// Holders lists the claims that hold devices of a node, by card index.
func (l *Ledger) Holders(node string) map[int][]Holder {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := l.nodes[node]
	if n == nil {
		return nil
	}
	out := map[int][]Holder{}
	for _, pool := range n.pools() {
		for _, uid := range slices.Sorted(maps.Keys(l.byPool[pool])) {
			c := l.claims[uid]
			for i := range c.results {
				r := &c.results[i]
				dev := n.devices[DeviceRef{Pool: r.Pool, Device: r.Device}]
				if r.Pool != pool || dev == nil {
					continue
				}
				out[dev.Card] = append(out[dev.Card], Holder{Claim: c.name, Pods: c.pods, Pending: c.pending, Device: *dev, Share: partOf(dev, r)})
			}
		}
	}
	return out
}
