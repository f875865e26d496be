package sim

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcev1client "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
	"github.com/aisched/aisched/pkg/sim/trace"
)

// A trace replayed through DRA: the nodes' cards are published by NVIDIA's
// DRA driver with consumable shares, and each GPU pod claims its cards
// (count cards of all their shares, distinct) or its share of one card
// (gpu_milli shares), with a selector of the trace's models. Every policy
// can then express every pod: upstream's DynamicResources (first fit) and
// aisched's GPUClaims place the same claims.

// DRAShares are the consumable shares of one card (the driver's
// --consumable-shares): thousandths, as the trace's gpu_milli.
const DRAShares = 1000

// draPools has NVIDIA's DRA driver publish the cards of the pools.
func draPools(pools []clusterfile.NodePool) {
	for i := range pools {
		if g := pools[i].GPUs; g != nil {
			g.DRA = &clusterfile.DRA{ConsumableShares: fmt.Sprint(DRAShares)}
		}
	}
}

// draPod creates the claim of a GPU pod of the trace and returns the pod
// that uses it; a pod without GPUs is the trace's pod as it is.
func draPod(ctx context.Context, claims resourcev1client.ResourceClaimInterface, tp trace.Pod, profile string) (*corev1.Pod, error) {
	plain := tp
	plain.NumGPU, plain.GPUMilli, plain.GPUSpec = 0, 0, nil
	pod, err := tracePod(plain, profile, true)
	if err != nil || tp.TotalGPUMilli() == 0 {
		return pod, err
	}
	claim := draClaim(pod.Name, tp)
	if _, err := claims.Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("claim of pod %s: %w", tp.Name, err)
	}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	return pod, nil
}

// draClaim is the claim of a GPU pod of the trace, named name.
func draClaim(name string, tp trace.Pod) *resourceapi.ResourceClaim {
	count, milli := int64(tp.NumGPU), tp.GPUMilli
	if tp.Shared() {
		count = 1
	}
	req := &resourceapi.ExactDeviceRequest{
		DeviceClassName: nvidiadra.GPUClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
		Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			"shares": *resource.NewQuantity(milli, resource.DecimalSI)}},
	}
	if len(tp.GPUSpec) > 0 {
		models := make([]string, len(tp.GPUSpec))
		for i, m := range tp.GPUSpec {
			models[i] = fmt.Sprintf("'%s'", trace.NodeModel(m))
		}
		req.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.attributes['%s'].productName in [%s]", nvidiadra.Driver, strings.Join(models, ", "))}}}
	}
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: req}}}},
	}
	if count > 1 {
		// Shared devices may be given twice to one request: the cards of a
		// multi-card pod must differ.
		claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{
			Requests: []string{"gpu"}, DistinctAttribute: ptr.To(resourceapi.FullyQualifiedName(nvidiadra.Driver + "/uuid"))}}
	}
	return claim
}

// claimedMilli sums the shares the claims of the bound pods were given, in
// thousandths of a card, checking that no card gives more than it has.
func claimedMilli(ctx context.Context, claims resourcev1client.ResourceClaimInterface, pods []corev1.Pod) (int64, error) {
	list, err := claims.List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	byName := map[string]*resourceapi.ResourceClaim{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	var sum int64
	perCard := map[string]int64{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || len(p.Spec.ResourceClaims) == 0 {
			continue
		}
		c := byName[ptr.Deref(p.Spec.ResourceClaims[0].ResourceClaimName, "")]
		if c == nil || c.Status.Allocation == nil {
			return 0, fmt.Errorf("pod %s is bound without its claim allocated", p.Name)
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			q, ok := r.ConsumedCapacity["shares"]
			if !ok {
				return 0, fmt.Errorf("claim %s: device %s/%s given without a count of shares", c.Name, r.Pool, r.Device)
			}
			card := r.Pool + "/" + r.Device
			perCard[card] += q.Value()
			if perCard[card] > DRAShares {
				return 0, fmt.Errorf("device %s is given %d of its %d shares", card, perCard[card], DRAShares)
			}
			sum += q.Value()
		}
	}
	return sum, nil
}
