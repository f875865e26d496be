package metrics

import (
	"slices"
	"time"
)

// GroupTracker follows pod groups (gangs) through a run, from the events
// the runner observes, to count the groups that were partially bound and to
// measure how long each waited for its gang.
//
// A group is partially bound while some but fewer than min-available of
// its members are bound. It counts as partial when that lasts at least
// minPartial: bindings reach the runner one at a time, milliseconds apart
// even for a gang that Permit lets go at once, so a state that short is the
// runner's view and not the cluster's; a group stuck half bound stays so.
// Settle(at) tells the tracker that nothing happened up to at, so that a
// group still partial at the end of a run counts; call it before Partial.
//
// A member unbound (deleted or evicted) after its group reached
// min-available makes the group partial again while others stay bound:
// that is the state gang scheduling exists to prevent (members holding
// resources while the rest cannot run), whatever caused it. A group torn
// down as a whole within minPartial is not partial.
//
// Events must come in time order. The zero value is not ready for use; use
// NewGroupTracker. A GroupTracker is not safe for concurrent use.
type GroupTracker struct {
	minPartial time.Duration
	groups     map[string]*groupState
	// waits are the groups' waits in seconds, in the order they reached
	// min-available.
	waits []float64
}

// groupState is what GroupTracker knows of one group.
type groupState struct {
	start        time.Time
	minAvailable int
	bound        int
	// reached is true once bound reached minAvailable; the wait ends then.
	reached bool
	// partialSince is when the group became partially bound; zero while
	// it is not.
	partialSince time.Time
	partial      bool
}

// NewGroupTracker returns a tracker that knows no group and counts a group
// as partial when it stays partially bound for minPartial or longer.
func NewGroupTracker(minPartial time.Duration) *GroupTracker {
	return &GroupTracker{minPartial: minPartial, groups: map[string]*groupState{}}
}

// Created records that a member of group was created at at. The first call
// for a group sets its start, from which its wait is measured, and its
// min-available; later calls change neither, since every member carries the
// group's min-available. A min-available below 1 counts as 1: such a group
// is complete with its first bound member and cannot be partial.
func (t *GroupTracker) Created(group string, minAvailable int, at time.Time) {
	if _, ok := t.groups[group]; ok {
		return
	}
	t.groups[group] = &groupState{start: at, minAvailable: max(minAvailable, 1)}
}

// Bound records that a member of group was bound at at. The bind that
// brings the group to min-available for the first time ends its wait.
// Events of a group never passed to Created are ignored: without its
// min-available there is no gang to judge.
func (t *GroupTracker) Bound(group string, at time.Time) {
	g, ok := t.groups[group]
	if !ok {
		return
	}
	t.check(g, at)
	g.bound++
	if !g.reached && g.bound >= g.minAvailable {
		g.reached = true
		t.waits = append(t.waits, at.Sub(g.start).Seconds())
	}
	g.update(at)
}

// Unbound records that a bound member of group was deleted or evicted at
// at. It is ignored when no member of the group is bound, and for a group
// never passed to Created.
func (t *GroupTracker) Unbound(group string, at time.Time) {
	g, ok := t.groups[group]
	if !ok || g.bound == 0 {
		return
	}
	t.check(g, at)
	g.bound--
	g.update(at)
}

// Settle records that nothing happened to any group up to at.
func (t *GroupTracker) Settle(at time.Time) {
	for _, g := range t.groups {
		t.check(g, at)
	}
}

// check marks g partial when it has been partially bound from
// partialSince to at for minPartial or longer.
func (t *GroupTracker) check(g *groupState, at time.Time) {
	if !g.partialSince.IsZero() && at.Sub(g.partialSince) >= t.minPartial {
		g.partial = true
	}
}

// update starts or ends g's partially bound span after a change at at.
func (g *groupState) update(at time.Time) {
	switch partial := g.bound > 0 && g.bound < g.minAvailable; {
	case !partial:
		g.partialSince = time.Time{}
	case g.partialSince.IsZero():
		g.partialSince = at
	}
}

// Partial is the number of groups that were partially bound for
// minPartial or longer.
func (t *GroupTracker) Partial() int {
	var n int
	for _, g := range t.groups {
		if g.partial {
			n++
		}
	}
	return n
}

// Waits returns, in seconds, the time from the creation of a group's first
// member to the bind of its min-available-th member, for each group that
// reached min-available, in the order they reached it; nil when none did.
// A group that never reached it has no wait: it is partial, or had no
// member bound at all.
func (t *GroupTracker) Waits() []float64 {
	return slices.Clone(t.waits)
}
