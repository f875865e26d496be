package jobqueue

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
)

var t0 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func pod(name string, cpu int64, gpus int64) *corev1.Pod {
	req := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(cpu*1000, resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse("1Gi"),
	}
	if gpus > 0 {
		req["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}}},
	}
}

// group returns a group of n pods with cpu CPUs and gpus GPUs each,
// created at t0 plus age seconds.
func group(name string, n int, cpu, gpus int64, age int, prio int32) Group {
	g := Group{Key: "ns/" + name, Namespace: "ns", MinAvailable: n, Priority: prio, Created: t0.Add(time.Duration(age) * time.Second)}
	for i := range n {
		g.Pending = append(g.Pending, pod(fmt.Sprintf("%s-%d", name, i), cpu, gpus))
	}
	return g
}

// cards returns a node of gpus alike cards with freeGPUs of them free.
func cards(gpus, freeGPUs int64) gpuledger.NodeGPUs {
	var list []gpu.Card
	for i := range gpus {
		list = append(list, gpu.Card{Index: int(i), Model: "T4", MemoryMiB: 16384, Healthy: true})
	}
	n := gpuledger.NodeGPUs{Cards: gpu.NewSet(list)}
	if _, ok := n.Take(gpu.Request{Count: gpus - freeGPUs}); !ok {
		panic(fmt.Sprintf("cannot take %d of %d cards", gpus-freeGPUs, gpus))
	}
	return n
}

func room(name string, cpu, gpus, freeCPU, freeGPUs int64) Room {
	alloc := Resources{MilliCPU: cpu * 1000, Memory: 64 << 30, Pods: 110}
	used := Resources{MilliCPU: (cpu - freeCPU) * 1000}
	return Room{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, Allocatable: alloc, Free: alloc.Sub(used), GPUs: cards(gpus, freeGPUs)}
}

func gpuQuota(hard, used string) Quota {
	return Quota{Name: "gpus", Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse(hard)},
		Used: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse(used)}}
}

// The first admitted group with members to place holds where the plan put
// them: a pod of another group may take only what is left beyond it, and a
// waiting group's reservation binds as well (Binding merges both).
func TestPlacingReservation(t *testing.T) {
	rooms := []Room{room("a", 8, 4, 8, 4), room("b", 8, 4, 8, 4), room("c", 8, 4, 8, 0)}
	big := group("big", 2, 1, 4, 0, 0)
	small := group("small", 1, 1, 2, 10, 0)
	plan := Compute(Input{Rooms: rooms, Groups: []Group{big, small}})
	if !plan.Decisions["ns/big"].Admitted {
		t.Fatalf("big: %+v, want admitted", plan.Decisions["ns/big"])
	}
	if plan.Placing == nil || plan.Placing.Holder != "ns/big" || len(plan.Placing.Nodes) != 2 {
		t.Fatalf("placing reservation %+v, want big's on two nodes", plan.Placing)
	}
	if d := plan.Decisions["ns/small"]; d.Admitted {
		t.Errorf("small admitted although big holds every free card: %+v", d)
	}
	binding := plan.Binding("ns/small", 0)
	if binding == nil {
		t.Fatal("no reservation binds a pod of small")
	}
	for _, node := range []string{"a", "b"} {
		free := rooms[0].Free
		if binding.Allows(node, free, cards(4, 4), Resources{MilliCPU: 1000}, gpu.Request{Count: 1}) {
			t.Errorf("a card of node %s, held for big, allowed to a pod of small", node)
		}
	}
	if !binding.Allows("a", rooms[0].Free, cards(4, 4), Resources{MilliCPU: 1000}, gpu.Request{}) {
		t.Error("a CPU pod refused on node a, where big leaves CPU")
	}
	if binding.Holder != "ns/big" {
		t.Errorf("a pod of small bound by %s, want big's reservation only", binding.Holder)
	}
	if r := plan.Binding("ns/big", 0); r != nil && strings.Contains(r.Holder, "ns/big") {
		t.Errorf("big's own pods bound by its reservation: %s", r.Holder)
	}
	if plan.Binding("ns/small", 1) != nil {
		t.Error("a pod of higher priority bound by the reservation")
	}
}

