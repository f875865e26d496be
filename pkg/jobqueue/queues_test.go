package jobqueue

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/queuetree"
)

// gpus is an amount of cards in the tree's unit (thousandths).
func gpus(n int64) int64 { return n * 1000 }

// teamQueue is a queue spec accounting GPUs only.
func teamQueue(name, parent string, guaranteed, limit int64, weight int64) queuetree.Spec {
	return queuetree.Spec{Name: name, Object: "aischedqueue " + name, Parent: parent,
		Resources: map[string]queuetree.Amounts{queuetree.GPU: {Guaranteed: guaranteed, Limit: limit, Lending: queuetree.Unlimited, Weight: weight}}}
}

// teamsCase is a cluster of four nodes of four cards, queues, running
// work (by queue) and waiting groups (by queue).
type teamsCase struct {
	queues  []queuetree.Spec
	running []runningGang
	waiting []waitingGang
}

type runningGang struct {
	queue    string
	name     string
	pods     int
	cards    int64
	priority int32
	// deleting: the pods are being deleted (taken back already).
	deleting bool
}

type waitingGang struct {
	queue string
	group Group
}

// plan binds the running gangs first fit on four nodes of four cards and
// computes a plan for the waiting groups.
func (tc teamsCase) plan(t *testing.T) (Plan, *queuetree.Tree) {
	t.Helper()
	rooms := []Room{room("n1", 32, 4, 32, 4), room("n2", 32, 4, 32, 4), room("n3", 32, 4, 32, 4), room("n4", 32, 4, 32, 4)}
	queueOf := map[string]string{}
	for _, g := range tc.running {
		queueOf["ns/"+g.name] = g.queue
		for i := range g.pods {
			p := member(pod(fmt.Sprintf("%s-%d", g.name, i), 1, g.cards), g.name)
			p.Labels[podgroup.MinAvailableLabel] = fmt.Sprint(g.pods)
			if g.deleting {
				p.DeletionTimestamp = &metav1.Time{}
			}
			bound := false
			for r := range rooms {
				if rooms[r].GPUs.Fits(mustRequest(t, p)) {
					bindOn(t, &rooms[r], p, g.priority)
					bound = true
					break
				}
			}
			if !bound {
				t.Fatalf("running gang %s does not fit", g.name)
			}
		}
	}
	tree, problems := queuetree.Build(tc.queues, capacityOf(rooms))
	if len(problems) > 0 {
		t.Fatalf("queues: %v", problems)
	}
	in := Input{Rooms: rooms, Queues: tree, QueueOf: queueOf, Backfill: true}
	for _, w := range tc.waiting {
		g := w.group
		g.Queue = w.queue
		in.Groups = append(in.Groups, g)
	}
	return Compute(in), tree
}

