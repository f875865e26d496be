package metrics

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aisched/aisched/pkg/queuetree"
)

// twoTeams are teams a and b, each guaranteed 4 cards, weight 1, on two
// nodes of 4 cards.
func twoTeams(from, to time.Time) *Teams {
	gpus := func(g int64) map[string]queuetree.Amounts {
		return map[string]queuetree.Amounts{queuetree.GPU: {Guaranteed: g * 1000, Limit: queuetree.Unlimited, Lending: queuetree.Unlimited, Weight: 1}}
	}
	return NewTeams([]queuetree.Spec{{Name: "a", Resources: gpus(4)}, {Name: "b", Resources: gpus(4)}},
		map[string]int64{"n0": 4000, "n1": 4000}, from, to, time.Second)
}

func TestTeams(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tm := twoTeams(at(0), at(30))
	// 0s: a runs a1 (within its 4) and a2 (borrowing), 4 cards each.
	tm.Arrive(at(0), "a1-0", "a1", "a", 4000, 1)
	tm.Arrive(at(0), "a2-0", "a2", "a", 4000, 1)
	tm.Bind(at(0), "a1-0", "n0")
	tm.Bind(at(0), "a2-0", "n1")
	// 10s: b asks for 4 cards, within its guarantee; a2 is taken back for
	// it at 12s and b1 starts (a wait of 2s).
	tm.Arrive(at(10), "b1-0", "b1", "b", 4000, 1)
	tm.Evict(at(12), "a2-0", "b1")
	tm.End(at(12), "a2-0")
	tm.Bind(at(12), "b1-0", "n1")
	tm.End(at(20), "b1-0")
	// 20s: b asks for a gang of 2 x 4 cards that never fits, and a for 2
	// cards that fit n1 but start only at 25s.
	tm.Arrive(at(20), "b2-0", "b2", "b", 4000, 2)
	tm.Arrive(at(20), "b2-1", "b2", "b", 4000, 2)
	tm.Arrive(at(20), "a3-0", "a3", "a", 2000, 1)
	tm.Bind(at(25), "a3-0", "n1")
	tm.Finish(at(30))
	var got Result
	tm.Fill(&got)

	// Cards held: 8 for 0-20s, 4 for 20-25s, 6 for 25-30s: 160 + 20 + 30
	// = 210 card-seconds of 8 x 30 = 240.
	allocation := 210.0 / 240
	// Fair shares (8 cards; guarantees first, as far as asked, then the
	// rest among those who want more):
	//   0-10s: a wants 8, b 0: a 8, b 0; held a 8, b 0: no deviation.
	//   10-12s: a wants 8, b 4: a 4, b 4; held 8 and 0: 4 each.
	//   12-20s: a 4, b 4 held and fair.
	//   20-25s: a wants 4+2, b 8: guarantees take all: 4, 4; held a 4, b 0.
	//   25-30s: the same fair shares; held a 6, b 0.
	// a: 4x2 + 2x5 = 18 card-seconds; b: 4x2 + 4x10 = 48; the worst mean
	// is b's, 48/30 = 1.6 cards; the largest deviation 4.
	// Within their guarantees: a1 (0s wait) and b1 (2s); the nearest rank
	// p50 of [0, 2] is the 1st, p99 the 2nd.
	// Evicted: a2's 4 cards for b1's 4: 1.
	// Idle while a job that fits waits: a3's 2 cards on n1, 20-25s: 10
	// card-seconds; b2 never fits (one node has 4 free).
	idle := 10.0 / 3600
	evicted := 1.0
	never := 1
	want := Result{
		MeanGPUAllocationRate:     &allocation,
		FairShareDeviationGPUs:    &Deviation{Mean: 1.6, Max: 4},
		GuaranteeWaitSeconds:      &Tail{P50: 0, P99: 2},
		EvictedPerReclaimedGPU:    &evicted,
		IdleGPUHoursWhileFitWaits: &idle,
		JobsNeverStarted:          &never,
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("teams (-want,+got):\n%s", diff)
	}
}

// A job within its guarantee that never starts waits until the end; a
// run with no eviction has no ratio of evictions.
func TestTeamsCensoredWait(t *testing.T) {
	t0 := time.Unix(0, 0)
	tm := twoTeams(t0, t0.Add(time.Minute))
	tm.Arrive(t0, "a1-0", "a1", "a", 4000, 1)
	tm.Arrive(t0.Add(10*time.Second), "b1-0", "b1", "b", 4000, 1)
	tm.Bind(t0.Add(40*time.Second), "b1-0", "n0")
	tm.Finish(t0.Add(time.Minute))
	var got Result
	tm.Fill(&got)
	// a1 waited the whole minute (censored), b1 30s: p50 of [30, 60] is 30.
	if want := (&Tail{P50: 30, P99: 60}); !cmp.Equal(want, got.GuaranteeWaitSeconds) {
		t.Errorf("guarantee waits %+v, want %+v", got.GuaranteeWaitSeconds, want)
	}
	if got.EvictedPerReclaimedGPU != nil {
		t.Errorf("evicted per reclaimed %v, want none: nothing was taken back", *got.EvictedPerReclaimedGPU)
	}
	if *got.JobsNeverStarted != 1 {
		t.Errorf("jobs never started %d, want 1 (a1)", *got.JobsNeverStarted)
	}
	// a1 fits a free node the whole minute (4 x 60), b1 the other node
	// from 10s until it starts at 40s (4 x 30): 360 card-seconds.
	if want := 360.0 / 3600; !cmp.Equal(want, *got.IdleGPUHoursWhileFitWaits, cmpopts.EquateApprox(0, 1e-9)) {
		t.Errorf("idle card-hours while a fitting job waits %v, want %v", *got.IdleGPUHoursWhileFitWaits, want)
	}
}

// States shorter than a second (a pass of the job queue) count for the
// mean deviation but not for the largest one or the idle cards.
func TestTeamsMomentary(t *testing.T) {
	t0 := time.Unix(0, 0)
	tm := twoTeams(t0, t0.Add(10*time.Second))
	tm.Arrive(t0, "a1-0", "a1", "a", 4000, 1)
	tm.Bind(t0.Add(500*time.Millisecond), "a1-0", "n0")
	tm.Finish(t0.Add(10 * time.Second))
	var got Result
	tm.Fill(&got)
	// a's fair share is 4 from the start; it held 0 for 0.5s: 4 x 0.5 /
	// 10 = 0.2 cards on average.
	if want := (&Deviation{Mean: 0.2, Max: 0}); !cmp.Equal(want, got.FairShareDeviationGPUs, cmpopts.EquateApprox(0, 1e-9)) {
		t.Errorf("deviation %+v, want %+v", got.FairShareDeviationGPUs, want)
	}
	if *got.IdleGPUHoursWhileFitWaits != 0 {
		t.Errorf("idle card-hours %v, want 0: a1 waited half a second", *got.IdleGPUHoursWhileFitWaits)
	}
}
