package jobqueue

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/podgroup"
)

func TestFence(t *testing.T) {
	q := New(nil, nil, Options{})
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	}
	seen := Capacity{Free: Resources{MilliCPU: 1000, Memory: 1 << 30, Pods: 10}, GPUMilli: 0}
	freed := Capacity{Free: seen.Free, GPUMilli: 4000}
	q.plan.Store(&Plan{
		Reservation: &Reservation{Holder: "ns/gang", Priority: 10},
		Seen:        map[string]Capacity{"n1": seen},
	})

	if f := q.Fence("ns/gang", 0); f != nil {
		t.Error("the holder's own members are fenced")
	}
	if f := q.Fence("", 11); f != nil {
		t.Error("a pod of higher priority than the holder is fenced")
	}
	f := q.Fence("", 10)
	if f == nil {
		t.Fatal("a pod of the holder's priority is not fenced")
	}
	if f.Holds(pod("a"), "n1", seen) {
		t.Error("fenced off what the pass saw")
	}
	if !f.Holds(pod("a"), "n1", freed) {
		t.Error("not fenced off cards freed since the pass")
	}
	if len(q.kick) != 1 {
		t.Error("the fence asked for no pass")
	}
	if !f.Holds(pod("b"), "n2", seen) {
		t.Error("not fenced off a node the pass did not see")
	}
	// A pass starts; until it completes, the fence holds.
	q.started++
	if !f.Holds(pod("c"), "n1", freed) {
		t.Error("the fence lifted before a pass that started after it completed")
	}
	q.completed = q.started
	// The pass saw the same free capacity (the scheduler counts otherwise
	// than the queue): the node is held once only.
	if f.Holds(pod("d"), "n1", freed) {
		t.Error("fenced twice for the same capacity")
	}
	// More freed since: held again.
	more := freed
	more.Free.MilliCPU += 500
	if !f.Holds(pod("e"), "n1", more) {
		t.Error("not fenced off capacity freed after the last fence")
	}
	var got []string
	for k := range q.fenced {
		got = append(got, k)
	}
	if len(got) != 4 {
		t.Errorf("pods to activate after the next pass: %v, want a, b, c and e", got)
	}

	q.plan.Store(&Plan{})
	if f := q.Fence("", 0); f != nil {
		t.Error("fenced without a waiting group")
	}
}

// TestPodUpdateClaimsNamed: the pass that finds a member's claim made
// from a template but not yet named on the pod says the group waits for
// it; the pod's status naming the claim must ask for a pass, or the group
// waits until something else happens.
func TestPodUpdateClaimsNamed(t *testing.T) {
	q := New(nil, nil, Options{})
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m-0", Labels: map[string]string{podgroup.NameLabel: "g"}}}
	old.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}
	named := old.DeepCopy()
	named.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("m-0-gpu-x7k2p")}}

	q.podUpdate(old, old.DeepCopy())
	if len(q.kick) != 0 {
		t.Fatal("an update that changes nothing the queue reads asked for a pass")
	}
	q.podUpdate(old, named)
	if len(q.kick) != 1 {
		t.Fatal("a member's claim named on its status asked for no pass")
	}
	<-q.kick
	bound := named.DeepCopy()
	bound.Spec.NodeName = "n1"
	bound.Status.ResourceClaimStatuses = nil
	q.podUpdate(named, bound)
	if len(q.kick) != 0 {
		t.Error("a bound member's claim statuses asked for a pass now")
	}
}

// TestBindingOutsideGroups: a pod in no group binding asks for a pass
// only while the last pass had groups or team queues to count it against.
func TestBindingOutsideGroups(t *testing.T) {
	q := New(nil, nil, Options{})
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	bound := pending.DeepCopy()
	bound.Spec.NodeName = "n1"

	q.podUpdate(pending, bound)
	q.podAdded(bound)
	if q.refreshing.Load() || len(q.kick) != 0 {
		t.Fatal("a pod in no group bound with no groups or team queues asked for a pass")
	}
	q.counting.Store(true)
	q.podUpdate(pending, bound)
	if !q.refreshing.Load() {
		t.Fatal("a pod in no group bound while groups wait asked for no pass")
	}
}

