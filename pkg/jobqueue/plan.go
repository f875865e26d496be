package jobqueue

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
)

// Group is one pod group as the queue sees it.
type Group struct {
	// Key is namespace/name.
	Key          string
	Namespace    string
	Priority     int32
	Created      time.Time
	MinAvailable int
	// MinResources is the PodGroup's spec.minResources, if any.
	MinResources corev1.ResourceList
	// Pending are the members not bound to a node, Bound the others
	// (terminal pods are in neither).
	Pending, Bound []*corev1.Pod
	// Succeeded counts the members that completed.
	Succeeded int
	// Admitted is true for a group admitted by an earlier plan whose
	// admission was not revoked.
	Admitted bool
	// BackoffUntil holds a group back after a failed attempt.
	BackoffUntil time.Time
}

// Quota is one ResourceQuota: spec.hard and status.used.
type Quota struct {
	Name       string
	Hard, Used corev1.ResourceList
}

// Input is everything a plan depends on.
type Input struct {
	Now    time.Time
	Groups []Group
	Rooms  []Room
	// Quotas by namespace.
	Quotas map[string][]Quota
	// Backfill lets groups behind a waiting group be admitted where they
	// cannot delay it; without it they wait behind it.
	Backfill bool
}

// Reason says why a group is where it is, in one word (a condition reason).
type Reason string

// The reasons, in the order a group meets them.
const (
	// ReasonWaitingForMembers: fewer members exist than min-available.
	ReasonWaitingForMembers Reason = "WaitingForMembers"
	// ReasonQuotaExceeded: the whole group does not fit the namespace's
	// ResourceQuota (hard minus what other pods use).
	ReasonQuotaExceeded Reason = "QuotaExceeded"
	// ReasonBackingOff: an attempt failed; the group waits before the next.
	ReasonBackingOff Reason = "BackingOff"
	// ReasonUnplaceable: the group does not fit the cluster even with
	// every node empty.
	ReasonUnplaceable Reason = "Unplaceable"
	// ReasonWaitingForCapacity: the group would fit if pods finished; the
	// first such group holds a reservation.
	ReasonWaitingForCapacity Reason = "WaitingForCapacity"
	// ReasonPreempting: the group fits once pods of lower priority leave;
	// the queue deletes them (whole groups) and holds their room for it.
	ReasonPreempting Reason = "Preempting"
	// ReasonBehindReservation: backfill is off and a group ahead waits.
	ReasonBehindReservation Reason = "BehindReservation"
	// ReasonAdmitted: the members may be scheduled.
	ReasonAdmitted Reason = "Admitted"
)

// admitted is the decision for an admitted group; counts live in the
// PodGroup's status, so the message does not change as members bind.
var admitted = Decision{Admitted: true, Reason: ReasonAdmitted, Message: "admitted by the job queue: the whole group fits its quota and the free resources"}

// Decision is the plan for one group.
type Decision struct {
	Admitted bool
	// Position is the group's place among the queued groups, from 1; 0 for
	// a group that is admitted or still missing members.
	Position int
	Reason   Reason
	Message  string
}

// Reservation is what one group needs on each node: others may use a
// node's free resources and cards only beyond it. The first waiting group
// holds one so that it starts as soon as the pods now on these nodes
// finish; the first admitted group whose members are being placed holds
// one where the plan placed them, so that pods the scheduler takes first
// do not scatter over those nodes and leave it without room.
type Reservation struct {
	Holder   string
	Priority int32
	Nodes    map[string]Held
}

// Held is what a reservation holds on one node: CPU, memory and pod
// slots, and the GPU requests of the members it keeps room for.
type Held struct {
	Resources
	GPUs []gpu.Request
}

// Plan is the outcome of one pass over the queue.
type Plan struct {
	Decisions   map[string]Decision
	Reservation *Reservation
	// Placing is the reservation of the first admitted group, in queue
	// order, whose members are being placed.
	Placing *Reservation
	// Preemptions are the pods to delete so that a group fits.
	Preemptions []Preemption
	// Seen is what the pass saw free on each node, kept while a group
	// waits with a Reservation: capacity freed since is the next pass's
	// to give (Queue.Fence).
	Seen map[string]Capacity
}

// Capacity is what a node has free: resources and thousandths of cards.
type Capacity struct {
	Free     Resources
	GPUMilli int64
}

