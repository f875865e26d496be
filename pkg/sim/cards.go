package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/simcluster"
)

// cardsOf returns the cards of each node of the pools, by node name, as
// the simulated nodes publish them.
func cardsOf(pools []clusterfile.NodePool) func(node string) *gpu.Set {
	sets := map[string]*gpu.Set{}
	for i := range pools {
		p := &pools[i]
		for j := range p.Count {
			name := p.NodeName(j)
			if inv := nodesim.BuildInventory(p, name); inv != nil {
				sets[name] = gpu.NewSet(gpu.FromInventory(inv))
			}
		}
	}
	return func(node string) *gpu.Set { return sets[node] }
}

// checkCards audits the cards the cluster's pods hold and compares the
// scheduler's record with the simulated kubelets' (compareHolders): a run
// whose cards are overcommitted, or whose kubelets hold other cards than
// the scheduler assigned, reports no number.
func checkCards(ctx context.Context, c simcluster.Cluster, pools []clusterfile.NodePool) error {
	list := func(ctx context.Context) ([]corev1.Pod, error) {
		l, err := c.Client().CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	}
	pods, err := list(ctx)
	if err != nil {
		return err
	}
	if err := auditCards(pods, cardsOf(pools)); err != nil {
		return err
	}
	return compareHolders(ctx, list, c.KubeletHolders)
}

// auditCards checks the cards the pods hold with the GPU ledger's Audit:
// a run whose cards are overcommitted reports no number.
func auditCards(pods []corev1.Pod, cards func(string) *gpu.Set) error {
	ptrs := make([]*corev1.Pod, len(pods))
	for i := range pods {
		ptrs[i] = &pods[i]
	}
	if problems := gpuledger.Audit(cards, ptrs); len(problems) > 0 {
		return fmt.Errorf("the cards of bound pods are overcommitted: %s", strings.Join(problems, "; "))
	}
	return nil
}

// compareHolders compares the scheduler's record of which pod holds which
// card (the pods' assignments, as the GPU ledger reads them) with the
// simulated kubelets' own, which play the device layer. Pods without an
// assignment (placed by a profile without GPUFit) are left out: their
// cards are the kubelet's choice. A pod that binds or ends while the two
// are read makes them differ for a moment, so they are read again for up
// to two seconds before a difference counts.
func compareHolders(ctx context.Context, list func(context.Context) ([]corev1.Pod, error), kubelets func() map[string]string) error {
	var diff string
	for range 10 {
		pods, err := list(ctx)
		if err != nil {
			return err
		}
		ptrs := make([]*corev1.Pod, len(pods))
		assigned := map[string]bool{}
		for i := range pods {
			ptrs[i] = &pods[i]
			if _, _, ok := gpuledger.HoldingOf(&pods[i]); ok {
				assigned[pods[i].Namespace+"/"+pods[i].Name] = true
			}
		}
		scheduler := gpuledger.Holders(ptrs)
		kubelet := only(kubelets(), assigned)
		if diff = holdersDiff(scheduler, kubelet); diff == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("the simulated kubelets' cards differ from the scheduler's: %s", diff)
}

// only keeps, in a holders table, the holders whose pod is in keep.
func only(table map[string]string, keep map[string]bool) map[string]string {
	out := map[string]string{}
	for card, who := range table {
		var kept []string
		for _, h := range strings.Split(who, ",") {
			pod, _, _ := strings.Cut(h, "@")
			if keep[pod] {
				kept = append(kept, h)
			}
		}
		if len(kept) > 0 {
			out[card] = strings.Join(kept, ",")
		}
	}
	return out
}

// holdersDiff lists the cards whose holders differ, "" when none does.
func holdersDiff(scheduler, kubelet map[string]string) string {
	cards := slices.Sorted(maps.Keys(scheduler))
	for c := range kubelet {
		if _, ok := scheduler[c]; !ok {
			cards = append(cards, c)
		}
	}
	var out []string
	for _, c := range cards {
		if scheduler[c] != kubelet[c] {
			out = append(out, fmt.Sprintf("card %s: scheduler %q, kubelet %q", c, scheduler[c], kubelet[c]))
		}
	}
	return strings.Join(out, "; ")
}
