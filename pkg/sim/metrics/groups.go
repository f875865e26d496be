package metrics

import (
	"slices"
	"time"
)

// GroupTracker follows pod groups (gangs) through a run, from the events
// the runner observes, to count the groups that were ever partially bound
// and to measure how long each waited for its gang.
//
// Events come in instants, which the runner closes with Settle once what
// it observes has been quiet for a while: bindings reach it one at a time,
// milliseconds apart even for a gang that Permit lets go at once, so every
// event cannot be an instant of its own. A group is partially bound when,
// at a Settle, some but fewer than min-available of its members are bound;
// a state that exists only between two Settles is not counted. Events keep
// their own timestamps, from which the waits are measured. The runner must
// call Settle after its last events, or the last instant is not counted.
//
// A member unbound (deleted or evicted) after its group reached
// min-available makes the group partial again while others stay bound:
// that is the state gang scheduling exists to prevent (members holding
// resources while the rest cannot run), whatever caused it. A group torn
// down as a whole, all members in one instant, is not partial; one whose
// members are deleted over several instants is, in between.
//
// The zero value is not ready for use; use NewGroupTracker. A GroupTracker
// is not safe for concurrent use.
type GroupTracker struct {
	groups map[string]*groupState
	// dirty are the groups whose bound count changed in the open instant,
	// the only ones whose partial state Settle must look at.
	dirty []*groupState
	// instant is the earliest event of the open instant while dirty is not
	// empty.
	instant time.Time
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
	partial bool
	// dirty is true while the group is in GroupTracker.dirty.
	dirty bool
}

// NewGroupTracker returns a tracker that knows no group.
func NewGroupTracker() *GroupTracker {
	return &GroupTracker{groups: map[string]*groupState{}}
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
	g := t.event(group, at)
	if g == nil {
		return
	}
	g.bound++
	if !g.reached && g.bound >= g.minAvailable {
		g.reached = true
		t.waits = append(t.waits, at.Sub(g.start).Seconds())
	}
}

// Unbound records that a bound member of group was deleted or evicted at
// at. It is ignored when no member of the group is bound, and for a group
// never passed to Created.
func (t *GroupTracker) Unbound(group string, at time.Time) {
	if g := t.event(group, at); g != nil && g.bound > 0 {
		g.bound--
	}
}

// event opens the instant at when none is open, and returns group's state
// marked dirty; nil for a group never passed to Created.
func (t *GroupTracker) event(group string, at time.Time) *groupState {
	g, ok := t.groups[group]
	if !ok {
		return nil
	}
	if len(t.dirty) == 0 || at.Before(t.instant) {
		t.instant = at
	}
	if !g.dirty {
		g.dirty = true
		t.dirty = append(t.dirty, g)
	}
	return g
}

// Settle ends the open instant at: the runner has applied every event up
// to at. It does nothing when the open instant began after at or when no
// event is open.
func (t *GroupTracker) Settle(at time.Time) {
	if len(t.dirty) > 0 && !at.Before(t.instant) {
		t.settle()
	}
}

// settle marks the dirty groups that are partially bound and closes the
// open instant.
func (t *GroupTracker) settle() {
	for _, g := range t.dirty {
		if g.bound > 0 && g.bound < g.minAvailable {
			g.partial = true
		}
		g.dirty = false
	}
	t.dirty = t.dirty[:0]
}

// Partial is the number of groups that were partially bound at the end of
// some settled instant.
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
