package jobqueue

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aisched/aisched/pkg/gpuledger/dra"
	"github.com/aisched/aisched/pkg/queuetree"
	"github.com/aisched/aisched/pkg/topology"
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
	// HeldClaims are the DRA claims allocated to pending members (a
	// scheduler stopped between a member's claim allocation and its
	// binding) that a release of the group deallocates.
	HeldClaims []HeldClaim
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
	// Queue is the name of the group's leaf team queue in Input.Queues,
	// "" for none.
	Queue string
	// QueueProblem says why the group's pods name a queue that cannot
	// hold them (it does not exist, has children, or is invalid); the
	// group waits with it.
	QueueProblem string
	// Single: the group is one pod in no pod group, queued because its
	// team queue accounts it; it has no PodGroup.
	Single bool
	// Constraint is what the group asks of a topology (read from its
	// PodGroup or its pods, in aisched's or a peer's form); empty for
	// nothing. ConstraintProblem says why what it asks cannot be read
	// (naming the key); the group waits with it.
	Constraint        topology.Constraint
	ConstraintProblem string
	// Placed is where the last plan placed the group while it is
	// admitted (Plan.Placements): its members go on into that domain.
	Placed *Placed
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
	// Queues are the team queues, built for this pass (nil for none);
	// Compute charges them with what work uses and asks for.
	Queues *queuetree.Tree
	// QueueOf is the leaf queue of the running work by its key (a group's
	// key, or "pod <namespace>/<name>" for a pod in no group).
	QueueOf map[string]string
	// QueueProblems are what is wrong with the queues, for their status.
	QueueProblems []queuetree.Problem
	// DemandOf reads a pod's demand (nil: the package's DemandOf); the
	// queue remembers them across passes.
	DemandOf func(*corev1.Pod) Demand
	// Claims places the DRA claims of each group's members together (nil:
	// no pod of a group has claims, or no DRA).
	Claims *ClaimSolver
	// Topologies are the topologies groups may ask for domains of.
	Topologies []*topology.Topology
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
	// ReasonQueueInvalid: the team queue the pods name cannot hold work
	// (it does not exist, has children, or is invalid).
	ReasonQueueInvalid Reason = "QueueInvalid"
	// ReasonOverQueueLimit: the group would take its team queue, or an
	// ancestor, past its limit.
	ReasonOverQueueLimit Reason = "OverQueueLimit"
	// ReasonReclaiming: the group's queue takes back capacity other queues
	// borrowed; the queue deletes their work (whole groups) and holds the
	// room for it.
	ReasonReclaiming Reason = "Reclaiming"
	// ReasonTopologyInvalid: what the group asks of a topology cannot be
	// honoured (a level no topology has, a bad value); the message names
	// the key.
	ReasonTopologyInvalid Reason = "TopologyInvalid"
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
	// Claims are, by pod UID, the node and devices that the solution of
	// their group's DRA claims gives the members of admitted groups
	// (claims.go); GPUClaims holds each member to its own.
	Claims map[types.UID]dra.ClaimPlan
	// Placements are the domains of the admitted groups that ask for one,
	// by group key, and of the group that holds the Reservation: Filter
	// keeps admitted members inside theirs.
	Placements map[string]*Placed
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
	// Deallocate are the claims of pending members a partial group
	// releases with its bound members.
	Deallocate []HeldClaim
	// Queue is the team queue that takes the victims back (a reclaim),
	// From the queues they are taken from; empty for a preemption by
	// priority.
	Queue string
	From  []string
	// queueName is the taker's queue's name, and need the GPUs it takes
	// back (thousandths), for the metrics.
	queueName string
	need      int64
}

// Compute decides which groups are admitted. Each leaf queue's groups
// are taken in queue order: priority, then creation time, then the place
// the queue gave them last, then key (queueOrder); across the team queues
// of in.Queues, the groups within their guarantees first, then the
// borrowing ones by their queues' fair shares (picker). Groups in no queue
// (every group, without queues) are taken in queue order alone. Admitted
// groups take their room first. A group is admitted when its whole
// request fits its namespace's quotas and its queues' limits, and
// min-available of its members fit the free resources that earlier groups
// left. The first group that fits the cluster but not its free resources
// gets a reservation, after taking back what other queues borrowed
// (reclaim) or preempting groups of lower priority of its own queue if
// that makes it fit; with backfill, later groups may use what the
// reservation leaves, without it they wait. Compute charges in.Queues with
// what running and admitted work uses and waiting work asks for, and
// computes its fair shares.
func Compute(in Input) Plan {
	c := newComputation(in)
	c.admittedFirst()
	for {
		g, leaf := c.pick.next()
		if g == nil {
			break
		}
		c.decide(g, leaf)
	}
	return c.finish()
}