func TestTeamQueues(t *testing.T) {
	tests := []struct {
		name        string
		tc          teamsCase
		want        map[string]Reason
		wantVictims []string
		wantFrom    []string
	}{{
		// a is guaranteed 8 cards and idle; b borrowed all 16. a's gang
		// of 2 x 4 takes back one of b's two 8-card gangs, whole (equal in
		// all else, the first by key).
		name: "idle guarantee lent, then taken back",
		tc: teamsCase{
			queues:  []queuetree.Spec{teamQueue("a", "", gpus(8), queuetree.Unlimited, 1), teamQueue("b", "", 0, queuetree.Unlimited, 1)},
			running: []runningGang{{queue: "b", name: "b1", pods: 2, cards: 4}, {queue: "b", name: "b2", pods: 2, cards: 4}},
			waiting: []waitingGang{{queue: "a", group: group("a1", 2, 1, 4, 0, 0)}},
		},
		want:        map[string]Reason{"ns/a1": ReasonReclaiming},
		wantVictims: []string{"b1-0", "b1-1"},
		wantFrom:    []string{"aischedqueue b"},
	}, {
		// b is guaranteed 12 and uses all 16 in one gang: taking it back
		// would reach into b's guarantee, so a waits for capacity.
		name: "nothing taken within a guarantee",
		tc: teamsCase{
			queues:  []queuetree.Spec{teamQueue("a", "", gpus(4), queuetree.Unlimited, 1), teamQueue("b", "", gpus(12), queuetree.Unlimited, 1)},
			running: []runningGang{{queue: "b", name: "b1", pods: 4, cards: 4}},
			waiting: []waitingGang{{queue: "a", group: group("a1", 1, 1, 4, 0, 0)}},
		},
		want: map[string]Reason{"ns/a1": ReasonWaitingForCapacity},
	}, {
		// Siblings first: a1 (under dept x) takes back from its sibling
		// a2 before b (another department), though b's work has lower
		// priority.
		name: "taken back from siblings first",
		tc: teamsCase{
			queues: []queuetree.Spec{
				teamQueue("x", "", gpus(8), queuetree.Unlimited, 1), teamQueue("y", "", gpus(8), queuetree.Unlimited, 1),
				teamQueue("x1", "x", gpus(4), queuetree.Unlimited, 1), teamQueue("x2", "x", 0, queuetree.Unlimited, 1),
				teamQueue("y1", "y", 0, queuetree.Unlimited, 1),
			},
			running: []runningGang{{queue: "x2", name: "sib", pods: 1, cards: 4, priority: 5}, {queue: "y1", name: "other", pods: 3, cards: 4}},
			waiting: []waitingGang{{queue: "x1", group: group("mine", 1, 1, 4, 0, 0)}},
		},
		want:        map[string]Reason{"ns/mine": ReasonReclaiming},
		wantVictims: []string{"sib-0"},
		wantFrom:    []string{"aischedqueue x2"},
	}, {
		// The victims of an earlier pass are being deleted: the group
		// waits for them and takes nothing more.
		name: "taken back already",
		tc: teamsCase{
			queues:  []queuetree.Spec{teamQueue("a", "", gpus(8), queuetree.Unlimited, 1), teamQueue("b", "", 0, queuetree.Unlimited, 1)},
			running: []runningGang{{queue: "b", name: "b1", pods: 2, cards: 4, deleting: true}, {queue: "b", name: "b2", pods: 2, cards: 4}},
			waiting: []waitingGang{{queue: "a", group: group("a1", 2, 1, 4, 0, 0)}},
		},
		want: map[string]Reason{"ns/a1": ReasonReclaiming},
	}, {
		// Neither is guaranteed anything; b borrowed all 16 cards in
		// single-card pods. a's gang of 2 x 4 would take 8: each pod alone
		// leaves b above a's share with the gang (15/16 > 8/16), but the
		// eight together leave b at a's share, 8/16: b would win them back
		// at once. Victims count together: a waits.
		name: "a borrowing group takes back only while the victims' queue keeps the higher share",
		tc: teamsCase{
			queues:  []queuetree.Spec{teamQueue("a", "", 0, queuetree.Unlimited, 1), teamQueue("b", "", 0, queuetree.Unlimited, 1)},
			running: singles("b", 16),
			waiting: []waitingGang{{queue: "a", group: group("a1", 2, 1, 4, 0, 0)}},
		},
		want: map[string]Reason{"ns/a1": ReasonWaitingForCapacity},
	}, {
		// With a pod of 4 instead, b keeps 12/16 > 4/16: the 4 pods of one
		// node are taken back.
		name: "a borrowing group takes back what keeps the victims' queue above it",
		tc: teamsCase{
			queues:  []queuetree.Spec{teamQueue("a", "", 0, queuetree.Unlimited, 1), teamQueue("b", "", 0, queuetree.Unlimited, 1)},
			running: singles("b", 16),
			waiting: []waitingGang{{queue: "a", group: group("a1", 1, 1, 4, 0, 0)}},
		},
		want:        map[string]Reason{"ns/a1": ReasonReclaiming},
		wantVictims: []string{"b00-0", "b01-0", "b02-0", "b03-0"},
		wantFrom:    []string{"aischedqueue b"},
	}, {
		// b is guaranteed 14 (the guarantees oversubscribe the 16 cards)
		// and runs 16 single-card pods; a, guaranteed 4, waits for a pod
		// of 4 on one node. Each of b's pods alone leaves b above 14, but
		// four would leave it at 12: nothing is taken, a waits.
		name: "victims together stay out of a guarantee",
		tc: teamsCase{
			queues:  []queuetree.Spec{teamQueue("a", "", gpus(4), queuetree.Unlimited, 1), teamQueue("b", "", gpus(14), queuetree.Unlimited, 1)},
			running: singles("b", 16),
			waiting: []waitingGang{{queue: "a", group: group("a1", 1, 1, 4, 0, 0)}},
		},
		want: map[string]Reason{"ns/a1": ReasonWaitingForCapacity},
	}, {
		// b is guaranteed 12 and runs 16 single-card pods, those of
		// lowest priority one on each node (chosen first). a, guaranteed
		// 4, waits for a pod of 4 on one node: the four of lowest priority
		// would leave b at 12 but free no node; the choice goes on until
		// n1 is free and gives back the pods it does not need, and b's four
		// pods on n1 together leave it at its guarantee.
		name: "victims checked together once the unneeded are given back",
		tc: teamsCase{
			queues:  []queuetree.Spec{teamQueue("a", "", gpus(4), queuetree.Unlimited, 1), teamQueue("b", "", gpus(12), queuetree.Unlimited, 1)},
			running: lowestPerNode(singles("b", 16)),
			waiting: []waitingGang{{queue: "a", group: group("a1", 1, 1, 4, 0, 0)}},
		},
		want:        map[string]Reason{"ns/a1": ReasonReclaiming},
		wantVictims: []string{"b00-0", "b01-0", "b02-0", "b03-0"},
		wantFrom:    []string{"aischedqueue b"},
	}, {
		// A queue's limit stops its work before the capacity does.
		name: "limit",
		tc: teamsCase{
			queues:  []queuetree.Spec{teamQueue("a", "", 0, gpus(4), 1)},
			running: []runningGang{{queue: "a", name: "a0", pods: 1, cards: 4}},
			waiting: []waitingGang{{queue: "a", group: group("a1", 1, 1, 1, 0, 0)}},
		},
		want: map[string]Reason{"ns/a1": ReasonOverQueueLimit},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, _ := tt.tc.plan(t)
			for key, want := range tt.want {
				if got := plan.Decisions[key]; got.Reason != want {
					t.Errorf("%s: %s (%s), want %s", key, got.Reason, got.Message, want)
				}
			}
			var victims []string
			var from []string
			for _, p := range plan.Preemptions {
				victims = append(victims, names(p.Victims)...)
				from = append(from, p.From...)
			}
			if fmt.Sprint(victims) != fmt.Sprint(tt.wantVictims) || fmt.Sprint(from) != fmt.Sprint(tt.wantFrom) {
				t.Errorf("victims %v from %v, want %v from %v", victims, from, tt.wantVictims, tt.wantFrom)
			}
		})
	}
}

