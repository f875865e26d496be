package jobqueue

import (
	"fmt"
	"time"
)

// stuckPartial returns the groups that have held devices for fewer than
// min-available members bound (bound members, or DRA claims allocated to
// pending members), with others pending and without admission, for
// longer than Options.PartialGroup: their bound members are deleted and
// the claims of their pending members deallocated, so that no card or
// device stays held by a group that cannot run, and the group starts over
// whole. A group is partial so only when its placement was cut short (a
// scheduler restart between its claims' allocation and its bindings) and
// the queue cannot admit the rest; it completes as soon as the queue can.
// q.mu is held.
func (q *Queue) stuckPartial(plan Plan, groups map[string]*Group, now time.Time) []Preemption {
	var stuck []Preemption
	for key, g := range groups {
		d := plan.Decisions[key]
		// Members pending too: the group tries to complete. One that lost
		// a member and waits for its controller to make another is left
		// to that controller.
		partial := len(g.Bound)+len(g.HeldClaims) > 0 && len(g.Pending) > 0 && len(g.Bound)+g.Succeeded < g.MinAvailable && !d.Admitted
		if !partial || q.opts.PartialGroup <= 0 {
			delete(q.partialSince, key)
			continue
		}
		since, ok := q.partialSince[key]
		if !ok {
			q.partialSince[key] = now
			q.opts.Clock.AfterFunc(q.opts.PartialGroup, q.Kick)
			continue
		}
		if now.Sub(since) >= q.opts.PartialGroup {
			stuck = append(stuck, Preemption{Group: key, Priority: g.Priority, Victims: g.Bound, Deallocate: g.HeldClaims, partial: true,
				why: fmt.Sprintf("%s %s", d.Reason, d.Message)})
			delete(q.partialSince, key)
		}
	}
	for key := range q.partialSince {
		if groups[key] == nil {
			delete(q.partialSince, key)
		}
	}
	return stuck
}