// computation is the state of one Compute.
type computation struct {
	in         Input
	plan       Plan
	rooms      []Room
	groups     []*Group
	tree       *queuetree.Tree
	pick       *picker
	estimate   map[*Group]queuetree.Vec
	largestMiB int64
	position   int
	// room is, for pods alike (shapeOf), the most of them the rooms can
	// still take, once a try found fewer than it wanted; explained caches
	// explain's words for a shape until the rooms change.
	room      map[string]int
	explained map[explainKey]string
	changes   int
	demands   map[*Group][]Demand
	// emptyRoom is, for pods alike, how many of them fit the nodes with
	// every pod gone, once a try found fewer than it wanted; emptyFits
	// the most that were seen to fit.
	emptyRoom, emptyFits map[string]int
	// cursor is where the last first-fit try found room.
	cursor int
	// topo is the topology side of the computation.
	topo *topologies
	// placing is, by room, the lowest priority of the admitted members
	// the plan places there (not bound yet).
	placing map[int]int32
}

type explainKey struct {
	shape         string
	need, fit     int
	changesBefore int
}

// explain is explain, cached for pods alike while no room changed: once the
// cluster is full, the many groups that wait are told the same words
// without a look at every node each.
func (c *computation) explain(demands []Demand, shape string, alike bool, need, fit int) string {
	if !alike {
		return explain(demands, need, fit, c.rooms)
	}
	key := explainKey{shape: shape, need: need, fit: fit, changesBefore: c.changes}
	if msg, ok := c.explained[key]; ok {
		return msg
	}
	msg := explain(demands, need, fit, c.rooms)
	c.explained[key] = msg
	return msg
}

func newComputation(in Input) *computation {
	c := &computation{in: in, rooms: slices.Clone(in.Rooms), tree: in.Queues, estimate: map[*Group]queuetree.Vec{},
		room: map[string]int{}, explained: map[explainKey]string{}, demands: map[*Group][]Demand{},
		emptyRoom: map[string]int{}, emptyFits: map[string]int{}, topo: newTopologies(in.Topologies), placing: map[int]int32{}}
	if c.tree == nil {
		c.tree, _ = queuetree.Build(nil, nil)
	}
	c.largestMiB = largestCardMiB(c.rooms)
	c.groups = make([]*Group, len(in.Groups))
	for i := range in.Groups {
		g := in.Groups[i]
		c.groups[i] = &g
	}
	slices.SortStableFunc(c.groups, func(a, b *Group) int { return queueOrder(*a, *b) })
	c.plan = Plan{Decisions: make(map[string]Decision, len(c.groups)), Claims: map[types.UID]dra.ClaimPlan{}, Placements: map[string]*Placed{}}
	if !c.tree.Empty() {
		// What running work uses counts against its queues.
		for r := range c.rooms {
			for _, p := range c.rooms[r].Pods {
				if leaf := c.tree.Queue(in.QueueOf[unitKey(p)]); leaf != nil {
					c.tree.Charge(leaf, boundUsage(c.tree, c.demandOf(p), &c.rooms[r], c.largestMiB))
				}
			}
		}
	}
	var waiting []*Group
	for _, g := range c.groups {
		if !g.Admitted {
			waiting = append(waiting, g)
			c.estimate[g] = demandUsage(c.tree, c.demandsOf(g), placement{}, nil, c.largestMiB)
		}
	}
	c.pick = newPicker(c.tree, waiting, c.estimate, c.leaf)
	return c
}

// leaf is the leaf queue of a group, nil for none.
func (c *computation) leaf(g *Group) *queuetree.Node {
	if g.Queue == "" {
		return nil
	}
	return c.tree.Queue(g.Queue)
}

