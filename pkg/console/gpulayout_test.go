package console

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
	"github.com/aisched/aisched/pkg/podgroup"
)

func gpuNode(name string) corev1.Node {
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

func inventory(node string, cards int) aischedv1alpha1.GPUInventory {
	inv := aischedv1alpha1.GPUInventory{ObjectMeta: metav1.ObjectMeta{Name: node}}
	for i := range cards {
		inv.Spec.GPUs = append(inv.Spec.GPUs, aischedv1alpha1.GPU{
			Index: int32(i), UUID: "GPU-" + node + "-" + string(rune('a'+i)), Model: "NVIDIA-A100-SXM4-40GB", MemoryMiB: 40960, Health: aischedv1alpha1.GPUHealthy,
		})
	}
	return inv
}

// gpuPod is a running pod on node asking for gpus whole cards; assigned
// is the scheduler's record ("" for none); annotations add to it.
func gpuPod(name, node string, gpus int64, assigned string, annotations map[string]string) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if gpus > 0 {
		q := *resource.NewQuantity(gpus, resource.DecimalSI)
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{gpu.ResourceName: q}, Limits: corev1.ResourceList{gpu.ResourceName: q}}
	}
	if assigned != "" {
		p.Annotations[gpu.AssignedAnnotation] = assigned
	}
	for k, v := range annotations {
		p.Annotations[k] = v
	}
	return p
}

func TestLayOutGPUs(t *testing.T) {
	nodes := []corev1.Node{gpuNode("n1"), gpuNode("n2"), gpuNode("cpu")}
	invs := []aischedv1alpha1.GPUInventory{inventory("n1", 4), inventory("n2", 2)}
	invs[0].Status.Drift = []aischedv1alpha1.GPUDrift{{Pod: "ml/train", Assigned: []string{"0", "1"}, Held: []string{"0", "2"}}}
	invs[0].Status.DriftCount = 1
	pods := []corev1.Pod{
		gpuPod("train", "n1", 2, "0,1", nil),
		gpuPod("infer-a", "n1", 0, "2", map[string]string{gpu.MilliAnnotation: "300", gpu.GPUMemAnnotation: "8192"}),
		gpuPod("infer-b", "n1", 0, "2", map[string]string{gpu.MilliAnnotation: "200", gpu.GPUMemAnnotation: "4096"}),
		// Another scheduler's pod the node agent has not located: it holds
		// one of n2's cards, which one is unknown.
		gpuPod("foreign", "n2", 1, "", nil),
	}
	ended := gpuPod("done", "n2", 1, "1", nil)
	ended.Status.Phase = corev1.PodSucceeded
	pods = append(pods, ended)

	laid := LayOutGPUs(nodes, invs, pods, DRAObjects{})
	if len(laid) != 2 || laid[0].Name != "n1" || laid[1].Name != "n2" {
		t.Fatalf("nodes %+v: want n1 and n2, the nodes with cards", laid)
	}
	n1 := laid[0]
	if n1.Source != "GPUInventory" || !n1.Ready || len(n1.Cards) != 4 {
		t.Fatalf("n1: %+v", n1)
	}
	for _, i := range []int{0, 1} {
		if c := n1.Cards[i]; c.Whole != "ml/train" || c.State != CardWhole || c.FreeMilli != 0 {
			t.Errorf("n1 card %d: %+v, want held whole by ml/train", i, c)
		}
	}
	shared := n1.Cards[2]
	if shared.Whole != "" || shared.State != CardShared || len(shared.Shares) != 2 || shared.FreeMilli != 500 || shared.FreeMemMiB != 40960-8192-4096 {
		t.Errorf("n1 card 2: %+v, want two shares (300 and 200 thousandths) and 500 free", shared)
	}
	if n1.Cards[3].Whole != "" || len(n1.Cards[3].Shares) != 0 || n1.Cards[3].FreeMilli != 1000 {
		t.Errorf("n1 card 3: %+v, want free", n1.Cards[3])
	}
	if want := (CardCounts{Total: 4, Free: 1, Whole: 2, Shared: 1}); n1.Counts != want || len(n1.Drift) != 1 || n1.DriftFindings != 1 {
		t.Errorf("n1: counts %+v, drift %v (%d findings): want %+v and the agent's one finding", n1.Counts, n1.Drift, n1.DriftFindings, want)
	}
	n2 := laid[1]
	// Both cards free by the ledger's records; the unlocated pod is
	// counted on the first.
	if want := (CardCounts{Total: 2, Free: 1, Unlocated: 1}); n2.Counts != want || len(n2.Unlocated) != 1 || n2.Unlocated[0] != "ml/foreign (1)" {
		t.Errorf("n2: counts %+v, unlocated %v: want %+v (the ended pod's card free) and ml/foreign holding one card", n2.Counts, n2.Unlocated, want)
	}
	// Free compute: n1 card 2 (500, stranded) and card 3 (1000); n2 both
	// cards (2000, one of them held by the unlocated pod, which the map
	// cannot place on a card).
	sum := summarize(laid)
	if want := (CardCounts{Total: 6, Free: 2, Whole: 2, Shared: 1, Unlocated: 1}); sum.Counts != want || sum.Nodes != 2 || sum.DriftFindings != 1 {
		t.Errorf("summary %+v: want 2 nodes, %+v and one drift finding", sum, want)
	}
	f := sum.Fragmentation
	if f.FreeMilli != 3500 || f.StrandedMilli != 500 || f.Percent < 14.28 || f.Percent > 14.29 {
		t.Errorf("fragmentation %+v: want 3500 free, 500 stranded (14.3%%)", f)
	}
}