func TestStuckPartial(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	q := New(nil, nil, Options{PartialGroup: time.Minute, Clock: clk})
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	}
	groups := map[string]*Group{
		// Cut short: two of four bound, two pending.
		"ns/cut": {Key: "ns/cut", MinAvailable: 4, Bound: []*corev1.Pod{pod("a", "n1"), pod("b", "n1")}, Pending: []*corev1.Pod{pod("c", ""), pod("d", "")}},
		// Lost a member, none pending: its controller's to mend.
		"ns/lost": {Key: "ns/lost", MinAvailable: 4, Bound: []*corev1.Pod{pod("e", "n1"), pod("f", "n1"), pod("g", "n1")}},
		// Being placed.
		"ns/placing": {Key: "ns/placing", MinAvailable: 2, Bound: []*corev1.Pod{pod("h", "n2")}, Pending: []*corev1.Pod{pod("i", "")}},
		// None bound, but a pending member's DRA claim allocated.
		"ns/claimed": {Key: "ns/claimed", MinAvailable: 2, Pending: []*corev1.Pod{pod("j", ""), pod("k", "")},
			HeldClaims: []HeldClaim{{Pod: pod("j", ""), Claim: &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j-gpu"}}}}},
		// None bound, no claim allocated: waiting whole.
		"ns/waiting": {Key: "ns/waiting", MinAvailable: 2, Pending: []*corev1.Pod{pod("l", ""), pod("m", "")}},
	}
	plan := Plan{Decisions: map[string]Decision{
		"ns/claimed": {Reason: ReasonWaitingForCapacity, Message: "no devices"},
		"ns/waiting": {Reason: ReasonWaitingForCapacity, Message: "no devices"},
		"ns/cut":     {Reason: ReasonWaitingForCapacity, Message: "no room"},
		"ns/lost":    {Reason: ReasonWaitingForMembers},
		"ns/placing": admitted,
	}}
	if stuck := q.stuckPartial(plan, groups, clk.Now()); len(stuck) != 0 {
		t.Fatalf("released at once: %+v", stuck)
	}
	clk.Step(59 * time.Second)
	if stuck := q.stuckPartial(plan, groups, clk.Now()); len(stuck) != 0 {
		t.Fatalf("released before PartialGroup: %+v", stuck)
	}
	clk.Step(time.Second)
	stuck := q.stuckPartial(plan, groups, clk.Now())
	slices.SortFunc(stuck, func(a, b Preemption) int { return strings.Compare(a.Group, b.Group) })
	if len(stuck) != 2 {
		t.Fatalf("released %+v, want ns/claimed and ns/cut", stuck)
	}
	if c := stuck[0]; c.Group != "ns/claimed" || len(c.Victims) != 0 || len(c.Deallocate) != 1 || c.Deallocate[0].Claim.Name != "j-gpu" || !c.partial {
		t.Errorf("released %+v, want the claim of ns/claimed's pending member deallocated, no pod deleted", c)
	}
	if c := stuck[1]; c.Group != "ns/cut" || len(c.Victims) != 2 || len(c.Deallocate) != 0 || !c.partial || !strings.Contains(c.why, "no room") {
		t.Fatalf("released %+v, want the bound members of ns/cut with the reason", c)
	}
	delete(groups, "ns/claimed")
	// Whole again, then cut short again: the wait starts over.
	groups["ns/cut"].Pending = nil
	_ = q.stuckPartial(plan, groups, clk.Now())
	groups["ns/cut"].Pending = []*corev1.Pod{pod("c", "")}
	_ = q.stuckPartial(plan, groups, clk.Now())
	clk.Step(30 * time.Second)
	if stuck := q.stuckPartial(plan, groups, clk.Now()); len(stuck) != 0 {
		t.Errorf("released 30s after it was cut short again: %+v", stuck)
	}
}
