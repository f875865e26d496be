package queuetree

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// gpu is a spec accounting cards (thousandths) only.
func gpu(name, parent string, guaranteed, limit, weight int64) Spec {
	return Spec{Name: name, Object: "q " + name, Parent: parent,
		Resources: map[string]Amounts{GPU: {Guaranteed: guaranteed * 1000, Limit: limit, Lending: Unlimited, Weight: weight}}}
}

func cards(n int64) Vec { return Vec{n * 1000} }

func build(t *testing.T, capacity int64, specs ...Spec) *Tree {
	t.Helper()
	tree, problems := Build(specs, map[string]int64{GPU: capacity * 1000})
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	return tree
}

func TestBuildProblems(t *testing.T) {
	defaultA, defaultB := gpu("a", "", 0, Unlimited, 1), gpu("b", "", 0, Unlimited, 1)
	defaultA.Default, defaultB.Default = true, true
	_, problems := Build([]Spec{
		gpu("orphan", "none", 0, Unlimited, 1),
		gpu("x", "y", 0, Unlimited, 1), gpu("y", "x", 0, Unlimited, 1),
		gpu("p", "", 2, Unlimited, 1), gpu("c1", "p", 2, Unlimited, 1), gpu("c2", "p", 1, Unlimited, 1),
		gpu("low", "", 4, 2000, 1),
		defaultA, defaultB,
	}, nil)
	var got []string
	for _, p := range problems {
		got = append(got, p.Error())
	}
	slices.Sort(got)
	want := []string{
		`q low: spec.resources[nvidia.com/gpu].limit: 2 is below guaranteed 4; the queue is limited to 2`,
		`q orphan: spec.parent: parent "none" does not exist`,
		`q p: spec.resources[nvidia.com/gpu].guaranteed: its children are guaranteed 3 of nvidia.com/gpu, more than its own 2`,
		`q x: spec.parent: the queue is in a cycle of parents`,
		`q y: spec.parent: the queue is in a cycle of parents`,
		`q b: spec.default: q a is the default queue already (the first by name)`,
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want,+got):\n%s", diff)
	}
}

func TestWithinClaimsLimit(t *testing.T) {
	tree := build(t, 16, gpu("dept", "", 8, Unlimited, 1), gpu("a", "dept", 4, 6000, 1), gpu("b", "dept", 0, Unlimited, 1),
		Spec{Name: "cpu-only", Object: "q cpu-only", Resources: map[string]Amounts{"cpu": {Guaranteed: 4000, Limit: Unlimited, Lending: Unlimited, Weight: 1}}})
	a, b, dept := tree.Queue("a"), tree.Queue("b"), tree.Queue("dept")
	// The tree accounts cpu (index 0) and cards (index 1).
	cards := func(n int64) Vec { return Vec{0, n * 1000} }
	tree.Charge(a, cards(3))
	tree.Charge(b, cards(4))
	// a: 3 + 1 <= 4, dept: 7 + 1 <= 8.
	if !tree.Within(a, cards(1)) || !tree.Claims(a, cards(1)) {
		t.Error("a's 1 more card: want within its guarantee and claiming")
	}
	// a: 3 + 2 > 4.
	if tree.Within(a, cards(2)) {
		t.Error("a's 2 more cards: want borrowing")
	}
	// b borrows (guaranteed nothing), and claims nothing.
	if tree.Within(b, cards(1)) || tree.Claims(b, cards(1)) {
		t.Error("b's card: want borrowing, not claiming")
	}
	// A queue that does not account cards: its work neither borrows nor
	// claims them.
	if c := tree.Queue("cpu-only"); !tree.Within(c, cards(1)) || tree.Claims(c, cards(1)) {
		t.Error("cpu-only's card: want not accounted")
	}
	// a's limit 6: 3 + 4 > 6.
	if q, _ := tree.OverLimit(a, cards(4)); q != a {
		t.Errorf("over limit: %v, want a", q)
	}
	if q, _ := tree.OverLimit(a, cards(3)); q != nil {
		t.Errorf("3 more within a's limit of 6 reported over %s", q.Name)
	}
	if dept.Used()[1] != 7000 {
		t.Errorf("dept uses %d, want 7000 (its children's)", dept.Used()[1])
	}
}

