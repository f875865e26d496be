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
		// The tracker counts a group partial after 2 s partially bound.
		// Three binds at t=2: never partial. Wait 2 - 0 = 2 s.
		{name: "gang bound at once", events: []func(*GroupTracker){
			created("g", 3, 0), created("g", 3, 0), created("g", 3, 0),
			bound("g", 2), bound("g", 2), bound("g", 2), settle(10),
		}, wantPartial: 0, wantWaits: []float64{2}},
		// 1 of 3 bound from t=0 to t=5: partial. Wait 5 - 0 = 5 s.
		{name: "one member then the rest 5 s later", events: []func(*GroupTracker){
			created("g", 3, 0), bound("g", 0), bound("g", 5), bound("g", 5),
		}, wantPartial: 1, wantWaits: []float64{5}},
		// 2 of 3 bound from t=1 to the end at t=3: partial, no wait.
		{name: "never completes", events: []func(*GroupTracker){
			created("g", 3, 0), bound("g", 1), bound("g", 1), settle(3),
		}, wantPartial: 1, wantWaits: nil},
		// The run ends at t=2, 1 s after: not long enough to count.
		{name: "run ends within minPartial", events: []func(*GroupTracker){
			created("g", 3, 0), bound("g", 1), settle(2),
		}, wantPartial: 0, wantWaits: nil},
		// Without Settle the span still open at the end is not counted.
		{name: "not settled", events: []func(*GroupTracker){
			created("g", 2, 0), bound("g", 1),
		}, wantPartial: 0, wantWaits: nil},
		// Binds 1 s apart: partially bound for 1 s only. Wait 2 s.
		{name: "binds 1 s apart", events: []func(*GroupTracker){
			created("g", 2, 0), bound("g", 1), bound("g", 2), settle(10),
		}, wantPartial: 0, wantWaits: []float64{2}},
		// Binds 2 s apart: partially bound for 2 s. Wait 3 s.
		{name: "binds 2 s apart", events: []func(*GroupTracker){
			created("g", 2, 0), bound("g", 1), bound("g", 3), settle(10),
		}, wantPartial: 1, wantWaits: []float64{3}},
		// Complete at t=1 (wait 1 s); one member evicted at t=10 leaves 1
		// of 2 bound until the end at t=12: partial.
		{name: "unbound after complete", events: []func(*GroupTracker){
			created("g", 2, 0), bound("g", 1), bound("g", 1),
			unbound("g", 10), settle(12),
		}, wantPartial: 1, wantWaits: []float64{1}},
		// Both members deleted 1 s apart: partially bound for 1 s only.
		{name: "torn down within minPartial", events: []func(*GroupTracker){
			created("g", 2, 0), bound("g", 1), bound("g", 1),
			unbound("g", 10), unbound("g", 11), settle(20),
		}, wantPartial: 0, wantWaits: []float64{1}},
		// Events of a group never created are ignored.
		{name: "unknown group", events: []func(*GroupTracker){
			bound("ghost", 1), settle(10),
		}, wantPartial: 0, wantWaits: nil},
		// An Unbound with nothing bound does not go below 0: the two
		// binds at t=1 complete the gang of 2. Wait 1 - 0 = 1 s.
		{name: "unbound with nothing bound", events: []func(*GroupTracker){
			created("g", 2, 0), unbound("g", 1), bound("g", 1), bound("g", 1), settle(10),
		}, wantPartial: 0, wantWaits: []float64{1}},
		// min-available 0 counts as 1: complete with the first bind at t=4,
		// wait 4 s; never partial.
		{name: "min-available zero", events: []func(*GroupTracker){
			created("g", 0, 0), bound("g", 4), settle(10),
		}, wantPartial: 0, wantWaits: []float64{4}},
		// Later Created calls keep the first start and min-available:
		// wait 6 - 0 = 6 s, and 2 bound of min 2 (not 5) completes it.
		{name: "first Created wins", events: []func(*GroupTracker){
			created("g", 2, 0), created("g", 5, 3), bound("g", 6), bound("g", 6), settle(10),
		}, wantPartial: 0, wantWaits: []float64{6}},
		// Rebinding after an eviction does not add a second wait.
		{name: "one wait per group", events: []func(*GroupTracker){
			created("g", 1, 0), bound("g", 1), unbound("g", 2), bound("g", 3), settle(10),
		}, wantPartial: 0, wantWaits: []float64{1}},
		// b completes first (t=2, wait 2 - 1 = 1 s), a later (t=4, wait
		// 4 - 0 = 4 s); a is 1 of 2 from t=2 to t=4: partial; b never.
		{name: "two groups in completion order", events: []func(*GroupTracker){
			created("a", 2, 0), created("b", 2, 1),
			bound("a", 2), bound("b", 2), bound("b", 2), bound("a", 4), settle(10),
		}, wantPartial: 1, wantWaits: []float64{1, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewGroupTracker(2 * time.Second)
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