// A reservation made in a pass does not hold room that admitted groups
// are being placed on: their members would be held off the free cards
// the plan gave them (found by a simulation with team queues: a gang
// taking its guarantee back was admitted on the nodes its reclaim freed,
// and a borrowing pod behind it reserved a card there, so the gang backed
// off again and again).
func TestReservationBesidePlacing(t *testing.T) {
	// n1 and n3 are free; n2 is full, its pod using 4 of 8 CPUs. Counted
	// empty, each holds a 1-card pod; n1 and n3 have more CPU free once
	// big1 and big2 are placed there.
	rooms := []Room{room("n1", 8, 8, 8, 8), room("n2", 8, 8, 4, 0), room("n3", 8, 8, 8, 8)}
	big1 := group("big1", 1, 1, 8, 0, 0)
	big2 := group("big2", 1, 1, 8, 5, 0)
	small := group("small", 1, 1, 1, 10, 0)
	plan := Compute(Input{Rooms: rooms, Groups: []Group{big1, big2, small}})
	for _, key := range []string{"ns/big1", "ns/big2"} {
		if !plan.Decisions[key].Admitted {
			t.Fatalf("%s: %+v, want admitted", key, plan.Decisions[key])
		}
	}
	if plan.Reservation == nil || plan.Reservation.Holder != "ns/small" {
		t.Fatalf("reservation %+v, want small's", plan.Reservation)
	}
	if _, ok := plan.Reservation.Nodes["n2"]; !ok || len(plan.Reservation.Nodes) != 1 {
		t.Errorf("small reserves on %v, want n2 only: n1 and n3 hold big1 and big2", plan.Reservation.Nodes)
	}
	for key, node := range map[string]string{"ns/big1": "n1", "ns/big2": "n3"} {
		if r := plan.Binding(key, 0); r != nil && !r.Allows(node, rooms[0].Free, cards(8, 8), Resources{MilliCPU: 1000}, gpu.Request{Count: 8}) {
			t.Errorf("a pod of %s refused on %s by %s", key, node, r.Holder)
		}
	}
	// A reservation of higher priority binds neither: it may stay there.
	small.Priority = 5
	plan = Compute(Input{Rooms: rooms, Groups: []Group{big1, big2, small}})
	if plan.Reservation == nil || len(plan.Reservation.Nodes) != 1 {
		t.Fatalf("reservation %+v, want small's on one node", plan.Reservation)
	}
}