func TestLayOutGPUsLabels(t *testing.T) {
	// A node without a GPUInventory, described by GPU Feature Discovery.
	n := gpuNode("gfd")
	n.Labels = map[string]string{gpu.GFDPresentLabel: "true", gpu.GFDProductLabel: "Tesla-T4", gpu.GFDCountLabel: "2", gpu.GFDMemoryLabel: "15360"}
	nodes := LayOutGPUs([]corev1.Node{n}, nil, nil, DRAObjects{})
	if len(nodes) != 1 || nodes[0].Source != "labels" || len(nodes[0].Cards) != 2 || nodes[0].Cards[0].Model != "Tesla-T4" {
		t.Fatalf("nodes %+v: want node gfd with two T4 cards from labels", nodes)
	}
}

// A share of each of several cards shows on each of its cards, counted in
// each card's free compute and memory.
func TestLayOutGPUsMultiCardShare(t *testing.T) {
	nodes := []corev1.Node{gpuNode("n1")}
	invs := []aischedv1alpha1.GPUInventory{inventory("n1", 4)}
	// HAMi's default_use on cards 1 and 3: 3000 MiB and 30% of each.
	hami := gpuPod("default-use", "n1", 2, "1,3", nil)
	hami.Spec.Containers[0].Resources.Limits[gpu.HAMiGPUMemResource] = resource.MustParse("3000")
	hami.Spec.Containers[0].Resources.Limits[gpu.HAMiGPUCoresResource] = resource.MustParse("30")
	hami.Spec.Containers[0].Resources.Requests = hami.Spec.Containers[0].Resources.Limits
	laid := LayOutGPUs(nodes, invs, []corev1.Pod{hami}, DRAObjects{})
	if len(laid) != 1 {
		t.Fatalf("nodes %+v", laid)
	}
	for i, c := range laid[0].Cards {
		shared := i == 1 || i == 3
		switch {
		case shared && (len(c.Shares) != 1 || c.Shares[0] != CardShare{Pod: "ml/default-use", Milli: 300, MemMiB: 3000} || c.FreeMilli != 700 || c.FreeMemMiB != 40960-3000):
			t.Errorf("card %d: %+v, want default-use's share (300, 3000 MiB), 700 free", i, c)
		case !shared && (len(c.Shares) != 0 || c.Whole != "" || c.FreeMilli != 1000):
			t.Errorf("card %d: %+v, want free", i, c)
		}
	}
	// Two cards untouched, but the kubelet counts the pod's two
	// nvidia.com/gpu (HAMi's form): the map, like the ledger, counts them
	// held.
	if n := laid[0]; n.Counts.Free != 2 || summarize(laid).Fragmentation.StrandedMilli != 1400 {
		t.Errorf("free cards %d, stranded %d; want 2 and 1400", n.Counts.Free, summarize(laid).Fragmentation.StrandedMilli)
	}
}

