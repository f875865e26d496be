package simcluster

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The observer sees, on the cluster's clock, a pod bound and ended after
// its run, and a pod the scheduler cannot place with the scheduler's
// reason; Wait returns as soon as a pod is done.
func TestPodObserver(t *testing.T) {
	c := startTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods, err := ObservePods(ctx, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pods.Stop()
	if !pods.LastChange().IsZero() {
		t.Errorf("LastChange %v before any pod, want zero", pods.LastChange())
	}
	start := c.Now()
	// The cluster has one node of two cards: three cards never fit.
	for _, p := range []*corev1.Pod{testPod("runs", "aisched", "1", time.Minute), testPod("too-big", "aisched", "3", time.Minute)} {
		if _, err := c.Client().CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bound, err := pods.Wait(ctx, "default/runs", func(s PodState) bool { return !s.Bound.IsZero() })
	if err != nil {
		t.Fatal(err)
	}
	if bound.Bound.Before(start) || bound.Pod.Spec.NodeName != "gpu-0" {
		t.Errorf("pod runs: bound at %v on %q, want at or after %v on gpu-0", bound.Bound, bound.Pod.Spec.NodeName, start)
	}
	if err := c.RunUntil(ctx, start.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	ran, _ := pods.Pod("default/runs")
	if ran.Ended.IsZero() || ran.Ended.Sub(start) < time.Minute || ran.Ended.Sub(start) > 2*time.Minute {
		t.Errorf("pod runs ended at start+%v, want after its minute's run", ran.Ended.Sub(start))
	}
	if !pods.LastChange().Equal(ran.Ended) {
		t.Errorf("LastChange %v, want the end of pod runs %v", pods.LastChange(), ran.Ended)
	}
	big, err := pods.Wait(ctx, "default/too-big", func(s PodState) bool { return s.NotScheduled() != nil })
	if err != nil {
		t.Fatal(err)
	}
	if why := big.NotScheduled(); why.Reason != corev1.PodReasonUnschedulable || !big.Bound.IsZero() {
		t.Errorf("pod too-big: %s: %s, bound at %v; want Unschedulable and never bound", why.Reason, why.Message, big.Bound)
	}
	if _, ok := pods.Pod("default/missing"); ok {
		t.Error("the observer has a state for a pod that does not exist")
	}
	// Refresh reads a pod as it is now.
	if err := pods.Refresh(ctx, "default/runs"); err != nil {
		t.Fatal(err)
	}
	if err := pods.Refresh(ctx, "default/missing"); err == nil {
		t.Error("Refresh of a pod that does not exist: no error")
	}
	cancelled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	if _, err := pods.Wait(cancelled, "default/too-big", func(s PodState) bool { return !s.Bound.IsZero() }); err == nil {
		t.Error("Wait for a pod that never binds returned without error after its context ended")
	}
}

// The observer tells notify of each change in order, a deletion last,
// and records when a running pod was deleted; its deletion is a change
// that LastChange reports.
func TestPodObserverDeleted(t *testing.T) {
	c := startTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var events []PodEvent
	pods, err := ObservePods(ctx, c, func(ev PodEvent) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pods.Stop()
	start := c.Now()
	if _, err := c.Client().CoreV1().Pods("default").Create(ctx, testPod("runs", "aisched", "1", time.Hour), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Wait(ctx, "default/runs", func(s PodState) bool { return !s.Bound.IsZero() }); err != nil {
		t.Fatal(err)
	}
	if err := c.RunUntil(ctx, start.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := c.Client().CoreV1().Pods("default").Delete(ctx, "runs", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone, err := pods.Wait(ctx, "default/runs", func(s PodState) bool { return !s.Deleted.IsZero() })
	if err != nil {
		t.Fatal(err)
	}
	if gone.Deleted.Sub(start) < time.Minute || !gone.Ended.IsZero() {
		t.Errorf("pod runs deleted at start+%v, ended at %v; want after the minute it ran, never ended", gone.Deleted.Sub(start), gone.Ended)
	}
	if !pods.LastChange().Equal(gone.Deleted) {
		t.Errorf("LastChange %v, want the deletion of the running pod %v", pods.LastChange(), gone.Deleted)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) < 2 || events[0].Deleted || events[0].Pod.Name != "runs" {
		t.Fatalf("events %+v, want the pod's creation first", events)
	}
	last := events[len(events)-1]
	if !last.Deleted || !last.At.Equal(gone.Deleted) {
		t.Errorf("last event deleted=%v at %v, want the deletion at %v", last.Deleted, last.At, gone.Deleted)
	}
	for _, ev := range events[:len(events)-1] {
		if ev.Deleted {
			t.Errorf("a deletion at %v before the last event", ev.At)
		}
	}
}