// Two borrowing queues of weight 1 and 2, nothing guaranteed, share the
// spare cards 1:2 as far as their jobs' size allows: with 16 free cards
// and many one-card jobs each, 5 or 6 go to a and 10 or 11 to b.
func TestTeamQueuesWeights(t *testing.T) {
	tc := teamsCase{queues: []queuetree.Spec{teamQueue("a", "", 0, queuetree.Unlimited, 1), teamQueue("b", "", 0, queuetree.Unlimited, 2)}}
	for i := range 16 {
		tc.waiting = append(tc.waiting,
			waitingGang{queue: "a", group: group(fmt.Sprintf("a%02d", i), 1, 1, 1, i, 0)},
			waitingGang{queue: "b", group: group(fmt.Sprintf("b%02d", i), 1, 1, 1, i, 0)})
	}
	plan, tree := tc.plan(t)
	got := map[byte]int{}
	for key, d := range plan.Decisions {
		if d.Admitted {
			got[key[3]]++
		}
	}
	if got['a']+got['b'] != 16 || got['a'] < 5 || got['a'] > 6 {
		t.Errorf("admitted a %d, b %d; want 16 cards shared 1:2 (5 or 6 to a)", got['a'], got['b'])
	}
	a := tree.Queue("a")
	if fair := a.FairShare()[0]; fair < gpus(5) || fair > gpus(6) {
		t.Errorf("a's fair share %d, want 16/3 cards", fair)
	}
}

