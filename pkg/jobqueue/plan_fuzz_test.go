package jobqueue

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// FuzzCompute checks the admission arithmetic on random clusters: what the
// newly admitted groups need fits the free resources, each admitted group
// fits its quota, positions count 1, 2, ... in order, the reservation
// holder waits, and the plan does not depend on the order of the input.
func FuzzCompute(f *testing.F) {
	f.Add([]byte{3, 4, 4, 2, 0, 2, 4, 1, 9, 3, 2, 0, 5})
	f.Add([]byte{1, 8, 8, 8, 1, 5, 1, 2, 2, 0, 0, 1, 7, 1, 6, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() int {
			if len(data) == 0 {
				return 0
			}
			b := int(data[0])
			data = data[1:]
			return b
		}
		var rooms []Room
		for i := range 1 + next()%5 {
			gpus := int64(next() % 9)
			rooms = append(rooms, room(fmt.Sprintf("n%d", i), 16, gpus, int64(next()%17), int64(next())%(gpus+1)))
		}
		var quotas map[string][]Quota
		if q := next() % 20; q > 0 {
			quotas = map[string][]Quota{"ns": {gpuQuota(fmt.Sprint(q), fmt.Sprint(next()%20))}}
		}
		var groups []Group
		for i := range 1 + next()%6 {
			g := group(fmt.Sprintf("g%d", i), 1+next()%4, int64(next()%5), int64(next()%5), next()%3, int32(next()%2))
			if next()%4 == 0 {
				g.Pending = g.Pending[:len(g.Pending)-1]
			}
			if next()%5 == 0 {
				g.Admitted = true
			}
			groups = append(groups, g)
		}
		in := Input{Groups: groups, Rooms: rooms, Quotas: quotas, Backfill: next()%2 == 0}
		plan := Compute(in)

		var free, needed Resources
		var freeGPU, neededGPU int64
		for _, r := range rooms {
			free = free.Add(r.Free.floor())
			freeGPU += r.GPUs.FreeMilli()
		}
		var positions []int
		for _, g := range groups {
			d, ok := plan.Decisions[g.Key]
			if !ok {
				t.Fatalf("no decision for %s", g.Key)
			}
			if d.Position > 0 {
				positions = append(positions, d.Position)
			}
			if !d.Admitted || g.Admitted {
				continue // admitted earlier: not checked again
			}
			own, whole := groupUsage(g)
			for _, q := range quotas["ns"] {
				if w := whole["requests.nvidia.com/gpu"]; w.IsZero() {
					break // asks for no GPUs: the GPU quota does not apply
				}
				used := q.Used["requests.nvidia.com/gpu"]
				used.Sub(own["requests.nvidia.com/gpu"])
				if used.Sign() < 0 {
					used = resource.Quantity{}
				}
				used.Add(whole["requests.nvidia.com/gpu"])
				if hard := q.Hard["requests.nvidia.com/gpu"]; used.Cmp(hard) > 0 {
					t.Errorf("%s admitted over quota: %s of %s (%+v, own %v whole %v)", g.Key, used.String(), hard.String(), d, own, whole)
				}
			}
			for _, p := range g.Pending[:g.MinAvailable-len(g.Bound)] {
				d := DemandOf(p)
				needed = needed.Add(d.Request)
				neededGPU += d.GPU.TotalMilli()
			}
		}
		if !free.Covers(needed) || neededGPU > freeGPU {
			t.Errorf("newly admitted groups need %+v and %d thousandths of a card, the nodes have %+v and %d free", needed, neededGPU, free, freeGPU)
		}
		slices.Sort(positions)
		for i, p := range positions {
			if p != i+1 {
				t.Fatalf("positions %v, want 1..%d", positions, len(positions))
			}
		}
		if r := plan.Reservation; r != nil {
			if d := plan.Decisions[r.Holder]; d.Admitted || d.Reason != ReasonWaitingForCapacity {
				t.Errorf("reservation holder %s: %+v", r.Holder, d)
			}
		}
		if r := plan.Placing; r != nil {
			if d := plan.Decisions[r.Holder]; !d.Admitted {
				t.Errorf("placing reservation of %s, which is not admitted: %+v", r.Holder, d)
			}
		}
		reversed := slices.Clone(groups)
		slices.Reverse(reversed)
		in.Groups = reversed
		if again := Compute(in); !reflect.DeepEqual(again.Decisions, plan.Decisions) {
			t.Errorf("plan depends on the order of groups:\n%v\n%v", plan.Decisions, again.Decisions)
		}
	})
}
