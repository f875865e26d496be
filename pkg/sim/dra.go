package sim

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcev1client "k8s.io/client-go/kubernetes/typed/resource/v1"

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
	nvidiadra.UseClaim(pod, claim.Name)
	return pod, nil
}

// draClaim is the claim of a GPU pod of the trace, named name: its cards,
// each with its shares, of the trace's models.
func draClaim(name string, tp trace.Pod) *resourceapi.ResourceClaim {
	r := nvidiadra.ClaimRequest{Count: int64(tp.NumGPU), Shares: tp.GPUMilli}
	if tp.Shared() {
		r.Count = 1
	}
	for _, m := range tp.GPUSpec {
		r.Models = append(r.Models, trace.NodeModel(m))
	}
	return nvidiadra.Claim(metav1.NamespaceDefault, name, r)
}

// claimedMilli sums the shares the claims of the bound pods were given, in
// thousandths of a card, checking that no card gives more than it has.
func claimedMilli(ctx context.Context, claims resourcev1client.ResourceClaimInterface, pods []corev1.Pod) (int64, error) {
	list, err := claims.List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	g, err := nvidiadra.CheckGiven(pods, list.Items, DRAShares)
	return g.Shares, err
}