// exceeds reports whether c has more of CPU, memory or cards than o.
func (c Capacity) exceeds(o Capacity) bool {
	return c.Free.MilliCPU > o.Free.MilliCPU || c.Free.Memory > o.Free.Memory || c.GPUMilli > o.GPUMilli
}

// Preemption is a group's victims: whole groups and single pods, all of
// lower priority.
type Preemption struct {
	Group    string
	Priority int32
	Victims  []*corev1.Pod
	// brokenGroup: the victims are the rest of group Group, a member of
	// which was preempted.
	brokenGroup bool
	// partial: the victims are the bound members of group Group, which
	// held fewer than min-available members bound for too long; why is
	// the queue's reason for not admitting the rest.
	partial bool
	why     string
}

// Compute decides which groups are admitted. Groups are taken in queue
// order: priority, then creation time, then key. Admitted groups take
// their room first. A group is admitted when its whole request fits its
// namespace's quotas and min-available of its members fit the free
// resources that earlier groups left. The first group that fits the
// cluster but not its free resources gets a reservation; with backfill,
// later groups may use what the reservation leaves, without it they wait.
func Compute(in Input) Plan {
	rooms := slices.Clone(in.Rooms)
	groups := slices.Clone(in.Groups)
	slices.SortStableFunc(groups, func(a, b Group) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), a.Created.Compare(b.Created), cmp.Compare(a.Key, b.Key))
	})
	plan := Plan{Decisions: make(map[string]Decision, len(groups))}
	// protect holds for the first admitted group with members to place
	// what they took of the rooms.
	protect := func(g Group, demands []Demand, at placement) {
		if plan.Placing == nil && len(demands) > 0 {
			// FitFirst has taken their room already.
			plan.Placing, _ = held(g, demands, at, rooms)
		}
	}
	for _, g := range groups {
		if g.Admitted {
			demands := demandsOf(g.Pending)
			_, at := FitFirst(demands, rooms, len(g.Pending))
			plan.Decisions[g.Key] = admitted
			protect(g, demands, at)
		}
	}
	position := 0
	queue := func(g Group, reason Reason, msg string) {
		position++
		plan.Decisions[g.Key] = Decision{Position: position, Reason: reason, Message: msg}
	}
	for _, g := range groups {
		if g.Admitted {
			continue
		}
		if msg, ok := checkQuota(g, in.Quotas[g.Namespace]); !ok {
			queue(g, ReasonQuotaExceeded, msg)
			continue
		}
		if n := len(g.Pending) + len(g.Bound) + g.Succeeded; n < g.MinAvailable {
			plan.Decisions[g.Key] = Decision{Reason: ReasonWaitingForMembers,
				Message: fmt.Sprintf("%d of its %d members (min-available) exist", n, g.MinAvailable)}
			continue
		}
		if in.Now.Before(g.BackoffUntil) {
			queue(g, ReasonBackingOff, fmt.Sprintf("an attempt to place it failed; next attempt at %s", g.BackoffUntil.Format(time.RFC3339)))
			continue
		}
		if plan.Reservation != nil && !in.Backfill {
			queue(g, ReasonBehindReservation, fmt.Sprintf("waiting behind %s (backfill is off)", plan.Reservation.Holder))
			continue
		}
		need := g.MinAvailable - len(g.Bound) - g.Succeeded
		demands := demandsOf(g.Pending)
		// Try on the rooms themselves and give back what a failed try
		// took: copying every node per group would cost groups x nodes.
		fit, at := FitFirst(demands, rooms, need)
		if fit < need {
			unfit(demands, rooms, at)
			fit, at = Fit(demands, rooms, need)
		}
		if fit >= need {
			plan.Decisions[g.Key] = admitted
			protect(g, demands, at)
			continue
		}
		unfit(demands, rooms, at)
		msg := explain(demands, need, fit, rooms)
		if plan.Reservation != nil {
			queue(g, ReasonWaitingForCapacity, fmt.Sprintf("%s; capacity is reserved for %s", msg, plan.Reservation.Holder))
			continue
		}
		if mayPreempt(g) {
			if victims, _, at, ok := preemption(g, demands, need, rooms); ok {
				plan.Reservation = reservationAt(g, demands, at, rooms)
				if len(victims) > 0 {
					plan.Preemptions = append(plan.Preemptions, Preemption{Group: g.Key, Priority: g.Priority, Victims: victims})
					queue(g, ReasonPreempting, fmt.Sprintf("%s; preempting pods of lower priority: %s", msg, describeVictims(victims)))
				} else {
					queue(g, ReasonPreempting, msg+"; waiting for the pods being deleted to end")
				}
				continue
			}
		}
		taken, ok := reserve(demands, need, rooms)
		if !ok {
			queue(g, ReasonUnplaceable, msg+"; it does not fit even with every node empty")
			continue
		}
		res := &Reservation{Holder: g.Key, Priority: g.Priority, Nodes: make(map[string]Held, len(taken))}
		for r, held := range taken {
			res.Nodes[rooms[r].Node.Name] = held
			rooms[r].Free = rooms[r].Free.Sub(held.Resources).floor()
			rooms[r].GPUs = withheld(rooms[r].GPUs, held.GPUs)
		}
		plan.Reservation = res
		queue(g, ReasonWaitingForCapacity, fmt.Sprintf("%s; %d nodes are reserved for it until the pods on them finish", msg, len(taken)))
	}
	if plan.Reservation != nil {
		plan.Seen = make(map[string]Capacity, len(in.Rooms))
		for i := range in.Rooms {
			r := &in.Rooms[i]
			plan.Seen[r.Node.Name] = Capacity{Free: r.Free, GPUMilli: r.GPUs.FreeMilli()}
		}
	}
	return plan
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