// protect holds for the first admitted group with members to place what
// they took of the rooms, and notes the rooms every admitted group's
// members take (computation.placing).
func (c *computation) protect(g *Group, demands []Demand, at placement) {
	for _, r := range at.at {
		if r < 0 {
			continue
		}
		if prio, ok := c.placing[r]; !ok || g.Priority < prio {
			c.placing[r] = g.Priority
		}
	}
	if c.plan.Placing == nil && len(demands) > 0 {
		// FitFirst has taken their room already.
		c.plan.Placing, _ = held(*g, demands, at, c.rooms)
	}
}

// admittedFirst keeps the room of the groups admitted by earlier passes.
func (c *computation) admittedFirst() {
	for _, g := range c.groups {
		if !g.Admitted {
			continue
		}
		demands := c.demandsOf(g)
		var at placement
		decision := admitted
		if r, _ := c.constraint(g); r != nil {
			var placed *Placed
			if at, placed = c.admittedIn(g, r, demands); placed != nil {
				c.plan.Placements[g.Key] = placed
				decision = admittedDecision(placed)
			}
		} else {
			_, at = fitFirst(demands, c.rooms, len(g.Pending), &c.cursor)
			c.touch(at)
		}
		if c.in.Claims != nil {
			// Its members being placed keep the devices of a solution:
			// those holding theirs already pinned, the others solved anew.
			c.in.Claims.Solve(demands, c.rooms, at, c.plan.Claims)
		}
		if leaf := c.leaf(g); leaf != nil {
			c.tree.Charge(leaf, demandUsage(c.tree, demands, at, c.rooms, c.largestMiB))
		}
		c.plan.Decisions[g.Key] = decision
		c.protect(g, demands, at)
	}
}

// queue records that g waits, at the next position.
func (c *computation) queue(g *Group, leaf *queuetree.Node, reason Reason, msg string) {
	c.position++
	c.plan.Decisions[g.Key] = Decision{Position: c.position, Reason: reason, Message: queueWords(leaf) + msg}
}

