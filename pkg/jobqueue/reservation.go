package jobqueue

import (
	"maps"
	"slices"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
)

// Reservation is what one group needs on each node: others may use a
// node's free resources and cards only beyond it. The first waiting group
// holds one so that it starts as soon as the pods now on these nodes
// finish; the first admitted group whose members are being placed holds
// one where the plan placed them, so that pods the scheduler takes first
// do not scatter over those nodes and leave it without room.
type Reservation struct {
	Holder   string
	Priority int32
	// Domain names the topology domain the nodes are in ("rack r3"), for a
	// holder that asks for one.
	Domain string
	Nodes  map[string]Held
}

// Held is what a reservation holds on one node: CPU, memory and pod
// slots, and the GPU requests of the members it keeps room for.
type Held struct {
	Resources
	GPUs []gpu.Request
}

// reservationAt reserves for g what its demands take where at placed
// them, and withholds it from the rooms.
func reservationAt(g Group, demands []Demand, at placement, rooms []Room) *Reservation {
	res, taken := held(g, demands, at, rooms)
	for r, h := range taken {
		rooms[r].Free = rooms[r].Free.Sub(h.Resources).floor()
		rooms[r].GPUs = withheld(rooms[r].GPUs, h.GPUs)
	}
	return res
}

// held returns the reservation of g's demands where at placed them, and
// what it holds by room.
func held(g Group, demands []Demand, at placement, rooms []Room) (*Reservation, map[int]Held) {
	res := &Reservation{Holder: g.Key, Priority: g.Priority, Nodes: map[string]Held{}}
	taken := map[int]Held{}
	for i, r := range at.at {
		if r < 0 {
			continue
		}
		h := taken[r]
		h.Resources = h.Add(demands[i].Request)
		if demands[i].GPU.Count > 0 {
			h.GPUs = append(h.GPUs, demands[i].GPU)
		}
		taken[r] = h
	}
	for r, h := range taken {
		res.Nodes[rooms[r].Node.Name] = h
	}
	return res, taken
}

// reserve places need demands on the nodes as if they were empty
// (allocatable resources, every card free), preferring the nodes with the
// most free now (so the wait is shortest), and among nodes with as much
// free, the ones kept (the group's reservation of the last pass), so that
// the reservation does not move without a gain. It returns what it takes on
// each room, by room index, and how many demands it placed: fewer than need
// when the group never fits. Rooms in avoid (by index) are left out:
// those where admitted members are being placed, whom a reservation
// there would hold off the free cards they were given.
func reserve(demands []Demand, need int, rooms []Room, kept map[string]bool, avoid map[int]bool) (map[int]Held, int) {
	rv := newReserver(rooms, kept, avoid)
	placed := rv.place(demands, need, nil)
	return rv.taken, placed
}

// reserver is reserve in steps: each place call goes on from what the
// earlier ones took (the slices of a group, each in its own domain).
type reserver struct {
	rooms []Room
	kept  map[string]bool
	avoid map[int]bool
	taken map[int]Held
	// empty[r] is room r with every pod gone and the reserved so far taken.
	empty map[int]*gpuledger.NodeGPUs
}

func newReserver(rooms []Room, kept map[string]bool, avoid map[int]bool) *reserver {
	return &reserver{rooms: rooms, kept: kept, avoid: avoid, taken: map[int]Held{}, empty: map[int]*gpuledger.NodeGPUs{}}
}

// clone returns a copy of rv that places apart from it, to try a slice.
func (rv *reserver) clone() *reserver {
	out := &reserver{rooms: rv.rooms, kept: rv.kept, avoid: rv.avoid, taken: make(map[int]Held, len(rv.taken)), empty: make(map[int]*gpuledger.NodeGPUs, len(rv.empty))}
	for r, h := range rv.taken {
		h.GPUs = slices.Clone(h.GPUs)
		out.taken[r] = h
	}
	for r, e := range rv.empty {
		cp := *e
		out.empty[r] = &cp
	}
	return out
}

func (rv *reserver) emptyOf(r int) *gpuledger.NodeGPUs {
	if e, ok := rv.empty[r]; ok {
		return e
	}
	e := rv.rooms[r].GPUs.Empty()
	rv.empty[r] = &e
	return &e
}

