package jobqueue

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	// Queued is the group's place among the queued groups as the queue
	// last decided it (the previous plan's, or after a scheduler restart
	// the one its PodGroup's status recorded); 0 when it was not queued.
	// It orders groups created in the same second (creation times have
	// whole seconds), so a group that waits keeps its place before one
	// that arrived in its second.
	Queued int
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
	// LastReservation is the last pass's reservation: its holder keeps its
	// nodes while they can still hold it.
	LastReservation *Reservation
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
// order: priority, then creation time, then the place the queue gave them
// last, then key (queueOrder). Admitted groups take
// their room first. A group is admitted when its whole request fits its
// namespace's quotas and min-available of its members fit the free
// resources that earlier groups left. The first group that fits the
// cluster but not its free resources gets a reservation; with backfill,
// later groups may use what the reservation leaves, without it they wait.
func Compute(in Input) Plan {
	rooms := slices.Clone(in.Rooms)
	groups := slices.Clone(in.Groups)
	slices.SortStableFunc(groups, queueOrder)
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
		var kept map[string]bool
		if last := in.LastReservation; last != nil && last.Holder == g.Key {
			kept = make(map[string]bool, len(last.Nodes))
			for node := range last.Nodes {
				kept[node] = true
			}
		}
		taken, ok := reserve(demands, need, rooms, kept)
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

// queueOrder orders groups: higher priority first, then the older, then
// the one queued earlier, then by key.
func queueOrder(a, b Group) int {
	return cmp.Or(cmp.Compare(b.Priority, a.Priority), a.Created.Compare(b.Created), queuedFirst(a.Queued, b.Queued), cmp.Compare(a.Key, b.Key))
}

// queuedFirst orders two places in the queue, where 0 (not queued) comes
// after every place.
func queuedFirst(a, b int) int {
	switch {
	case a == b:
		return 0
	case a == 0:
		return 1
	case b == 0:
		return -1
	}
	return cmp.Compare(a, b)
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