func demandsOf(pods []*corev1.Pod) []Demand {
	out := make([]Demand, len(pods))
	for i, p := range pods {
		out[i] = DemandOf(p)
	}
	return out
}

// explain says in plain words why need demands do not fit rooms.
func explain(demands []Demand, need, fit int, rooms []Room) string {
	if len(demands) == 0 {
		return fmt.Sprintf("needs %d more members placed at once", need)
	}
	largest := demands[0]
	var total, free Resources
	var totalGPU, freeGPU int64
	for _, d := range demands {
		total = total.Add(d.Request)
		totalGPU += d.GPU.TotalMilli()
		if largestFirst(d, largest) < 0 {
			largest = d
		}
	}
	nodes := 0
	for i := range rooms {
		r := &rooms[i]
		free = free.Add(r.Free.floor())
		freeGPU += r.GPUs.FreeMilli()
		if r.fits(&largest) && largest.Allows(r.Node) {
			nodes++
		}
	}
	msg := fmt.Sprintf("needs %d pods placed at once, the largest with %s; the free resources hold %d of them; %d nodes have room for the largest",
		need, largest, fit, nodes)
	if need == len(demands) && free.Covers(total) && freeGPU >= totalGPU {
		msg += "; the cluster has enough free in total, but not on the right nodes"
	}
	return msg
}

// reserve places need demands on the nodes as if they were empty
// (allocatable resources, every card free), preferring the nodes with the
// most free now (so the wait is shortest). It returns what it takes on
// each room, by room index.
func reserve(demands []Demand, need int, rooms []Room) (map[int]Held, bool) {
	order := slices.Clone(demands)
	slices.SortStableFunc(order, largestFirst)
	taken := map[int]Held{}
	// empty[r] is room r with every pod gone and the reserved so far taken.
	empty := map[int]*gpuledger.NodeGPUs{}
	emptyOf := func(r int) *gpuledger.NodeGPUs {
		if e, ok := empty[r]; ok {
			return e
		}
		e := rooms[r].GPUs.Empty()
		empty[r] = &e
		return &e
	}
	placed := 0
	for i := range order {
		d := &order[i]
		if placed == need {
			break
		}
		best := -1
		var bestFree Resources
		var bestGPU int64
		for r := range rooms {
			t := taken[r]
			if !rooms[r].Allocatable.Sub(t.Resources).Covers(d.Request) || !emptyOf(r).Fits(d.GPU) {
				continue
			}
			free := rooms[r].Free.Sub(t.Resources)
			freeGPU := rooms[r].GPUs.FreeMilli() - heldMilli(t.GPUs)
			if best >= 0 && (freeGPU < bestGPU || (freeGPU == bestGPU && free.MilliCPU <= bestFree.MilliCPU)) {
				continue
			}
			if d.Allows(rooms[r].Node) {
				best, bestFree, bestGPU = r, free, freeGPU
			}
		}
		if best < 0 {
			continue
		}
		emptyOf(best).Take(d.GPU)
		t := taken[best]
		t.Resources = t.Add(d.Request)
		if d.GPU.Count > 0 {
			t.GPUs = append(t.GPUs, d.GPU)
		}
		taken[best] = t
		placed++
	}
	return taken, placed == need
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
