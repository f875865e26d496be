package metrics

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestGroupTracker(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	// Each event is one call on the tracker, s seconds after t0.
	created := func(group string, minAvailable, s int) func(*GroupTracker) {
		return func(tr *GroupTracker) { tr.Created(group, minAvailable, at(s)) }
	}
	bound := func(group string, s int) func(*GroupTracker) {
		return func(tr *GroupTracker) { tr.Bound(group, at(s)) }
	}
	unbound := func(group string, s int) func(*GroupTracker) {
		return func(tr *GroupTracker) { tr.Unbound(group, at(s)) }
	}
	settle := func(s int) func(*GroupTracker) {
		return func(tr *GroupTracker) { tr.Settle(at(s)) }
	}
	tests := []struct {
		name        string
		events      []func(*GroupTracker)
		wantPartial int
		wantWaits   []float64
	}{
		{name: "no groups"},
		// 2 and 3 bound are mid-instant only; at the end of t=2 all 3 are.
		// Wait: bound at 2 - created at 0 = 2 s.
		{name: "gang bound in one instant", events: []func(*GroupTracker){
			created("g", 3, 0), created("g", 3, 0), created("g", 3, 0),
			bound("g", 2), bound("g", 2), bound("g", 2), settle(2),
		}, wantPartial: 0, wantWaits: []float64{2}},
		// 1 of 3 bound at the end of t=0: partial. Wait: 5 - 0 = 5 s.
		{name: "one member then the rest 5 s later", events: []func(*GroupTracker){
			created("g", 3, 0), created("g", 3, 0), created("g", 3, 0),
			bound("g", 0), settle(0),
			bound("g", 5), bound("g", 5), settle(5),
		}, wantPartial: 1, wantWaits: []float64{5}},
		// 2 of 3 bound for good: partial, and no wait.
		{name: "never completes", events: []func(*GroupTracker){
			created("g", 3, 0), bound("g", 1), bound("g", 1), settle(1),
		}, wantPartial: 1, wantWaits: nil},
		// Complete at t=1 (wait 1 - 0 = 1 s); one member evicted at t=10
		// leaves 1 of 2 bound: partial.
		{name: "unbound after complete", events: []func(*GroupTracker){
			created("g", 2, 0), bound("g", 1), bound("g", 1), settle(1),
			unbound("g", 10), settle(10),
		}, wantPartial: 1, wantWaits: []float64{1}},
		// Both members deleted at t=10: 0 bound, not partial.
		{name: "torn down in one instant", events: []func(*GroupTracker){
			created("g", 2, 0), bound("g", 1), bound("g", 1), settle(1),
			unbound("g", 10), unbound("g", 10), settle(10),
		}, wantPartial: 0, wantWaits: []float64{1}},
		// Only Settle ends an instant: the binds at t=1 and t=3 fall in one,
		// which ends with 2 of 2 bound. Wait 3 - 0 = 3 s.
		{name: "binds between two settles are one instant", events: []func(*GroupTracker){
			created("g", 2, 0), bound("g", 1), bound("g", 3), settle(3),
		}, wantPartial: 0, wantWaits: []float64{3}},
		// Settled in between, the same binds leave the group partial.
		{name: "settle between binds", events: []func(*GroupTracker){
			created("g", 2, 0), bound("g", 1), settle(2), bound("g", 3), settle(3),
		}, wantPartial: 1, wantWaits: []float64{3}},
		// Settle(1) does not end instant 2; its second bind comes after.
		{name: "settle before the open instant", events: []func(*GroupTracker){
			created("g", 2, 0), bound("g", 2), settle(1), bound("g", 2), settle(2),
		}, wantPartial: 0, wantWaits: []float64{2}},
		// A bind stamped 1 after one stamped 2 joins instant 2, which
		// ends with 2 of 2 bound. Wait: the completing bind's time, 1 s.
		{name: "late event joins the open instant", events: []func(*GroupTracker){
			created("g", 2, 0), bound("g", 2), bound("g", 1), settle(2),
		}, wantPartial: 0, wantWaits: []float64{1}},
		// The last instant is never settled: documented, not counted.
		{name: "last instant not settled", events: []func(*GroupTracker){
			created("g", 2, 0), bound("g", 1),
		}, wantPartial: 0, wantWaits: nil},
		// Events of a group never created are ignored.
		{name: "unknown group", events: []func(*GroupTracker){
			bound("ghost", 1), settle(1),
		}, wantPartial: 0, wantWaits: nil},
		// An Unbound with nothing bound does not go below 0: the two
		// binds at t=1 complete the gang of 2. Wait 1 - 0 = 1 s.
		{name: "unbound with nothing bound", events: []func(*GroupTracker){
			created("g", 2, 0), unbound("g", 1), bound("g", 1), bound("g", 1), settle(1),
		}, wantPartial: 0, wantWaits: []float64{1}},
		// min-available 0 counts as 1: complete with the first bind at t=4,
		// wait 4 s; never partial.
		{name: "min-available zero", events: []func(*GroupTracker){
			created("g", 0, 0), bound("g", 4), settle(4),
		}, wantPartial: 0, wantWaits: []float64{4}},
		// Later Created calls keep the first start and min-available:
		// wait 6 - 0 = 6 s, and 2 bound of min 2 (not 5) completes it.
		{name: "first Created wins", events: []func(*GroupTracker){
			created("g", 2, 0), created("g", 5, 3), bound("g", 6), bound("g", 6), settle(6),
		}, wantPartial: 0, wantWaits: []float64{6}},
		// Rebinding after an eviction does not add a second wait.
		{name: "one wait per group", events: []func(*GroupTracker){
			created("g", 1, 0), bound("g", 1), settle(1),
			unbound("g", 2), settle(2), bound("g", 3), settle(3),
		}, wantPartial: 0, wantWaits: []float64{1}},
		// b completes first (t=2, wait 2 - 1 = 1 s), a later (t=4, wait
		// 4 - 0 = 4 s); a is partial at t=2 (1 of 2), b never.
		{name: "two groups in completion order", events: []func(*GroupTracker){
			created("a", 2, 0), created("b", 2, 1),
			bound("a", 2), bound("b", 2), bound("b", 2), settle(2),
			bound("a", 4), settle(4),
		}, wantPartial: 1, wantWaits: []float64{1, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewGroupTracker()
			for _, e := range tc.events {
				e(tr)
			}
			if diff := cmp.Diff(tc.wantPartial, tr.Partial()); diff != "" {
				t.Errorf("Partial (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWaits, tr.Waits()); diff != "" {
				t.Errorf("Waits (-want,+got):\n%s", diff)
			}
		})
	}
}
