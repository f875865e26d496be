package jobqueue

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/queuetree"
)

// The team queues' side of a plan: what work uses of each resource a
// queue accounts, the order in which the queues' work is taken, and which
// running work may be taken back for whom. The queues themselves are the
// pure model of package queuetree.

// capacityOf is the cluster's capacity of every resource a queue may
// account: the schedulable nodes' allocatable CPU and memory, and their
// healthy cards, in thousandths, in all and by model.
func capacityOf(rooms []Room) map[string]int64 {
	c := map[string]int64{}
	for i := range rooms {
		r := &rooms[i]
		if r.Node.Spec.Unschedulable {
			continue
		}
		c["cpu"] += r.Allocatable.MilliCPU
		c["memory"] += r.Allocatable.Memory
		if r.GPUs.Cards == nil {
			continue
		}
		for _, card := range r.GPUs.Cards.Cards {
			if !card.Healthy {
				continue
			}
			c[queuetree.GPU] += gpu.WholeCardMilli
			c[queuetree.SharedGPU] += gpu.WholeCardMilli
			c[queuetree.ModelPrefix+card.Model] += gpu.WholeCardMilli
		}
	}
	return c
}

// usageOf is what one pod with request req uses of each resource the tree
// accounts, on cards of room (nil while it is not placed). A share counts
// as its fraction of each of its cards: its thousandths, or its memory
// over the card's (the largest card's while it is not placed; a share in
// percent is that percent). A card's model is known once placed.
func usageOf(t *queuetree.Tree, req Resources, r gpu.Request, room *Room, cards []int, largestMiB int64) queuetree.Vec {
	v := make(queuetree.Vec, len(t.Names()))
	milli := r.TotalMilli()
	var model string
	cardMiB := largestMiB
	if room != nil && room.GPUs.Cards != nil && len(cards) > 0 {
		if c, ok := cardAt(room.GPUs.Cards, cards[0]); ok {
			model, cardMiB = c.Model, c.MemoryMiB
		}
	}
	switch {
	case !r.Shared() || milli > 0:
	case r.GPUMemPercent > 0:
		milli = r.Count * r.GPUMemPercent * gpu.WholeCardMilli / 100
	case cardMiB > 0:
		milli = r.Count * min(r.GPUMemMiB*gpu.WholeCardMilli/cardMiB, gpu.WholeCardMilli)
	}
	for i, name := range t.Names() {
		switch {
		case name == "cpu":
			v[i] = req.MilliCPU
		case name == "memory":
			v[i] = req.Memory
		case name == queuetree.GPU:
			v[i] = milli
		case name == queuetree.SharedGPU && r.Shared():
			v[i] = milli
		case model != "" && name == queuetree.ModelPrefix+model:
			v[i] = milli
		}
	}
	return v
}

// cardAt returns the card with index i of a node's cards.
func cardAt(set *gpu.Set, i int) (gpu.Card, bool) {
	for _, c := range set.Cards {
		if c.Index == i {
			return c, true
		}
	}
	return gpu.Card{}, false
}

// boundUsage is what a bound pod on room uses, with the cards the GPU
// ledger knows it holds.
func boundUsage(t *queuetree.Tree, d Demand, room *Room, largestMiB int64) queuetree.Vec {
	return usageOf(t, d.Request, d.GPU, room, d.held, largestMiB)
}

// demandUsage is what the demands use where at placed them; a demand not
// placed (at -1) counts without a model.
func demandUsage(t *queuetree.Tree, demands []Demand, at placement, rooms []Room, largestMiB int64) queuetree.Vec {
	v := make(queuetree.Vec, len(t.Names()))
	for i := range demands {
		var room *Room
		var cards []int
		if i < len(at.at) && at.at[i] >= 0 {
			room, cards = &rooms[at.at[i]], at.cards[i]
		}
		v.Add(usageOf(t, demands[i].Request, demands[i].GPU, room, cards, largestMiB))
	}
	return v
}

// largestCardMiB is the memory of the cluster's largest card.
func largestCardMiB(rooms []Room) int64 {
	var largest int64
	for i := range rooms {
		if set := rooms[i].GPUs.Cards; set != nil {
			for _, c := range set.Cards {
				largest = max(largest, c.MemoryMiB)
			}
		}
	}
	return largest
}

// reclaimer decides which running work a group of a queue may take back:
// work of other queues that borrow, never within their guarantees. A
// group that stays within its queues' guarantees (Claims) takes back any
// such work; a borrowing group only work whose queue, with the work gone,
// would still have a higher share than the group's queue with the group
// admitted, so that the victim is not admitted back ahead of the group
// (no preemption loop). The nearest queues in the tree are taken from
// first (siblings before cousins), then the lowest priority, then the
// queue furthest over its share.
type reclaimer struct {
	tree       *queuetree.Tree
	taker      *queuetree.Node
	demand     queuetree.Vec
	claims     bool
	leafOf     func(key string) *queuetree.Node
	rooms      []Room
	largestMiB int64
	demandOf   func(*corev1.Pod) Demand
}

