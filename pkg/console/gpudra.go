package console

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aisched/aisched/pkg/gpuledger/dra"
	"github.com/aisched/aisched/pkg/podgroup"
)

// DRAObjects are the DRA objects the GPU map reads: ResourceSlices and
// ResourceClaims.
type DRAObjects struct {
	Slices []resourcev1.ResourceSlice
	Claims []resourcev1.ResourceClaim
}

// observe feeds the objects to the DRA ledger.
func (d DRAObjects) observe(devices *dra.Ledger) {
	for i := range d.Slices {
		devices.ObserveSlice(&d.Slices[i])
	}
	for i := range d.Claims {
		devices.ObserveClaim(&d.Claims[i])
	}
}

// listDRA lists the slices (opts selects them) and every claim; none
// where the cluster serves no resource.k8s.io/v1 or the user may not list
// them: the map then shows no DRA GPUs.
func listDRA(ctx context.Context, client kubernetes.Interface, opts metav1.ListOptions) (DRAObjects, error) {
	var out DRAObjects
	sl, err := client.ResourceV1().ResourceSlices().List(ctx, opts)
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	claims, err := client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	out.Slices, out.Claims = sl.Items, claims.Items
	return out, nil
}

// addDRAHolders adds the claims that hold a DRA node's devices to its
// holders: a whole GPU to the pods it is reserved for, a MIG device or a
// share of a shared device by its name, profile and claim; with the pod
// groups of those pods (pods: the node's, by namespace/name).
func addDRAHolders(out map[int]cardHolders, held map[int][]dra.Holder, pods map[string]*corev1.Pod) {
	for card, list := range held {
		h := out[card]
		for _, d := range list {
			who := strings.Join(d.Pods, ", ")
			if who == "" {
				who = d.Claim
			}
			for _, name := range d.Pods {
				if p := pods[name]; p != nil {
					if group, ok := podgroup.KeyOf(p); ok && !slices.Contains(h.groups, group) {
						h.groups = append(h.groups, group)
					}
				}
			}
			if d.Share.IsZero() && !d.Device.MIG {
				h.whole = who
				continue
			}
			h.shares = append(h.shares, CardShare{Pod: who, Milli: d.Share.Milli, MemMiB: d.Share.MemMiB,
				Claim: d.Claim, Device: d.Device.Device, Profile: d.Device.Profile})
		}
		out[card] = h
	}
}
