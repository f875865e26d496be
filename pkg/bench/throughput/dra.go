package throughput

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
)

// Whole-GPU pods through DRA (Options.DRA): the nodes' cards are published
// by NVIDIA's DRA driver (ResourceSlices, one device per card, no
// sharing), and each measured pod uses a ResourceClaim of its own for one
// device of the driver's GPU class instead of nvidia.com/gpu. Upstream's
// DynamicResources allocates the claims under default-scheduler, GPUClaims
// under aisched. The claims are created with the pods, before the
// scheduler starts, so the resourceclaim controller plays no part; once
// every pod is bound, checkClaims fails the run unless every claim was
// allocated, and no device given twice.

// checkDRA checks the options a DRA run needs.
func checkDRA(opts Options) error {
	switch {
	case !opts.DRA:
		return nil
	case !opts.GPU:
		return fmt.Errorf("--dra publishes the cards of GPU nodes through NVIDIA's DRA driver: give --gpu too")
	case opts.Shared:
		return fmt.Errorf("--dra with --shared: the DRA pods claim whole cards; drop --shared")
	case opts.Fill > 0:
		return fmt.Errorf("--fill %g with --dra: the fill pods hold cards through nvidia.com/gpu, which DRA nodes do not have; drop --fill", opts.Fill)
	}
	return nil
}

// draPool has NVIDIA's DRA driver publish the pool's cards whole, when
// the options ask for DRA.
func draPool(pool *clusterfile.NodePool, opts Options) {
	if opts.DRA && pool.GPUs != nil {
		pool.GPUs.DRA = &clusterfile.DRA{}
	}
}

// claimPod creates, with DRA, the claim of the pod (named after it) for
// one whole GPU, and makes the pod use it; without DRA it does nothing.
func claimPod(ctx context.Context, client kubernetes.Interface, opts Options, pod *corev1.Pod) error {
	if !opts.DRA {
		return nil
	}
	claim := nvidiadra.Claim(pod.Namespace, pod.Name, nvidiadra.ClaimRequest{Count: 1})
	if _, err := client.ResourceV1().ResourceClaims(pod.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("claim of pod %s: %w", pod.Name, err)
	}
	nvidiadra.UseClaim(pod, claim.Name)
	return nil
}

// checkClaims checks, with DRA, that each of the n measured pods is bound
// with its claim allocated and reserved for it, on one device of its node,
// and that no device was given twice, and returns how many nodes the pods
// are on (how tightly the profile packed them).
func checkClaims(ctx context.Context, client kubernetes.Interface, opts Options) (nodes int, err error) {
	if !opts.DRA {
		return 0, nil
	}
	pods, err := client.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	claims, err := client.ResourceV1().ResourceClaims(benchNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	measured, used := map[string]bool{}, map[string]bool{}
	for i := range opts.Pods {
		measured[benchPodName(i)] = true
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !measured[p.Name] {
			continue
		}
		delete(measured, p.Name)
		if p.Spec.NodeName == "" || len(p.Spec.ResourceClaims) == 0 {
			return 0, fmt.Errorf("pod %s: not bound with a claim", p.Name)
		}
		used[p.Spec.NodeName] = true
	}
	if len(measured) > 0 {
		return 0, fmt.Errorf("%d of the %d pods are gone", len(measured), opts.Pods)
	}
	given, err := nvidiadra.CheckGiven(pods.Items, claims.Items, 0)
	if err != nil {
		return 0, fmt.Errorf("the DRA allocations: %w", err)
	}
	if given.Devices != opts.Pods {
		return 0, fmt.Errorf("the DRA allocations: %d devices given to the claims of %d pods, want one each", given.Devices, opts.Pods)
	}
	return len(used), nil
}