// decide decides one group of leaf queue leaf (nil for none).
func (c *computation) decide(g *Group, leaf *queuetree.Node) {
	in, rooms := c.in, c.rooms
	if g.QueueProblem != "" {
		c.queue(g, nil, ReasonQueueInvalid, g.QueueProblem)
		return
	}
	r, problem := c.constraint(g)
	if problem != "" {
		// It waits for its pods or the topologies to change, in no place
		// in the line, holding nothing.
		c.plan.Decisions[g.Key] = Decision{Reason: ReasonTopologyInvalid, Message: queueWords(leaf) + problem}
		return
	}
	if msg, ok := checkQuota(*g, in.Quotas[g.Namespace]); !ok {
		c.queue(g, leaf, ReasonQuotaExceeded, msg)
		return
	}
	if n := len(g.Pending) + len(g.Bound) + g.Succeeded; n < g.MinAvailable {
		c.plan.Decisions[g.Key] = Decision{Reason: ReasonWaitingForMembers,
			Message: fmt.Sprintf("%d of its %d members (min-available) exist", n, g.MinAvailable)}
		return
	}
	if in.Now.Before(g.BackoffUntil) {
		msg := fmt.Sprintf("an attempt to place it failed; next attempt at %s", g.BackoffUntil.Format(time.RFC3339))
		// First in line, it keeps nodes reserved while it backs off, so
		// that groups behind it do not take them meanwhile and leave it
		// waiting on them.
		if c.plan.Reservation == nil && mayHold(g) {
			if res, ok := c.reserve(g, c.demandsOf(g), g.MinAvailable-len(g.Bound)-g.Succeeded); ok {
				msg += fmt.Sprintf("; %d nodes are reserved for it", len(res.Nodes))
			}
		}
		c.queue(g, leaf, ReasonBackingOff, msg)
		return
	}
	if leaf != nil {
		if msg := overLimit(c.tree, leaf, c.estimate[g]); msg != "" {
			c.queue(g, leaf, ReasonOverQueueLimit, msg)
			return
		}
	}
	if c.plan.Reservation != nil && !in.Backfill {
		c.queue(g, leaf, ReasonBehindReservation, fmt.Sprintf("waiting behind %s (backfill is off)", c.plan.Reservation.Holder))
		return
	}
	need := g.MinAvailable - len(g.Bound) - g.Succeeded
	demands := c.demandsOf(g)
	shape, alike := shapeOf(demands)
	var fit int
	var at placement
	var placed *Placed
	var short []shortfall
	if r != nil {
		// Inside one domain: the fullest of the preferred level that
		// holds it, else of each coarser level up to the required one.
		fit, at, placed, short = c.fitTopology(g, r, demands, need)
	} else if most, known := c.room[shape]; alike && known && most < need {
		// Pods alike found room for only most of them earlier in this
		// pass, and rooms only fill during a pass: no need to look.
		fit = most
	} else {
		// Try on the rooms themselves and give back what a failed try
		// took: copying every node per group would cost groups x nodes.
		fit, at = fitFirst(demands, rooms, need, &c.cursor)
		if fit < need {
			unfit(demands, rooms, at)
			fit, at = Fit(demands, rooms, need)
		}
		if alike && fit < need {
			c.room[shape] = fit
		}
	}
	if fit >= need && c.in.Claims != nil {
		if ok, why := c.in.Claims.Solve(demands, rooms, at, c.plan.Claims); !ok {
			unfit(demands, rooms, at)
			c.queue(g, leaf, ReasonWaitingForCapacity, why)
			return
		}
	}
	if fit >= need {
		c.touch(at)
		if most, known := c.room[shape]; alike && known {
			c.room[shape] = max(most-need, 0)
		}
		if leaf != nil {
			use := demandUsage(c.tree, demands, at, rooms, c.largestMiB)
			if msg := overLimit(c.tree, leaf, use); msg != "" {
				unfit(demands, rooms, at)
				c.queue(g, leaf, ReasonOverQueueLimit, msg)
				return
			}
			c.tree.Charge(leaf, use)
			c.pick.charged(leaf)
		}
		c.plan.Decisions[g.Key] = admitted
		if placed != nil {
			if placed.Why == "" {
				placed.Why = placedWords(placed, r, short, need)
			}
			c.plan.Placements[g.Key] = placed
			c.plan.Decisions[g.Key] = admittedDecision(placed)
		}
		c.protect(g, demands, at)
		c.changes++
		return
	}
	unfit(demands, rooms, at)
	var msg string
	if r != nil {
		msg = explainTopology(demands, r, short, need)
		if placed, words, ok := c.everFitsTopology(r, demands, shape, alike, need); !ok {
			c.plan.Decisions[g.Key] = Decision{Reason: ReasonUnplaceable, Message: queueWords(leaf) + explainNeverTopology(demands, r, need, placed, words, c.in.Rooms)}
			return
		}
	} else {
		msg = c.explain(demands, shape, alike, need, fit)
		if placed, ok := c.everFits(demands, shape, alike, need); !ok {
			// It never fits, whatever ends: it takes no place in the line
			// and holds nothing, and says so (the phase Unplaceable).
			c.plan.Decisions[g.Key] = Decision{Reason: ReasonUnplaceable, Message: queueWords(leaf) + explainNever(demands, need, placed, c.in.Rooms)}
			return
		}
	}
	if c.plan.Reservation != nil {
		c.queue(g, leaf, ReasonWaitingForCapacity, fmt.Sprintf("%s; capacity is reserved for %s", msg, c.plan.Reservation.Holder))
		return
	}
	if mayPreempt(*g) && c.preempt(g, leaf, demands, need, msg) {
		return
	}
	res, ok := c.reserve(g, demands, need)
	if !ok {
		// everFits said it fits the nodes as they are; what is left after
		// the reservations of this pass does not hold it.
		c.queue(g, leaf, ReasonWaitingForCapacity, msg+"; the nodes reserved in this pass leave no room for it")
		return
	}
	c.queue(g, leaf, ReasonWaitingForCapacity, fmt.Sprintf("%s; %d nodes%s are reserved for it until the pods on them finish", msg, len(res.Nodes), domainWords(res, " of ")))
}

// everFits reports whether need of the demands fit the nodes as they are,
// with every pod gone (ok false: the group never fits, and placed of them
// do). Pods alike are asked once per pass: the answer does not change
// while a pass admits and reserves.
func (c *computation) everFits(demands []Demand, shape string, alike bool, need int) (placed int, ok bool) {
	if alike {
		if most, known := c.emptyRoom[shape]; known && need > most {
			return most, false
		}
		if need <= c.emptyFits[shape] {
			return need, true
		}
	}
	_, placed = reserve(demands, need, c.in.Rooms, nil, nil)
	if alike {
		if placed < need {
			c.emptyRoom[shape] = placed
		} else {
			c.emptyFits[shape] = max(c.emptyFits[shape], need)
		}
	}
	return placed, placed >= need
}