// Shares: borrowed / capacity / weight, compared below the lowest common
// ancestor.
func TestBefore(t *testing.T) {
	tree := build(t, 20, gpu("x", "", 0, Unlimited, 1), gpu("y", "", 0, Unlimited, 2),
		gpu("x1", "x", 0, Unlimited, 1), gpu("x2", "x", 0, Unlimited, 1), gpu("y1", "y", 0, Unlimited, 1))
	x1, x2, y1 := tree.Queue("x1"), tree.Queue("x2"), tree.Queue("y1")
	tree.Charge(x1, cards(4))
	tree.Charge(y1, cards(6))
	// x with one more: 5/20/1 = 0.25; y with one more: 7/20/2 = 0.175: y
	// first.
	if got := tree.Before(x2, cards(1), y1, cards(1)); got != 1 {
		t.Errorf("x2 before y1: %d, want y1 first (1)", got)
	}
	// Siblings: x1 with one more 5/20 = 0.25, x2 1/20 = 0.05: x2 first.
	if got := tree.Before(x1, cards(1), x2, cards(1)); got != 1 {
		t.Errorf("x1 before x2: %d, want x2 first (1)", got)
	}
	if s := tree.Share(tree.Queue("y"), nil); math.Abs(s-0.15) > 1e-9 {
		t.Errorf("y's share %v, want 6/20/2 = 0.15", s)
	}
	if d := Distance(x1, x2); d != 1 {
		t.Errorf("siblings at distance %d, want 1", d)
	}
	if d := Distance(x1, y1); d <= Distance(x1, x2) {
		t.Errorf("cousins at distance %d, not further than siblings", d)
	}
}

func TestReclaimable(t *testing.T) {
	tree := build(t, 16, gpu("a", "", 8, Unlimited, 1), gpu("b", "", 4, Unlimited, 1), gpu("c", "", 0, Unlimited, 1))
	a, b, c := tree.Queue("a"), tree.Queue("b"), tree.Queue("c")
	tree.Charge(b, cards(8))
	tree.Charge(c, cards(4))
	for _, tc := range []struct {
		name   string
		victim *Node
		v      int64
		want   bool
	}{
		{"b's borrowed 4", b, 4, true},
		{"b's 6: 2 within its guarantee", b, 6, false},
		{"c borrows all", c, 4, true},
		{"a's own", a, 1, false},
	} {
		if got := tree.Reclaimable(tc.victim, cards(tc.v), a); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	nr := gpu("nr", "", 0, Unlimited, 1)
	nr.NotReclaimable = true
	tree = build(t, 16, gpu("a", "", 8, Unlimited, 1), nr)
	tree.Charge(tree.Queue("nr"), cards(8))
	if tree.Reclaimable(tree.Queue("nr"), cards(4), tree.Queue("a")) {
		t.Error("taken back from a queue that is not reclaimable")
	}
}

// Fair shares of 16 cards: guarantees first as far as asked, then the
// rest by weight, each capped at what it asks for and its limit.
func TestFairShares(t *testing.T) {
	tree := build(t, 16, gpu("a", "", 8, Unlimited, 1), gpu("b", "", 2, Unlimited, 1), gpu("c", "", 0, Unlimited, 2),
		gpu("d", "", 0, 3000, 1), gpu("idle", "", 4, Unlimited, 1))
	for name, asks := range map[string]int64{"a": 10, "b": 20, "c": 20, "d": 20} {
		tree.Wait(tree.Queue(name), cards(asks))
	}
	tree.FairShares()
	// Guarantees: a 8, b 2, c 0, d 0, idle 0 (asks nothing): 10 given, 6
	// left, to a, b, c, d by weight 1:1:2:1: 1.2, 1.2, 2.4, 1.2 each.
	got := map[string]int64{}
	for _, n := range tree.Queues() {
		got[n.Name] = n.FairShare()[0]
	}
	want := map[string]int64{"a": 9200, "b": 3200, "c": 2400, "d": 1200, "idle": 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fair shares in thousandths (-want,+got):\n%s", diff)
	}
}

func TestLendersAndDecay(t *testing.T) {
	tree := build(t, 16, gpu("a", "", 8, Unlimited, 1), gpu("b", "", 4, Unlimited, 1), gpu("c", "", 0, Unlimited, 1))
	c := tree.Queue("c")
	tree.Charge(tree.Queue("a"), cards(2))
	tree.Charge(c, cards(9))
	var got []string
	for _, l := range tree.Lenders(c, 0) {
		got = append(got, l.Queue.Name+":"+Format(GPU, l.Amount))
	}
	// c borrows 9: a lends its 6 unused, b its 3 of 4.
	if strings.Join(got, ",") != "a:6,b:3" {
		t.Errorf("lenders %v, want a:6, b:3", got)
	}

	h := gpu("h", "", 0, Unlimited, 1)
	h.HalfLife = time.Minute
	tree = build(t, 16, h)
	tree.Charge(tree.Queue("h"), cards(8))
	tree.Decay(time.Minute)
	// One half-life at 8 cards from nothing: 8 * (1 - 1/2) = 4.
	if got := tree.Queue("h").History()[0]; got != 4000 {
		t.Errorf("history after one half-life %d, want 4000", got)
	}
}
