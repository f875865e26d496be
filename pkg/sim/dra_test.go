package sim

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/sim/trace"
	"github.com/aisched/aisched/pkg/simcluster"
)

func TestDRAClaim(t *testing.T) {
	shared := draClaim("s", trace.Pod{NumGPU: 1, GPUMilli: 250, GPUSpec: []string{"T4", "V100M16"}})
	r := shared.Spec.Devices.Requests[0].Exactly
	if q := r.Capacity.Requests["shares"]; r.Count != 1 || q.Value() != 250 || len(shared.Spec.Devices.Constraints) != 0 {
		t.Errorf("shared pod: count %d, shares %s, constraints %v; want 1, 250, none", r.Count, q.String(), shared.Spec.Devices.Constraints)
	}
	if len(r.Selectors) != 1 || r.Selectors[0].CEL.Expression != "device.attributes['gpu.nvidia.com'].productName in ['Tesla-T4', 'Tesla-V100-SXM2-16GB']" {
		t.Errorf("selectors %+v: want the trace's models as the nodes name them", r.Selectors)
	}
	whole := draClaim("w", trace.Pod{NumGPU: 4, GPUMilli: 1000})
	r = whole.Spec.Devices.Requests[0].Exactly
	if q := r.Capacity.Requests["shares"]; r.Count != 4 || q.Value() != 1000 || len(r.Selectors) != 0 {
		t.Errorf("4-card pod: count %d, shares %s, selectors %v; want 4 cards of all 1000 shares, any model", r.Count, q.String(), r.Selectors)
	}
	if c := whole.Spec.Devices.Constraints; len(c) != 1 || ptr.Deref(c[0].DistinctAttribute, "") != "gpu.nvidia.com/uuid" {
		t.Errorf("4-card pod: constraints %+v, want distinct cards", c)
	}
}

// allocated is a claim named name, reserved for the pod of that name,
// given shares of each device.
func allocated(name string, shares int64, devices ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: name, UID: types.UID(name)}}}}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "gpu", Driver: "gpu.nvidia.com", Pool: "n1", Device: d, ShareID: ptr.To(types.UID(name + "-" + d)),
			ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"shares": *resource.NewQuantity(shares, resource.DecimalSI)}})
	}
	return c
}

func boundPod(name string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)}, Spec: corev1.PodSpec{NodeName: "n1",
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(name)}}}}
}

func TestClaimedMilli(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(allocated("a", 1000, "gpu-0", "gpu-1"), allocated("b", 600, "gpu-2"), allocated("c", 500, "gpu-2"))
	claims := client.ResourceV1().ResourceClaims("default")
	sum, err := claimedMilli(ctx, claims, []corev1.Pod{boundPod("a"), boundPod("b")})
	if err != nil || sum != 2600 {
		t.Errorf("claimedMilli = %d, %v; want 2600", sum, err)
	}
	if _, err := claimedMilli(ctx, claims, []corev1.Pod{boundPod("b"), boundPod("c")}); err == nil || !strings.Contains(err.Error(), "device n1/gpu-2: given 1100 of its 1000 shares") {
		t.Errorf("an overcommitted device: err %v, want it named", err)
	}
	if _, err := claimedMilli(ctx, claims, []corev1.Pod{boundPod("d")}); err == nil || !strings.Contains(err.Error(), "pod d is bound without its claim default/d allocated") {
		t.Errorf("a pod bound without its claim: err %v", err)
	}
}

// A replay through DRA on the fast engine places every GPU pod through its
// claim, and the replay's own check (claimedMilli) finds no device given
// beyond its shares: the scheduler's cache of claims takes in the
// allocations it writes (simcluster's resource versions of claims).
func TestReplayDRAFast(t *testing.T) {
	nodes, pods, err := trace.ReadFiles("trace/testdata/nodes.csv", "trace/testdata/pods.csv")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Replay(context.Background(), ReplayOptions{
		Engine: simcluster.Fast, Name: "sample", Nodes: nodes, Pods: pods, Policies: ProfilePolicies("default-scheduler", "aisched"),
		Seeds: []int64{7}, Inflate: 1.3, DRA: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	seq := trace.Workload(pods, 7, 1.3, trace.CapacityMilli(nodes))
	for _, p := range rep.Policies {
		res := p.Runs[0].Result
		if res.InexpressiblePods == nil || *res.InexpressiblePods != 0 {
			t.Errorf("%s: inexpressible pods %v, want none through DRA", p.Name, res.InexpressiblePods)
		}
		if res.UnallocatedGPUPct == nil || res.PendingPods >= len(seq) {
			t.Errorf("%s: unallocated GPU %v, %d of %d pods pending: want pods bound through their claims", p.Name, res.UnallocatedGPUPct, res.PendingPods, len(seq))
		}
	}
}