func TestCompute(t *testing.T) {
	fourNodes := []Room{room("a", 8, 4, 8, 4), room("b", 8, 4, 8, 4), room("c", 8, 4, 8, 4), room("d", 8, 4, 8, 4)}
	tests := []struct {
		name     string
		in       Input
		want     map[string]Reason
		message  map[string]string // substrings of the message
		position map[string]int
		holder   string
	}{{
		name: "fits: admitted",
		in:   Input{Groups: []Group{group("a", 4, 1, 2, 0, 0)}, Rooms: fourNodes},
		want: map[string]Reason{"ns/a": ReasonAdmitted},
	}, {
		name: "missing members",
		in:   Input{Groups: []Group{func() Group { g := group("a", 4, 1, 2, 0, 0); g.Pending = g.Pending[:3]; return g }()}, Rooms: fourNodes},
		want: map[string]Reason{"ns/a": ReasonWaitingForMembers}, message: map[string]string{"ns/a": "3 of its 4 members"},
	}, {
		// status.used already counts the group's own members.
		name: "quota: own members count once",
		in: Input{Groups: []Group{group("a", 4, 1, 2, 0, 0)}, Rooms: fourNodes,
			Quotas: map[string][]Quota{"ns": {gpuQuota("8", "8")}}},
		want: map[string]Reason{"ns/a": ReasonAdmitted},
	}, {
		name: "quota: other pods use part of it",
		in: Input{Groups: []Group{group("a", 4, 1, 2, 0, 0)}, Rooms: fourNodes,
			Quotas: map[string][]Quota{"ns": {gpuQuota("8", "10")}}},
		want:    map[string]Reason{"ns/a": ReasonQuotaExceeded},
		message: map[string]string{"ns/a": "ResourceQuota gpus: the group needs 8 of requests.nvidia.com/gpu, 6 is left of 8 (2 used by other pods)"},
	}, {
		// The apiserver refused the last two members: the queue counts
		// them like the largest member.
		name: "quota: members refused at creation count",
		in: Input{Groups: []Group{func() Group { g := group("a", 4, 1, 2, 0, 0); g.Pending = g.Pending[:2]; return g }()}, Rooms: fourNodes,
			Quotas: map[string][]Quota{"ns": {gpuQuota("4", "4")}}},
		want:    map[string]Reason{"ns/a": ReasonQuotaExceeded},
		message: map[string]string{"ns/a": "needs 8 of requests.nvidia.com/gpu, 4 is left of 4"},
	}, {
		// Kueue admitted the workload against its ClusterQueue: the
		// ResourceQuota is not checked a second time.
		name: "quota: Kueue's workloads are admitted by Kueue",
		in: Input{Groups: []Group{func() Group {
			g := group("a", 4, 1, 2, 0, 0)
			g.Pending[0].Labels = map[string]string{KueueManagedLabel: "true"}
			return g
		}()}, Rooms: fourNodes, Quotas: map[string][]Quota{"ns": {gpuQuota("8", "10")}}},
		want: map[string]Reason{"ns/a": ReasonAdmitted},
	}, {
		name: "minResources is a floor",
		in: Input{Groups: []Group{func() Group {
			g := group("a", 2, 1, 1, 0, 0)
			g.MinResources = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("6")}
			return g
		}()}, Rooms: fourNodes, Quotas: map[string][]Quota{"ns": {gpuQuota("4", "2")}}},
		want: map[string]Reason{"ns/a": ReasonQuotaExceeded}, message: map[string]string{"ns/a": "needs 6 of"},
	}, {
		name: "priority first",
		in:   Input{Groups: []Group{group("old", 4, 1, 4, 0, 0), group("high", 4, 1, 4, 10, 5)}, Rooms: fourNodes[:2]},
		want: map[string]Reason{"ns/high": ReasonUnplaceable, "ns/old": ReasonUnplaceable},
	}, {
		name: "priority first, both placeable",
		in:   Input{Groups: []Group{group("old", 2, 1, 4, 0, 0), group("high", 2, 1, 4, 10, 5)}, Rooms: fourNodes[:2]},
		want: map[string]Reason{"ns/high": ReasonAdmitted, "ns/old": ReasonWaitingForCapacity}, holder: "ns/old",
		position: map[string]int{"ns/old": 1},
	}, {
		// new reserves nothing while old's members are placed on both
		// nodes: a reservation there would hold them off (the next pass,
		// with old bound, gives new its reservation).
		name: "FIFO at equal priority",
		in:   Input{Groups: []Group{group("new", 2, 1, 4, 10, 0), group("old", 2, 1, 4, 0, 0)}, Rooms: fourNodes[:2]},
		want: map[string]Reason{"ns/old": ReasonAdmitted, "ns/new": ReasonWaitingForCapacity},
	}, {
		// The big group waits for GPUs in use; the small one behind it
		// would take GPUs from the reserved nodes: it waits too. The CPU
		// group fits where nothing is reserved: it backfills.
		name: "reservation and backfill",
		in: Input{Backfill: true, Rooms: []Room{room("a", 8, 4, 8, 2), room("b", 8, 4, 8, 2), room("c", 16, 0, 16, 0)},
			Groups: []Group{group("big", 2, 1, 4, 0, 0), group("small", 2, 1, 1, 10, 0), group("cpu", 2, 4, 0, 20, 0)}},
		want:   map[string]Reason{"ns/big": ReasonWaitingForCapacity, "ns/small": ReasonWaitingForCapacity, "ns/cpu": ReasonAdmitted},
		holder: "ns/big", position: map[string]int{"ns/big": 1, "ns/small": 2},
		message: map[string]string{"ns/big": "2 nodes are reserved for it", "ns/small": "capacity is reserved for ns/big"},
	}, {
		name: "no backfill",
		in: Input{Rooms: []Room{room("a", 8, 4, 8, 2), room("b", 8, 4, 8, 2), room("c", 16, 0, 16, 0)},
			Groups: []Group{group("big", 2, 1, 4, 0, 0), group("cpu", 2, 4, 0, 20, 0)}},
		want:   map[string]Reason{"ns/big": ReasonWaitingForCapacity, "ns/cpu": ReasonBehindReservation},
		holder: "ns/big",
	}, {
		// An unplaceable group holds nothing back.
		name: "too big for the cluster",
		in:   Input{Backfill: true, Groups: []Group{group("huge", 5, 1, 4, 0, 0), group("a", 2, 1, 2, 10, 0)}, Rooms: fourNodes},
		want: map[string]Reason{"ns/huge": ReasonUnplaceable, "ns/a": ReasonAdmitted},
		// Four nodes hold four of its five members: no node lacks anything
		// for one of them.
		message:  map[string]string{"ns/huge": "it never fits: with every node empty, 4 of the 5 members it needs at once fit"},
		position: map[string]int{"ns/huge": 0},
	}, {
		// A group that never fits takes no place in the line, even behind
		// a reservation, and says what no node has.
		name: "never fits behind a reservation",
		in: Input{Backfill: true, Rooms: []Room{room("a", 8, 4, 8, 2), room("b", 8, 4, 8, 2)},
			Groups: []Group{group("big", 2, 1, 4, 0, 0), group("huge", 1, 1, 8, 10, 0)}},
		want: map[string]Reason{"ns/big": ReasonWaitingForCapacity, "ns/huge": ReasonUnplaceable}, holder: "ns/big",
		position: map[string]int{"ns/big": 1, "ns/huge": 0},
		message: map[string]string{"ns/huge": "it never fits: with every node empty, 0 of the 1 members it needs at once fit; " +
			"no node can hold its largest member (8 GPUs, 1 CPU, 1Gi memory): 2 node(s) have 4 GPUs, fewer than the pod's 8"},
	}, {
		name: "fragmented",
		in:   Input{Backfill: true, Groups: []Group{group("a", 2, 1, 2, 0, 0)}, Rooms: []Room{room("a", 8, 2, 8, 1), room("b", 8, 2, 8, 1), room("c", 8, 2, 8, 1), room("d", 8, 2, 8, 1)}},
		want: map[string]Reason{"ns/a": ReasonWaitingForCapacity}, holder: "ns/a",
		message: map[string]string{"ns/a": "needs 2 pods placed at once, the largest with 2 GPUs, 1 CPU, 1Gi memory; the free resources hold 0 of them; 0 nodes have room for the largest; " +
			"the cluster has enough free in total, but not on the right nodes"},
	}, {
		// First in line, a group that backs off keeps nodes reserved, so
		// that the groups behind it do not take them meanwhile.
		name: "backing off",
		in:   Input{Now: t0, Groups: []Group{func() Group { g := group("a", 2, 1, 2, 0, 0); g.BackoffUntil = t0.Add(time.Second); return g }()}, Rooms: fourNodes},
		want: map[string]Reason{"ns/a": ReasonBackingOff}, message: map[string]string{"ns/a": "nodes are reserved for it"}, holder: "ns/a",
	}, {
		// Admitted groups take their room first, even when a group ahead
		// of them in order arrives.
		// earlier reserves nothing while later's members are placed on
		// the one node: a reservation there would hold them off it
		// (TestReservationBesidePlacing).
		name: "admitted groups keep their room",
		in: Input{Rooms: fourNodes[:1], Groups: []Group{
			func() Group { g := group("later", 2, 1, 2, 10, 0); g.Admitted = true; return g }(),
			group("earlier", 2, 1, 2, 0, 0)}},
		want:    map[string]Reason{"ns/later": ReasonAdmitted, "ns/earlier": ReasonWaitingForCapacity},
		message: map[string]string{"ns/earlier": "the nodes reserved in this pass leave no room for it"},
	}, {
		name: "bound and succeeded members count toward min-available",
		in: Input{Rooms: fourNodes[:1], Groups: []Group{func() Group {
			g := group("a", 4, 1, 2, 0, 0)
			g.Bound, g.Pending, g.Succeeded = g.Pending[:1], g.Pending[1:2], 2
			return g
		}()}},
		want: map[string]Reason{"ns/a": ReasonAdmitted},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := Compute(tc.in)
			if len(plan.Decisions) != len(tc.want) {
				t.Errorf("decisions for %d groups, want %d", len(plan.Decisions), len(tc.want))
			}
			for key, want := range tc.want {
				d := plan.Decisions[key]
				if d.Reason != want || d.Admitted != (want == ReasonAdmitted) {
					t.Errorf("%s: %s (admitted %v) %q, want %s", key, d.Reason, d.Admitted, d.Message, want)
				}
				if sub := tc.message[key]; !strings.Contains(d.Message, sub) {
					t.Errorf("%s: message %q, want it to contain %q", key, d.Message, sub)
				}
				if pos, ok := tc.position[key]; ok && d.Position != pos {
					t.Errorf("%s: position %d, want %d", key, d.Position, pos)
				}
			}
			switch {
			case tc.holder == "" && plan.Reservation != nil:
				t.Errorf("reservation for %s, want none", plan.Reservation.Holder)
			case tc.holder != "" && (plan.Reservation == nil || plan.Reservation.Holder != tc.holder):
				t.Errorf("reservation %+v, want one for %s", plan.Reservation, tc.holder)
			}
		})
	}
}

