package jobqueue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestReadmeExample is the worked example of README.md: three nodes of
// four cards with 1, 3 and 4 free, and four groups. train (two whole
// nodes) fits no free node pair and reserves the two freest nodes, n3 and
// n2; eval's two single cards find one free card outside them (n1); probe
// asks for no card and backfills; sweep's four cards exceed its
// namespace's quota of two.
func TestReadmeExample(t *testing.T) {
	rooms := []Room{room("n1", 8, 4, 8, 1), room("n2", 8, 4, 8, 3), room("n3", 8, 4, 8, 4)}
	sweep := group("sweep", 4, 1, 1, 30, 0)
	sweep.Key, sweep.Namespace = "lab/sweep", "lab"
	in := Input{
		Groups: []Group{group("train", 2, 1, 4, 0, 0), group("eval", 2, 1, 1, 10, 0), group("probe", 2, 1, 0, 20, 0), sweep},
		Rooms:  rooms,
		Quotas: map[string][]Quota{"lab": {{Name: "gpus",
			Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("2")},
			Used: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("0")}}}},
		Backfill: true,
	}
	plan := Compute(in)
	got := map[string]Decision{}
	for k, d := range plan.Decisions {
		got[k] = d
	}
	want := map[string]Decision{
		"ns/train":  {Position: 1, Reason: ReasonWaitingForCapacity},
		"ns/eval":   {Position: 2, Reason: ReasonWaitingForCapacity},
		"ns/probe":  {Reason: ReasonAdmitted},
		"lab/sweep": {Position: 3, Reason: ReasonQuotaExceeded},
	}
	for k, d := range got {
		t.Logf("%s: %s position %d: %s", k, d.Reason, d.Position, d.Message)
		d.Message = ""
		d.Admitted = false
		got[k] = d
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decisions (-want,+got):\n%s", diff)
	}
	if plan.Reservation == nil || len(plan.Reservation.Nodes) != 2 {
		t.Fatalf("reservation %+v, want train's on two nodes", plan.Reservation)
	}
	for _, n := range []string{"n2", "n3"} {
		if _, ok := plan.Reservation.Nodes[n]; !ok {
			t.Errorf("train's reservation leaves out %s: %v", n, plan.Reservation.Nodes)
		}
	}

	// n2's running card ends: train fits n2 and n3 whole and is admitted;
	// eval, still short of a second free card, takes the reservation.
	in.Rooms = []Room{room("n1", 8, 4, 8, 1), room("n2", 8, 4, 8, 4), room("n3", 8, 4, 8, 4)}
	plan = Compute(in)
	if d := plan.Decisions["ns/train"]; !d.Admitted {
		t.Errorf("second pass: train %+v, want admitted", d)
	}
	if d := plan.Decisions["ns/eval"]; d.Reason != ReasonWaitingForCapacity || d.Position != 1 || plan.Reservation == nil || plan.Reservation.Holder != "ns/eval" {
		t.Errorf("second pass: eval %+v with reservation %+v, want WaitingForCapacity at 1 holding it", d, plan.Reservation)
	}
}