// singles are n running single-card pods of queue q, named q00, q01, ...
func singles(q string, n int) []runningGang {
	var out []runningGang
	for i := range n {
		out = append(out, runningGang{queue: q, name: fmt.Sprintf("%s%02d", q, i), pods: 1, cards: 1})
	}
	return out
}

// lowestPerNode gives the first of every four running units priority 0
// and the others 1: bound first fit on nodes of four cards, one unit of
// lowest priority on each node.
func lowestPerNode(units []runningGang) []runningGang {
	for i := range units {
		if i%4 != 0 {
			units[i].priority = 1
		}
	}
	return units
}

func mustRequest(t *testing.T, p *corev1.Pod) gpu.Request {
	t.Helper()
	r, err := gpu.ParseRequest(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestQueuesDocExample is the worked example of docs/queues.md: 16 cards;
// vision guaranteed 8, nlp 4, sandbox nothing with weight 2. sandbox
// borrowed all 16 with single-card pods; vision's gang of 2 x 4 takes 8
// back (8 pods, one card each: one card evicted per card taken back); nlp's
// pod of 4 then takes 4 more. The fair shares, with every queue wanting
// more: vision 8, nlp 4 (their guarantees), sandbox the 4 nobody is
// guaranteed.
func TestQueuesDocExample(t *testing.T) {
	queues := []queuetree.Spec{teamQueue("vision", "", gpus(8), queuetree.Unlimited, 1), teamQueue("nlp", "", gpus(4), queuetree.Unlimited, 1),
		teamQueue("sandbox", "", 0, queuetree.Unlimited, 2)}
	running := func(n int) []runningGang {
		var out []runningGang
		for i := range n {
			out = append(out, runningGang{queue: "sandbox", name: fmt.Sprintf("s%02d", i), pods: 1, cards: 1})
		}
		return out
	}
	// Step 1: vision's gang takes back 8.
	plan, _ := teamsCase{queues: queues, running: running(16),
		waiting: []waitingGang{{queue: "vision", group: group("train", 2, 1, 4, 0, 0)}}}.plan(t)
	if d := plan.Decisions["ns/train"]; d.Reason != ReasonReclaiming || len(plan.Preemptions) != 1 || len(plan.Preemptions[0].Victims) != 8 {
		t.Fatalf("step 1: %+v, preemptions %d; want train Reclaiming 8 of sandbox's pods", d, len(plan.Preemptions))
	}
	// Step 2: 8 sandbox pods left; nlp's pod of 4 cards takes back 4.
	plan, tree := teamsCase{queues: queues, running: append(running(8), runningGang{queue: "vision", name: "train", pods: 2, cards: 4}),
		waiting: []waitingGang{{queue: "nlp", group: group("bert", 1, 1, 4, 0, 0)}, {queue: "sandbox", group: group("more", 1, 1, 1, 0, 0)}}}.plan(t)
	if d := plan.Decisions["ns/bert"]; d.Reason != ReasonReclaiming || len(plan.Preemptions) != 1 || len(plan.Preemptions[0].Victims) != 4 {
		t.Fatalf("step 2: %+v; want bert Reclaiming 4 of sandbox's pods", d)
	}
	// Fair shares of step 2: every queue wants more than it has.
	want := map[string]int64{"vision": gpus(8), "nlp": gpus(4), "sandbox": gpus(4)}
	for name, w := range want {
		if got := tree.Queue(name).FairShare()[0]; got != w {
			t.Errorf("%s: fair share %d, want %d", name, got, w)
		}
	}
}

// TestTeamQueuesReservationBesideAdmitted is the state TestTeamQueueWeights
// (test/integration) once stopped in: queues a and b of weight 1 and 2
// share three nodes of four cards, a runs 5 single-card pods and b 6, and
// one card is free, on n1. b's next pod is admitted onto it; a's, which
// does not fit, reserves capacity elsewhere: a reservation on n1 would
// hold the admitted pod off its card (the scheduler lets pods of the
// reservation's priority and below take only what exceeds it), and the
// card would stay idle.
func TestTeamQueuesReservationBesideAdmitted(t *testing.T) {
	rooms := []Room{room("n1", 32, 4, 32, 4), room("n2", 32, 4, 32, 4), room("n3", 32, 4, 32, 4)}
	queueOf := map[string]string{}
	k := 0
	for r, queues := range [][]string{{"a", "a", "a"}, {"a", "a", "b", "b"}, {"b", "b", "b", "b"}} {
		for _, q := range queues {
			name := fmt.Sprintf("%s%02d", q, k)
			k++
			queueOf["ns/"+name] = q
			bindOn(t, &rooms[r], pod(name, 1, 1), 0)
		}
	}
	tree, problems := queuetree.Build([]queuetree.Spec{teamQueue("a", "", 0, queuetree.Unlimited, 1), teamQueue("b", "", 0, queuetree.Unlimited, 2)}, capacityOf(rooms))
	if len(problems) > 0 {
		t.Fatalf("queues: %v", problems)
	}
	in := Input{Rooms: rooms, Queues: tree, QueueOf: queueOf, Backfill: true}
	for i := 20; i < 27; i++ {
		for _, q := range []string{"a", "b"} {
			g := group(fmt.Sprintf("%s%02d", q, i), 1, 1, 1, i, 0)
			g.Queue = q
			in.Groups = append(in.Groups, g)
		}
	}
	plan := Compute(in)
	if d := plan.Decisions["ns/b20"]; !d.Admitted {
		t.Fatalf("b20: %+v, want it admitted onto n1's free card", d)
	}
	if r := plan.Reservation; r != nil {
		if _, ok := r.Nodes["n1"]; ok {
			t.Errorf("reservation of %s holds n1, where b20 is placed: %+v", r.Holder, r.Nodes)
		}
	}
}

// A share counts in a team's GPUs as its fraction of each of its cards:
// thousandths, memory over the card's, or a percent of it.
func TestUsageOfShares(t *testing.T) {
	tree, problems := queuetree.Build([]queuetree.Spec{teamQueue("team", "", gpus(1), gpus(4), 1)}, map[string]int64{queuetree.GPU: gpus(4), "cpu": 32000})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	gpuAt := slices.Index(tree.Names(), queuetree.GPU)
	for _, tc := range []struct {
		name string
		r    gpu.Request
		want int64
	}{
		{"whole cards", gpu.Request{Count: 2}, 2000},
		{"300 of each of two cards", gpu.Request{Count: 2, Milli: 300, GPUMemMiB: 3000}, 600},
		// 8192 of a 32768 MiB card is 250 thousandths, on each of three.
		{"8192 MiB of each of three cards", gpu.Request{Count: 3, GPUMemMiB: 8192}, 750},
		{"half of the memory of each of two cards", gpu.Request{Count: 2, GPUMemPercent: 50}, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := usageOf(tree, Resources{}, tc.r, nil, nil, 32768)[gpuAt]; got != tc.want {
				t.Errorf("GPU usage %d, want %d", got, tc.want)
			}
		})
	}
}
