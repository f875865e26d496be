package jobqueue

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
