package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
	"github.com/aisched/aisched/pkg/jobqueue"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/scheduler"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// TestMultiCardShares: a share of each of several cards, in the peers'
// forms as their documentation writes them (HAMi's examples/nvidia/
// default_use.yaml and use_memory_fraction.yaml, KAI's
// gpu-fraction-num-devices) and aisched's own, runs on that many distinct
// cards of one node, each with room for the share; a share of memory in
// percent is that percent of the chosen cards; the scheduler's record
// (gpuledger.Audit, Holders) and the simulated kubelets' device layer
// agree card by card. A pod that asks for more cards than any node has
// says so on the pod. Then the job queue places gangs of such pods whole
// or not at all: one whose second member cannot have three cards with
// room is held, nothing bound.
func TestMultiCardShares(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - name: v100
    count: 1
    cpu: "32"
    memory: 128Gi
    gpus: {count: 4, model: Tesla-V100-SXM2-32GB, memoryMiB: 32768}
  - name: t4
    count: 1
    cpu: "32"
    memory: 128Gi
    gpus: {count: 2, model: Tesla-T4, memoryMiB: 16384}
`)
	ctx := context.Background()
	ns := createNamespace(t, c.Client)
	mk := func(name string) *utiltesting.PodWrapper {
		return utiltesting.MakePod(name, ns).SchedulerName(scheduler.AischedProfile)
	}
	wantCards := map[string]int{"hami-default-use": 2, "hami-memory-fraction": 2, "kai-two-devices": 2, "aisched-three": 3}
	createPods(t, c,
		limits(mk("hami-default-use").Obj(), "nvidia.com/gpu", "2", "nvidia.com/gpumem", "3000", "nvidia.com/gpucores", "30"),
		limits(mk("hami-memory-fraction").Obj(), "nvidia.com/gpu", "2", "nvidia.com/gpumem-percentage", "50", "nvidia.com/gpucores", "30"),
		mk("kai-two-devices").Req(corev1.ResourceCPU, "100m").Annotation(gpu.KAIFractionAnnotation, "0.5").Annotation(gpu.KAINumDevicesAnnotation, "2").Obj(),
		// Three cards: only the V100 node has them.
		mk("aisched-three").Req(corev1.ResourceCPU, "100m").Annotation(gpu.MilliAnnotation, "200").Annotation(gpu.GPUMemAnnotation, "4000").
			Annotation(gpu.CardsAnnotation, "3").Obj(),
		mk("five-cards").Req(corev1.ResourceCPU, "100m").Annotation(gpu.MilliAnnotation, "100").Annotation(gpu.CardsAnnotation, "5").Obj(),
	)
	running, unschedulable := settle(t, c, ns, len(wantCards)+1)
	invs, err := versioned.NewForConfigOrDie(c.Config).AischedV1alpha1().GPUInventories().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sets := map[string]*gpu.Set{}
	for i := range invs.Items {
		sets[invs.Items[i].Name] = gpu.NewSet(gpu.FromInventory(&invs.Items[i]))
	}
	var pods []*corev1.Pod
	for i := range running {
		p := &running[i]
		pods = append(pods, p)
		cards, ok := gpu.ParseIndices(p.Annotations[gpu.AssignedAnnotation])
		uuids := strings.Split(p.Annotations[gpu.AssignedUUIDsAnnotation], ",")
		if !ok || len(cards) != wantCards[p.Name] || len(slices.Compact(slices.Sorted(slices.Values(uuids)))) != wantCards[p.Name] {
			t.Errorf("pod %s on %s: cards %q (%q), want %d distinct", p.Name, p.Spec.NodeName, p.Annotations[gpu.AssignedAnnotation], p.Annotations[gpu.AssignedUUIDsAnnotation], wantCards[p.Name])
		}
		switch p.Name {
		case "aisched-three":
			if !strings.HasPrefix(p.Spec.NodeName, "v100-") {
				t.Errorf("pod %s on %s, want the node of four cards", p.Name, p.Spec.NodeName)
			}
		case "hami-memory-fraction":
			// Half of a card of 32768 or 16384 MiB.
			want := map[bool]string{true: "16384", false: "8192"}[strings.HasPrefix(p.Spec.NodeName, "v100-")]
			if got := p.Annotations[gpu.AssignedGPUMemAnnotation]; got != want {
				t.Errorf("pod %s on %s: %s=%q, want %s (half of the card)", p.Name, p.Spec.NodeName, gpu.AssignedGPUMemAnnotation, got, want)
			}
		}
	}
	if len(running) != len(wantCards) {
		t.Errorf("%d pods running, want %d", len(running), len(wantCards))
	}
	for _, p := range unschedulable {
		if p.Name != "five-cards" || !triedByScheduler(&p) {
			t.Errorf("pod %s unschedulable: %s; want only five-cards, refused by the scheduler (no node has five cards)", p.Name, unschedulableCondition(&p).Message)
		}
	}
	if problems := gpuledger.Audit(func(node string) *gpu.Set { return sets[node] }, pods); len(problems) > 0 {
		t.Errorf("the ledger's audit: %v", problems)
	}
	if diff := cmp.Diff(gpuledger.Holders(pods), c.KubeletHolders()); diff != "" {
		t.Errorf("card holders, the scheduler's record against the simulated kubelets' (-scheduler,+kubelets):\n%s", diff)
	}

	// Gangs of shares of three cards. Each member of too-big takes 600 of
	// three cards: the V100 node has room for one, the T4 node no three
	// cards. fits takes 400: both members on the V100 node.
	deletePods(t, c, ns)
	ns = createNamespace(t, c.Client)
	gang := func(name string, milli int) {
		for i := range 2 {
			createPods(t, c, utiltesting.MakePod(fmt.Sprintf("%s-%d", name, i), ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "100m").
				Annotation(gpu.MilliAnnotation, fmt.Sprint(milli)).Annotation(gpu.CardsAnnotation, "3").
				Annotation(podgroup.KoordinatorNameAnnotation, name).Annotation(podgroup.KoordinatorMinAvailableAnnotation, "2").Obj())
		}
	}
	gang("too-big", 600)
	waitPodGroup(t, c, ns, "too-big", "says it cannot be placed", func(pg *schedulingv1alpha1.PodGroup) bool {
		c := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.ConditionAdmitted)
		return c != nil && c.Reason == string(jobqueue.ReasonUnplaceable) && pg.Status.Scheduled == 0
	})
	gang("fits", 400)
	for i := range 2 {
		waitRunning(t, c, ns, fmt.Sprintf("fits-%d", i))
	}
	list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, "too-big-") && p.Spec.NodeName != "" {
			t.Errorf("gang member %s bound to %s while its gang cannot be placed whole", p.Name, p.Spec.NodeName)
		}
		if strings.HasPrefix(p.Name, "fits-") && !strings.HasPrefix(p.Spec.NodeName, "v100-") {
			t.Errorf("gang member %s on %s, want the node of four cards", p.Name, p.Spec.NodeName)
		}
	}
}