// mayHold reports whether a group may hold a reservation: it has its
// members (a group still missing some would hold nodes for pods that may
// never come).
func mayHold(g *Group) bool {
	return len(g.Pending)+len(g.Bound)+g.Succeeded >= g.MinAvailable
}

// reserve gives g the plan's reservation: what need of its demands take
// on the nodes as if they were empty, keeping the nodes it held in the
// last pass (reserve), withheld from the rooms. ok is false when they do
// not fit even so.
func (c *computation) reserve(g *Group, demands []Demand, need int) (*Reservation, bool) {
	var kept map[string]bool
	if last := c.in.LastReservation; last != nil && last.Holder == g.Key {
		kept = make(map[string]bool, len(last.Nodes))
		for node := range last.Nodes {
			kept[node] = true
		}
	}
	rooms := c.rooms
	// Admitted members being placed keep the nodes the plan put them on:
	// a reservation there would hold them off the free cards they were
	// given (a reservation binds pods of its priority and below,
	// Plan.Binding, and lets them take only what exceeds it).
	avoid := map[int]bool{}
	for r, prio := range c.placing {
		if prio <= g.Priority {
			avoid[r] = true
		}
	}
	var taken map[int]Held
	var domain string
	if r, _ := c.constraint(g); r != nil {
		var placed *Placed
		var ok bool
		if taken, placed, ok = c.reserveTopology(r, demands, need, kept, avoid); !ok {
			return nil, false
		}
		if placed != nil {
			domain = placed.Words
		}
	} else {
		var placed int
		if taken, placed = reserve(demands, need, rooms, kept, avoid); placed < need {
			return nil, false
		}
	}
	res := &Reservation{Holder: g.Key, Priority: g.Priority, Domain: domain, Nodes: make(map[string]Held, len(taken))}
	for r, held := range taken {
		res.Nodes[rooms[r].Node.Name] = held
		rooms[r].Free = rooms[r].Free.Sub(held.Resources).floor()
		rooms[r].GPUs = withheld(rooms[r].GPUs, held.GPUs)
		c.touchRoom(r)
	}
	c.plan.Reservation = res
	c.changes++
	return res, true
}

// preempt makes room for g, which does not fit the free resources, and
// reports whether it did: first by taking back what other queues
// borrowed (reclaim), then by preempting groups of lower priority of its
// own queue (or, for a group in no queue, of no queue). The group then
// holds the reservation where the victims leave room.
func (c *computation) preempt(g *Group, leaf *queuetree.Node, demands []Demand, need int, msg string) bool {
	units := unitsOf(*g, c.rooms)
	if leaf != nil {
		rc := &reclaimer{tree: c.tree, taker: leaf, demand: c.estimate[g], claims: c.tree.Claims(leaf, c.estimate[g]),
			leafOf: func(key string) *queuetree.Node { return c.tree.Queue(c.in.QueueOf[key]) }, rooms: c.rooms, largestMiB: c.largestMiB,
			demandOf: c.demandOf}
		if victims, at, domain, ok := c.preemption(g, demands, need, rc.units(units), rc.allow); ok {
			c.plan.Reservation = c.reservationAt(*g, demands, at, domain)
			c.changes++
			from := victimQueues(victims, c.tree, c.in.QueueOf)
			if len(victims) > 0 {
				c.plan.Preemptions = append(c.plan.Preemptions, Preemption{Group: g.Key, Priority: g.Priority, Victims: victims,
					Queue: leaf.Object, From: from, queueName: leaf.Name, need: demandGPUMilli(demands, need)})
				c.queue(g, leaf, ReasonReclaiming, fmt.Sprintf("%s; taking back what %s borrowed: %s", msg, strings.Join(from, ", "), describeVictims(victims)))
			} else {
				c.queue(g, leaf, ReasonReclaiming, msg+"; waiting for the pods being taken back to end")
			}
			return true
		}
	}
	same := func(key string) bool { return c.tree.Queue(c.in.QueueOf[key]) == leaf }
	victims, at, domain, ok := c.preemption(g, demands, need, unitsBelow(*g, units, same, c.demandOf), nil)
	if !ok {
		return false
	}
	c.plan.Reservation = c.reservationAt(*g, demands, at, domain)
	c.changes++
	if len(victims) > 0 {
		c.plan.Preemptions = append(c.plan.Preemptions, Preemption{Group: g.Key, Priority: g.Priority, Victims: victims})
		c.queue(g, leaf, ReasonPreempting, fmt.Sprintf("%s; preempting pods of lower priority%s: %s", msg, domainWords(c.plan.Reservation, " in "), describeVictims(victims)))
	} else {
		c.queue(g, leaf, ReasonPreempting, msg+"; waiting for the pods being deleted to end")
	}
	return true
}

