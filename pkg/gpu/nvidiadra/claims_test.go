package nvidiadra

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestClaim(t *testing.T) {
	whole := Claim("ns", "w", ClaimRequest{Count: 1})
	r := whole.Spec.Devices.Requests[0]
	if r.Name != ClaimName || r.Exactly.DeviceClassName != GPUClass || r.Exactly.Count != 1 || r.Exactly.Capacity != nil ||
		len(r.Exactly.Selectors) != 0 || len(whole.Spec.Devices.Constraints) != 0 {
		t.Errorf("one whole card: %+v, constraints %v; want one device of class %s, no capacity, selector or constraint", r, whole.Spec.Devices.Constraints, GPUClass)
	}
	two := Claim("ns", "s", ClaimRequest{Count: 2, Shares: 500, Models: []string{"A", "B"}})
	r = two.Spec.Devices.Requests[0]
	if q := r.Exactly.Capacity.Requests[SharesCapacity]; q.Value() != 500 {
		t.Errorf("shares %s, want 500", q.String())
	}
	if got, want := r.Exactly.Selectors[0].CEL.Expression, "device.attributes['gpu.nvidia.com'].productName in ['A', 'B']"; got != want {
		t.Errorf("selector %q, want %q", got, want)
	}
	if c := two.Spec.Devices.Constraints; len(c) != 1 || ptr.Deref(c[0].DistinctAttribute, "") != "gpu.nvidia.com/uuid" {
		t.Errorf("two cards: constraints %+v, want distinct cards", c)
	}

	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	UseClaim(pod, "w")
	want := []corev1.PodResourceClaim{{Name: ClaimName, ResourceClaimName: ptr.To("w")}}
	if d := cmp.Diff(want, pod.Spec.ResourceClaims); d != "" || len(pod.Spec.Containers[0].Resources.Claims) != 1 {
		t.Errorf("pod claims (-want,+got):\n%s\ncontainer claims %v", d, pod.Spec.Containers[0].Resources.Claims)
	}
}

// given is a claim named name, allocated and reserved for the pod of that
// name, with one result per device ("node/gpu-0"); shares > 0 gives
// shares of each, 0 the devices whole.
func given(name string, shares int64, devices ...string) resourceapi.ResourceClaim {
	c := resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: name, UID: types.UID(name)}}}}
	for _, d := range devices {
		pool, dev, _ := strings.Cut(d, "/")
		r := resourceapi.DeviceRequestAllocationResult{Request: ClaimName, Driver: Driver, Pool: pool, Device: dev}
		if shares > 0 {
			r.ShareID = ptr.To(types.UID(name + d))
			r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{SharesCapacity: *resource.NewQuantity(shares, resource.DecimalSI)}
		}
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, r)
	}
	return c
}

// bound is a pod named name on node using the claim named claim.
func bound(name, node, claim string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)}, Spec: corev1.PodSpec{NodeName: node,
		ResourceClaims: []corev1.PodResourceClaim{{Name: ClaimName, ResourceClaimName: ptr.To(claim)}}}}
}