func TestReservationAllows(t *testing.T) {
	// Node a (4 free cards, 8 CPU) is reserved for 2 CPU, a pod slot and
	// two whole cards.
	r := &Reservation{Holder: "ns/big", Nodes: map[string]Held{"a": {Resources: Resources{MilliCPU: 2000, Pods: 1}, GPUs: []gpu.Request{{Count: 2}}}}}
	free := Resources{MilliCPU: 8000, Memory: 1 << 30, Pods: 10}
	for _, tc := range []struct {
		name    string
		node    string
		request Resources
		gpu     gpu.Request
		want    bool
	}{
		{"unreserved node", "b", Resources{Pods: 1}, gpu.Request{Count: 4}, true},
		{"two cards beyond the reservation", "a", Resources{Pods: 1}, gpu.Request{Count: 2}, true},
		{"takes a reserved card", "a", Resources{Pods: 1}, gpu.Request{Count: 3}, false},
		// A share takes one card: three untouched cards hold the two reserved.
		{"a share beside the reservation", "a", Resources{Pods: 1}, gpu.Request{Count: 1, Milli: 500}, true},
		// CPU beyond the reservation is free to take, cards are not touched.
		{"CPU beyond the reservation", "a", Resources{MilliCPU: 6000, Pods: 1}, gpu.Request{}, true},
		{"CPU into the reservation", "a", Resources{MilliCPU: 6001, Pods: 1}, gpu.Request{}, false},
		{"memory only", "a", Resources{Memory: 1 << 30, Pods: 1}, gpu.Request{}, true},
	} {
		if got := r.Allows(tc.node, free, cards(4, 4), tc.request, tc.gpu); got != tc.want {
			t.Errorf("%s: Allows = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Held shares: the node's two cards hold a reserved share of 600 each;
	// a third share of 600 leaves no card for one of them.
	r = &Reservation{Holder: "ns/s", Nodes: map[string]Held{"a": {GPUs: []gpu.Request{{Count: 1, Milli: 600}, {Count: 1, Milli: 600}}}}}
	if r.Allows("a", free, cards(2, 2), Resources{Pods: 1}, gpu.Request{Count: 1, Milli: 600}) {
		t.Error("a share that leaves a reserved share no card was allowed")
	}
	if !r.Allows("a", free, cards(2, 2), Resources{Pods: 1}, gpu.Request{Count: 1, Milli: 400}) {
		t.Error("a share that fits beside the reserved ones was refused")
	}
}

// A gang of shared-GPU pods is placed on cards as GPUFit places them: four
// halves fit two cards, three shares of 600 do not.
func TestComputeShares(t *testing.T) {
	shares := func(name string, n int, milli int) Group {
		g := group(name, n, 1, 0, 0, 0)
		for _, p := range g.Pending {
			p.Annotations = map[string]string{gpu.MilliAnnotation: fmt.Sprint(milli)}
		}
		return g
	}
	for _, tc := range []struct {
		name string
		g    Group
		want Reason
	}{
		{"four halves on two cards", shares("halves", 4, 500), ReasonAdmitted},
		{"three shares of 600 on two cards", shares("big", 3, 600), ReasonUnplaceable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := Compute(Input{Groups: []Group{tc.g}, Rooms: []Room{room("a", 8, 2, 8, 2)}})
			if d := plan.Decisions[tc.g.Key]; d.Reason != tc.want {
				t.Errorf("%s (%s), want %s", d.Reason, d.Message, tc.want)
			}
		})
	}
}

// A group that waits with the reservation keeps its place before a group
// created in the same second (creation times have whole seconds) that
// completes later: TestSchedulerFailover's race. There r (two whole nodes)
// held the reservation while g had three of its four members; g's last
// member arrived, and the new leader's first pass, ordering the two by key
// ("ns/g" before "ns/r"), admitted g onto the free cards before r reserved
// its nodes. The place a group was queued at (the last plan's, or its
// PodGroup's status.queuePosition after a restart) now orders such groups.
func TestQueuedPlaceKept(t *testing.T) {
	// 16 cards on four nodes, 10 held: free 3, 2, 1, 0. r's reservation
	// takes the two freest nodes; g's four cards do not fit beside it.
	rooms := []Room{room("a", 32, 4, 32, 1), room("b", 32, 4, 32, 3), room("c", 32, 4, 32, 0), room("d", 32, 4, 32, 2)}
	r := group("r", 2, 1, 4, 0, 0)
	g := group("g", 4, 1, 1, 0, 0)
	for _, tc := range []struct {
		name        string
		rQueued     int
		wantHolder  string
		wantGReason Reason
	}{{
		// Without a recorded place the key decides: g first, and the
		// free cards go to it.
		name: "no place recorded", wantHolder: "ns/r", wantGReason: ReasonAdmitted,
	}, {
		name: "r queued first", rQueued: 1, wantHolder: "ns/r", wantGReason: ReasonWaitingForCapacity,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := r
			r.Queued = tc.rQueued
			plan := Compute(Input{Rooms: rooms, Groups: []Group{g, r}, Backfill: true})
			if plan.Reservation == nil || plan.Reservation.Holder != tc.wantHolder {
				t.Fatalf("reservation %+v, want held by %s", plan.Reservation, tc.wantHolder)
			}
			if got := plan.Decisions["ns/g"].Reason; got != tc.wantGReason {
				t.Errorf("g: %s (%s), want %s", got, plan.Decisions["ns/g"].Message, tc.wantGReason)
			}
		})
	}
}

func TestQueueOrder(t *testing.T) {
	mk := func(key string, prio int32, age, queued int) Group {
		return Group{Key: key, Priority: prio, Created: t0.Add(time.Duration(age) * time.Second), Queued: queued}
	}
	groups := []Group{mk("a", 0, 0, 0), mk("b", 0, 0, 2), mk("c", 0, 0, 1), mk("d", 0, -1, 0), mk("e", 1, 5, 0)}
	slices.SortStableFunc(groups, queueOrder)
	var got []string
	for _, g := range groups {
		got = append(got, g.Key)
	}
	// e: higher priority; d: older; c and b queued (1 before 2); a last.
	if want := []string{"e", "d", "c", "b", "a"}; !slices.Equal(got, want) {
		t.Errorf("queue order %v, want %v", got, want)
	}
}

// A waiting group keeps the nodes it reserved while no other node has more
// free: its reservation does not move without a gain, and moves to a node
// that frees more (TestJobQueueFence).
func TestReservationKept(t *testing.T) {
	// a to d have 2 cards free each; e has 3.
	rooms := []Room{room("a", 32, 4, 32, 2), room("b", 32, 4, 32, 2), room("c", 32, 4, 32, 2), room("d", 32, 4, 32, 2)}
	r := group("r", 2, 1, 4, 0, 0)
	for _, tc := range []struct {
		name  string
		rooms []Room
		last  *Reservation
		want  []string
	}{{
		name: "first reservation: the first of the freest", rooms: rooms, want: []string{"a", "b"},
	}, {
		name: "kept among as free", rooms: rooms, last: &Reservation{Holder: "ns/r", Nodes: map[string]Held{"c": {}, "d": {}}}, want: []string{"c", "d"},
	}, {
		name: "another group's is not kept", rooms: rooms, last: &Reservation{Holder: "ns/x", Nodes: map[string]Held{"c": {}, "d": {}}}, want: []string{"a", "b"},
	}, {
		name:  "moved to a node that freed more",
		rooms: append(slices.Clone(rooms), room("e", 32, 4, 32, 3)),
		last:  &Reservation{Holder: "ns/r", Nodes: map[string]Held{"c": {}, "d": {}}}, want: []string{"c", "e"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			plan := Compute(Input{Rooms: tc.rooms, Groups: []Group{r}, LastReservation: tc.last})
			if plan.Reservation == nil {
				t.Fatalf("no reservation: %+v", plan.Decisions)
			}
			var got []string
			for n := range plan.Reservation.Nodes {
				got = append(got, n)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("reserved %v, want %v", got, tc.want)
			}
		})
	}
}