// finish records what waits in the queues, their fair shares, and what
// the pass saw free while a group holds a reservation.
func (c *computation) finish() Plan {
	if !c.tree.Empty() {
		// Work counted once: each running unit (a group with members
		// bound, a pod alone), then each admitted or waiting group not
		// running yet.
		counted := map[string]bool{}
		for r := range c.rooms {
			for _, p := range c.rooms[r].Pods {
				key := unitKey(p)
				if counted[key] {
					continue
				}
				counted[key] = true
				if leaf := c.tree.Queue(c.in.QueueOf[key]); leaf != nil {
					c.tree.CountWork(leaf, true)
				}
			}
		}
		for _, g := range c.groups {
			leaf := c.leaf(g)
			if leaf == nil || counted[g.Key] {
				continue
			}
			switch d := c.plan.Decisions[g.Key]; {
			case d.Admitted:
				c.tree.CountWork(leaf, true)
			case d.Reason != ReasonUnplaceable:
				c.tree.Wait(leaf, c.estimate[g])
				c.tree.CountWork(leaf, false)
			}
		}
		c.tree.FairShares()
	}
	if c.plan.Reservation != nil {
		c.plan.Seen = make(map[string]Capacity, len(c.in.Rooms))
		for i := range c.in.Rooms {
			r := &c.in.Rooms[i]
			c.plan.Seen[r.Node.Name] = Capacity{Free: r.Free, GPUMilli: r.GPUs.FreeMilli()}
		}
	}
	return c.plan
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

// demandsOf returns the demands of a group's pending members, read once
// per pass (through Input.DemandOf, which may remember them across
// passes).
func (c *computation) demandsOf(g *Group) []Demand {
	if d, ok := c.demands[g]; ok {
		return d
	}
	out := make([]Demand, len(g.Pending))
	for i, p := range g.Pending {
		out[i] = c.demandOf(p)
	}
	c.demands[g] = out
	return out
}

// demandOf reads one pod's demand through Input.DemandOf.
func (c *computation) demandOf(p *corev1.Pod) Demand {
	if c.in.DemandOf != nil {
		return c.in.DemandOf(p)
	}
	return DemandOf(p)
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

// explainNever says why need demands never fit rooms: how many of them
// fit with every node empty and, when no node could hold the largest,
// what each kind of node lacks for it (a card constraint named with the
// pod's key and value and the node's closest card; CPU, memory or pods;
// the pod's node selection).
func explainNever(demands []Demand, need, placed int, rooms []Room) string {
	largest := demands[0]
	for _, d := range demands {
		if largestFirst(d, largest) < 0 {
			largest = d
		}
	}
	msg := fmt.Sprintf("it never fits: with every node empty, %d of the %d members it needs at once fit", placed, need)
	var why []string
	count := map[string]int{}
	for i := range rooms {
		r := &rooms[i]
		var lack string
		switch {
		case !largest.Allows(r.Node):
			lack = "do not match its node selection, affinity or tolerations"
		case !r.Allocatable.Covers(largest.Request):
			lack = "have too little CPU, memory or room for pods, empty"
		case largest.GPU.Count > 0 && r.GPUs.Cards == nil:
			lack = "have no GPUs"
		case largest.GPU.Count > 0:
			lack = largest.GPU.Shortfall(r.GPUs.Cards.Cards)
		}
		if lack == "" {
			// Some node can hold the largest member: the group is too big
			// for the cluster as a whole.
			return msg
		}
		if count[lack] == 0 {
			why = append(why, lack)
		}
		count[lack]++
	}
	for i, lack := range why {
		why[i] = fmt.Sprintf("%d node(s) %s", count[lack], lack)
	}
	return fmt.Sprintf("%s; no node can hold its largest member (%s): %s", msg, largest, strings.Join(why, ", "))
}
