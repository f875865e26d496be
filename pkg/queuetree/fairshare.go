package queuetree

import (
	"math"
	"time"
)

// FairShares computes every queue's fair share of each resource: what it
// would hold if the work running and waiting now were shared out. From
// the top, the capacity of a level (the cluster's, then each queue's fair
// share) goes first to each child's guarantee, as far as the child's work
// asks for it (its use and its waiting demand, within its limit), then
// the rest by weight among the children that ask for more (water
// filling), each capped at what it asks for.
func (t *Tree) FairShares() {
	var roots []*Node
	for _, r := range t.roots {
		if r.invalid == "" {
			roots = append(roots, r)
		}
	}
	for i := range t.names {
		t.share(roots, i, t.capacity[i])
	}
}

// share divides amount of resource i among nodes, and recurses.
func (t *Tree) share(nodes []*Node, i int, amount int64) {
	if len(nodes) == 0 {
		return
	}
	want := make([]int64, len(nodes))
	got := make([]int64, len(nodes))
	var guaranteed int64
	for k, n := range nodes {
		w := n.used[i] + n.waiting[i]
		if n.listed[i] && n.limit[i] != Unlimited {
			w = min(w, n.limit[i])
		}
		want[k] = w
		if n.listed[i] {
			got[k] = min(n.guaranteed[i], w)
			guaranteed += got[k]
		}
	}
	if guaranteed > amount && guaranteed > 0 {
		// Guarantees oversubscribe the level: each gets its part.
		for k := range got {
			got[k] = int64(float64(got[k]) * float64(amount) / float64(guaranteed))
		}
		guaranteed = amount
	}
	rest := amount - guaranteed
	for rest > 0 {
		var weights int64
		for k, n := range nodes {
			if got[k] < want[k] {
				weights += n.weight[i]
			}
		}
		if weights == 0 {
			break
		}
		given := int64(0)
		for k, n := range nodes {
			if got[k] >= want[k] {
				continue
			}
			part := max(rest*n.weight[i]/weights, 1)
			part = min(part, want[k]-got[k], rest-given)
			got[k] += part
			given += part
			if given == rest {
				break
			}
		}
		if given == 0 {
			break
		}
		rest -= given
	}
	for k, n := range nodes {
		n.fair[i] = got[k]
		t.share(n.children, i, got[k])
	}
}

// Decay brings each queue's usage history from its last record up to
// now: history' = history*f + used*(1-f), f = 2^(-elapsed/halfLife).
func (t *Tree) Decay(elapsed time.Duration) {
	if elapsed <= 0 {
		return
	}
	for _, n := range t.nodes {
		if n.HalfLife <= 0 {
			continue
		}
		f := math.Exp2(-elapsed.Seconds() / n.HalfLife.Seconds())
		for i := range n.history {
			n.history[i] = int64(float64(n.history[i])*f + float64(n.used[i])*(1-f))
		}
	}
}