// eligible reports whether unit u may be taken back, and its queue.
func (rc *reclaimer) eligible(u *unit) (*queuetree.Node, bool) {
	leaf := rc.leafOf(u.key)
	if leaf == nil || leaf == rc.taker {
		return nil, false
	}
	v := rc.usage(u)
	if !rc.tree.Reclaimable(leaf, v, rc.taker) {
		return nil, false
	}
	if rc.claims {
		return leaf, true
	}
	neg := slices.Clone(v)
	for i := range neg {
		neg[i] = -neg[i]
	}
	return leaf, rc.tree.Before(rc.taker, rc.demand, leaf, neg) < 0
}

// allow reports whether the units chosen may be taken back together:
// each stays eligible with the others' use gone from their queues, so
// that together they leave every queue at or above its guarantee and,
// for a borrowing taker, above the taker's share. (Units are chosen one by
// one, each eligible alone, and those not needed given back: a gang needs
// whole nodes, which single pods chosen in order free only once many are
// chosen.)
func (rc *reclaimer) allow(chosen []*unit) bool {
	for k, u := range chosen {
		if u.ending {
			continue
		}
		if !rc.eligibleBeside(slices.Delete(slices.Clone(chosen), k, k+1), u) {
			return false
		}
	}
	return true
}

// eligibleBeside reports whether u is eligible with the use of others
// gone from their queues.
func (rc *reclaimer) eligibleBeside(others []*unit, u *unit) bool {
	type charge struct {
		leaf *queuetree.Node
		v    queuetree.Vec
	}
	var gone []charge
	for _, o := range others {
		if leaf := rc.leafOf(o.key); leaf != nil && !o.ending {
			v := rc.usage(o)
			rc.tree.Uncharge(leaf, v)
			gone = append(gone, charge{leaf, v})
		}
	}
	_, ok := rc.eligible(u)
	for _, c := range gone {
		rc.tree.Charge(c.leaf, c.v)
	}
	return ok
}

func (rc *reclaimer) usage(u *unit) queuetree.Vec {
	v := make(queuetree.Vec, len(rc.tree.Names()))
	for _, pa := range u.pods {
		v.Add(boundUsage(rc.tree, rc.demandOf(pa.pod), &rc.rooms[pa.room], rc.largestMiB))
	}
	return v
}

// order sorts eligible units: nearest queue, lowest priority, queue
// furthest over its share, fewest pods, newest.
func (rc *reclaimer) order(units []*unit, leaves map[*unit]*queuetree.Node) {
	// Units being deleted (no queue here) come first: preemption counts
	// them at no cost anyway.
	distance := func(l *queuetree.Node) int {
		if l == nil {
			return -1
		}
		return queuetree.Distance(rc.taker, l)
	}
	share := func(l *queuetree.Node) float64 {
		if l == nil {
			return 0
		}
		return rc.tree.Share(l, nil)
	}
	slices.SortStableFunc(units, func(a, b *unit) int {
		la, lb := leaves[a], leaves[b]
		return cmp.Or(cmp.Compare(distance(la), distance(lb)),
			cmp.Compare(a.priority, b.priority),
			cmp.Compare(share(lb), share(la)),
			cmp.Compare(len(a.pods), len(b.pods)), newestFirst(a, b), strings.Compare(a.key, b.key))
	})
}

// queueWords names a group's queue in messages: "queue team-a: ".
func queueWords(leaf *queuetree.Node) string {
	if leaf == nil {
		return ""
	}
	return leaf.Object + ": "
}

// overLimit says which limit work of leaf using d passes, "" when none.
func overLimit(t *queuetree.Tree, leaf *queuetree.Node, d queuetree.Vec) string {
	q, i := t.OverLimit(leaf, d)
	if q == nil {
		return ""
	}
	name := t.Names()[i]
	used := q.Used()[i]
	return fmt.Sprintf("%s limits %s to %s; it uses %s and the group needs %s", q.Object, name,
		queuetree.Format(name, limitOf(q, i)), queuetree.Format(name, used), queuetree.Format(name, d[i]))
}

func limitOf(q *queuetree.Node, i int) int64 {
	return q.Limits()[i]
}

// units keeps the units the reclaimer may take back, in the order they are
// chosen, with the units already being deleted.
func (rc *reclaimer) units(units []*unit) []*unit {
	leaves := map[*unit]*queuetree.Node{}
	var out []*unit
	for _, u := range units {
		if u.ending {
			out = append(out, u)
			continue
		}
		if unknownCards(u, rc.demandOf) {
			continue
		}
		if leaf, ok := rc.eligible(u); ok {
			leaves[u] = leaf
			out = append(out, u)
		}
	}
	rc.order(out, leaves)
	return out
}

// victimQueues names the queues of victims, by name.
func victimQueues(victims []*corev1.Pod, t *queuetree.Tree, queueOf map[string]string) []string {
	var out []string
	for _, p := range victims {
		if q := t.Queue(queueOf[unitKey(p)]); q != nil && !slices.Contains(out, q.Object) {
			out = append(out, q.Object)
		}
	}
	slices.Sort(out)
	return out
}

// demandGPUMilli is what the need largest demands ask of cards, in
// thousandths.
func demandGPUMilli(demands []Demand, need int) int64 {
	order := slices.Clone(demands)
	slices.SortStableFunc(order, largestFirst)
	var sum int64
	for _, d := range order[:min(need, len(order))] {
		sum += d.GPU.TotalMilli()
	}
	return sum
}