func TestCheckGiven(t *testing.T) {
	notReserved := given("r", 0, "n1/gpu-3")
	notReserved.Status.ReservedFor = nil
	unallocated := given("u", 0)
	unallocated.Status.Allocation = nil
	for _, tc := range []struct {
		name    string
		pods    []corev1.Pod
		claims  []resourceapi.ResourceClaim
		shares  int64
		want    Given
		wantErr string
	}{{
		name:   "whole cards, each once",
		pods:   []corev1.Pod{bound("a", "n1", "a"), bound("b", "n1", "b"), bound("c", "n2", "c")},
		claims: []resourceapi.ResourceClaim{given("a", 0, "n1/gpu-0", "n1/gpu-1"), given("b", 0, "n1/gpu-2"), given("c", 0, "n2/gpu-0")},
		want:   Given{Devices: 4},
	}, {
		name:    "a whole card twice",
		pods:    []corev1.Pod{bound("a", "n1", "a"), bound("b", "n1", "b")},
		claims:  []resourceapi.ResourceClaim{given("a", 0, "n1/gpu-0", "n1/gpu-1"), given("b", 0, "n1/gpu-1")},
		wantErr: "device n1/gpu-1: given twice: whole to claim ns/a and to claim ns/b",
	}, {
		name:    "shared, then whole",
		pods:    []corev1.Pod{bound("a", "n1", "a"), bound("b", "n1", "b")},
		claims:  []resourceapi.ResourceClaim{given("a", 250, "n1/gpu-0"), given("b", 0, "n1/gpu-0")},
		shares:  1000,
		wantErr: "device n1/gpu-0: given twice: shared with claim ns/a, then whole to claim ns/b",
	}, {
		// 1000 whole + 600 + 400 shares = 2000.
		name:   "shares within the card",
		pods:   []corev1.Pod{bound("a", "n1", "a"), bound("b", "n1", "b"), bound("c", "n1", "c")},
		claims: []resourceapi.ResourceClaim{given("a", 0, "n1/gpu-0"), given("b", 600, "n1/gpu-1"), given("c", 400, "n1/gpu-1")},
		shares: 1000,
		want:   Given{Devices: 3, Shares: 2000},
	}, {
		name:    "shares beyond the card",
		pods:    []corev1.Pod{bound("b", "n1", "b"), bound("c", "n1", "c")},
		claims:  []resourceapi.ResourceClaim{given("b", 600, "n1/gpu-1"), given("c", 500, "n1/gpu-1")},
		shares:  1000,
		wantErr: "device n1/gpu-1: given 1100 of its 1000 shares",
	}, {
		name:    "a device of another node",
		pods:    []corev1.Pod{bound("a", "n2", "a")},
		claims:  []resourceapi.ResourceClaim{given("a", 0, "n1/gpu-0")},
		wantErr: "claim ns/a of pod a on node n2 is given device n1/gpu-0 of another node",
	}, {
		name:    "not allocated",
		pods:    []corev1.Pod{bound("u", "n1", "u")},
		claims:  []resourceapi.ResourceClaim{unallocated},
		wantErr: "pod u is bound without its claim ns/u allocated",
	}, {
		name:    "no claim",
		pods:    []corev1.Pod{bound("x", "n1", "x")},
		wantErr: "pod x is bound without its claim ns/x allocated",
	}, {
		name:    "not reserved",
		pods:    []corev1.Pod{bound("r", "n1", "r")},
		claims:  []resourceapi.ResourceClaim{notReserved},
		wantErr: "pod r is bound, but its claim ns/r is not reserved for it",
	}, {
		name:   "pending pods are not checked",
		pods:   []corev1.Pod{bound("u", "", "u")},
		claims: []resourceapi.ResourceClaim{unallocated},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CheckGiven(tc.pods, tc.claims, tc.shares)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("CheckGiven: %v, want an error containing %q", err, tc.wantErr)
				}
			case err != nil:
				t.Errorf("CheckGiven: %v", err)
			default:
				if d := cmp.Diff(tc.want, got); d != "" {
					t.Errorf("CheckGiven (-want,+got):\n%s", d)
				}
			}
		})
	}
}

// A claim two pods share is counted once, and must be reserved for both.
func TestCheckGivenSharedClaim(t *testing.T) {
	c := given("a", 0, "n1/gpu-0")
	pods := []corev1.Pod{bound("a", "n1", "a"), bound("b", "n1", "a")}
	if _, err := CheckGiven(pods, []resourceapi.ResourceClaim{c}, 0); err == nil || !strings.Contains(err.Error(), "pod b is bound, but its claim ns/a is not reserved for it") {
		t.Errorf("a claim not reserved for its second pod: %v", err)
	}
	c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: "b", UID: "b"})
	got, err := CheckGiven(pods, []resourceapi.ResourceClaim{c}, 0)
	if err != nil || got.Devices != 1 {
		t.Errorf("CheckGiven = %+v, %v; want the one device counted once", got, err)
	}
}