// draClaim is a claim of ml allocated the device of pool, reserved for the
// pod of its name.
func draClaim(name, pool, device string) resourcev1.ResourceClaim {
	return resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name + "-gpu", UID: types.UID("claim-" + name)},
		Status: resourcev1.ResourceClaimStatus{
			Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: nvidiadra.Driver, Pool: pool, Device: device}}}},
			ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: name, UID: types.UID("uid-" + name)}},
		},
	}
}

// TestLayOutGPUsDRA: the cards NVIDIA's DRA driver publishes are on the
// map: a whole GPU held by the pod its claim is reserved for, and a MIG
// device named by its profile and device, with its claim.
func TestLayOutGPUsDRA(t *testing.T) {
	cards := []gpu.Card{
		{Index: 0, UUID: "GPU-0", Model: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920, ComputeCapability: 8, Healthy: true},
		{Index: 1, UUID: "GPU-1", Model: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920, ComputeCapability: 8, Healthy: true},
	}
	var dra DRAObjects
	for _, sl := range nvidiadra.Slices("whole", cards, nvidiadra.Options{}) {
		dra.Slices = append(dra.Slices, *sl)
	}
	migSlices := nvidiadra.Slices("mig", cards, nvidiadra.Options{MIG: []string{"3g.40gb", "1g.10gb"}})
	var small string
	for _, sl := range migSlices {
		dra.Slices = append(dra.Slices, *sl)
		for _, d := range sl.Spec.Devices {
			if strings.HasPrefix(d.Name, "gpu-1-mig-1g10gb") {
				small = d.Name
			}
		}
	}
	if small == "" {
		t.Fatal("no 1g.10gb device of gpu-1 in the driver's slices")
	}
	wholePool, migPool := dra.Slices[0].Spec.Pool.Name, migSlices[0].Spec.Pool.Name
	dra.Claims = []resourcev1.ResourceClaim{draClaim("train", wholePool, "gpu-0"), draClaim("small", migPool, small)}
	pods := []corev1.Pod{gpuPod("train", "whole", 0, "", nil), gpuPod("small", "mig", 0, "", nil)}
	pods[0].Labels = map[string]string{podgroup.NameLabel: "job"}

	laid := LayOutGPUs([]corev1.Node{gpuNode("whole"), gpuNode("mig")}, nil, pods, dra)
	if len(laid) != 2 {
		t.Fatalf("nodes %+v, want mig and whole", laid)
	}
	mig, whole := laid[0], laid[1]
	if whole.Source != "ResourceSlices" || len(whole.Cards) != 2 || whole.Cards[0].State != CardWhole || whole.Cards[0].Whole != "ml/train" || whole.Cards[1].State != CardFree {
		t.Errorf("node whole: %+v, want card 0 held whole by ml/train, card 1 free", whole)
	}
	if got := whole.Cards[0].Groups; len(got) != 1 || got[0] != "ml/job" {
		t.Errorf("card 0 of node whole is held by groups %v, want ml/job (its pod's)", got)
	}
	if mig.Source != "ResourceSlices" || len(mig.Cards) != 2 || mig.Cards[0].State != CardFree || mig.Cards[1].State != CardShared {
		t.Fatalf("node mig: %+v, want card 0 free, card 1 shared", mig)
	}
	shares := mig.Cards[1].Shares
	if len(shares) != 1 {
		t.Fatalf("card 1 of node mig holds %+v, want the 1g.10gb device", shares)
	}
	// Static MIG publishes no counters and no whole GPU: the card is as
	// large as its devices together (40960+10240 MiB), and the 1g.10gb
	// device holds 10240/51200 of it, 200 thousandths.
	want := CardShare{Pod: "ml/small", Claim: "ml/small-gpu", Device: small, Profile: "1g.10gb", Milli: 200, MemMiB: 10240}
	if diff := cmp.Diff(want, shares[0]); diff != "" {
		t.Errorf("the MIG device on the map (-want,+got):\n%s", diff)
	}
	if got := mig.Cards[1].Model; got != "NVIDIA A100-SXM4-80GB" {
		t.Errorf("the MIG card's model is %q, want its product name", got)
	}
}