// place reserves up to need of demands, largest first, on the rooms of
// scope (indexes into the rooms; nil: every room), and returns how many it
// placed.
func (rv *reserver) place(demands []Demand, need int, scope []int) int {
	rooms := rv.rooms
	order := slices.Clone(demands)
	slices.SortStableFunc(order, largestFirst)
	placed := 0
	n := len(rooms)
	if scope != nil {
		n = len(scope)
	}
	for i := range order {
		d := &order[i]
		if placed == need {
			break
		}
		best := -1
		var bestFree Resources
		var bestGPU int64
		bestKept := false
		for k := range n {
			r := k
			if scope != nil {
				r = scope[k]
			}
			t := rv.taken[r]
			if rv.avoid[r] || !rooms[r].Allocatable.Sub(t.Resources).Covers(d.Request) || !rv.emptyOf(r).Fits(d.GPU) {
				continue
			}
			free := rooms[r].Free.Sub(t.Resources)
			freeGPU := rooms[r].GPUs.FreeMilli() - heldMilli(t.GPUs)
			keep := rv.kept[rooms[r].Node.Name]
			if best >= 0 && (freeGPU < bestGPU || freeGPU == bestGPU && (free.MilliCPU < bestFree.MilliCPU ||
				free.MilliCPU == bestFree.MilliCPU && (bestKept || !keep))) {
				continue
			}
			if d.Allows(rooms[r].Node) {
				best, bestFree, bestGPU, bestKept = r, free, freeGPU, keep
			}
		}
		if best < 0 {
			continue
		}
		rv.emptyOf(best).Take(d.GPU)
		t := rv.taken[best]
		t.Resources = t.Add(d.Request)
		if d.GPU.Count > 0 {
			t.GPUs = append(t.GPUs, d.GPU)
		}
		rv.taken[best] = t
		placed++
	}
	return placed
}

// heldMilli is what requests hold in thousandths of a card.
func heldMilli(rs []gpu.Request) int64 {
	var sum int64
	for _, r := range rs {
		sum += r.TotalMilli()
	}
	return sum
}

// withheld returns the cards of a node with the reserved requests taken,
// so that later groups of the same plan do not count on them; when the
// node has no room for them now, none of its cards is left to others.
func withheld(n gpuledger.NodeGPUs, reserved []gpu.Request) gpuledger.NodeGPUs {
	for _, r := range reserved {
		if _, ok := n.Take(r); !ok {
			return gpuledger.NodeGPUs{}
		}
	}
	return n
}

// Binding returns what the plan's reservations hold for a pod of group
// key ("" for none) and priority: those of other groups of the same or
// higher priority, merged when both bind it. Nil when none binds it. It
// runs in every PreFilter, so one reservation is returned as it is.
func (p *Plan) Binding(key string, priority int32) *Reservation {
	binds := func(r *Reservation) bool { return r != nil && r.Holder != key && priority <= r.Priority }
	switch a, b := p.Placing, p.Reservation; {
	case binds(a) && binds(b):
		out := &Reservation{Holder: a.Holder + " and " + b.Holder, Priority: a.Priority, Nodes: maps.Clone(a.Nodes)}
		for node, h := range b.Nodes {
			both := out.Nodes[node]
			both.Resources = both.Add(h.Resources)
			both.GPUs = append(slices.Clone(both.GPUs), h.GPUs...)
			out.Nodes[node] = both
		}
		return out
	case binds(a):
		return a
	case binds(b):
		return b
	}
	return nil
}

// Allows reports whether a pod with request and GPU request gpuReq may use
// a node's free resources free and cards gpus, given what the reservation
// holds there: it may take of each resource it asks for only what exceeds
// the reservation, and cards only if the reserved members still fit the
// cards left.
func (r *Reservation) Allows(node string, free Resources, gpus gpuledger.NodeGPUs, request Resources, gpuReq gpu.Request) bool {
	held, ok := r.Nodes[node]
	if !ok {
		return true
	}
	left := free.Sub(request)
	if (request.MilliCPU > 0 && left.MilliCPU < held.MilliCPU) ||
		(request.Memory > 0 && left.Memory < held.Memory) || left.Pods < held.Pods {
		return false
	}
	if gpuReq.Count == 0 || len(held.GPUs) == 0 {
		return true
	}
	if _, ok := gpus.Take(gpuReq); !ok {
		// GPUFit refuses the node anyway.
		return true
	}
	for _, h := range held.GPUs {
		if _, ok := gpus.Take(h); !ok {
			return false
		}
	}
	return true
}
