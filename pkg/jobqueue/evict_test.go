package jobqueue

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestEvictDeallocates: a partial group's release deallocates the claims
// of its pending members, as upstream's PostFilter does, says so on the
// pod, and does it once within evictAgain.
func TestEvictDeallocates(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m1", UID: "pod-uid"}}
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m1-gpu", UID: "claim-uid"},
		Status: resourceapi.ResourceClaimStatus{
			Allocation:  &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "n1", Device: "gpu-0"}}}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "m1", UID: "pod-uid"}},
		},
	}
	client := fake.NewClientset(claim)
	recorder := events.NewFakeRecorder(10)
	clk := clocktesting.NewFakeClock(time.Now())
	e := newEvictor(client, recorder, clk)
	p := Preemption{Group: "ns/g", Deallocate: []HeldClaim{{Pod: pod, Claim: claim}}, partial: true, why: "WaitingForCapacity no devices"}
	ctx := context.Background()

	e.evict(ctx, p)
	got, err := client.ResourceV1().ResourceClaims("ns").Get(ctx, "m1-gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Allocation != nil || len(got.Status.ReservedFor) != 0 {
		t.Errorf("claim status after the release: %+v, want neither allocation nor reservation", got.Status)
	}
	select {
	case ev := <-recorder.Events:
		if !strings.Contains(ev, ReasonClaimDeallocated) || !strings.Contains(ev, "its pod group ns/g held fewer") || !strings.Contains(ev, "its claim m1-gpu was deallocated") {
			t.Errorf("event %q", ev)
		}
	default:
		t.Error("no event on the pod")
	}
	// Asked again within evictAgain: nothing is written.
	client.ClearActions()
	e.evict(ctx, p)
	if n := len(client.Actions()); n != 0 {
		t.Errorf("%d writes when released again within evictAgain, want none", n)
	}
}
