package gpustate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
)

func gpuNode(name, count string, labels map[string]string) *corev1.Node {
	n := st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", gpu.ResourceName: count}).Obj()
	n.Labels = labels
	return n
}

func inventory(name string, memory ...int64) *aischedv1alpha1.GPUInventory {
	inv := &aischedv1alpha1.GPUInventory{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for i, m := range memory {
		inv.Spec.GPUs = append(inv.Spec.GPUs, aischedv1alpha1.GPU{Index: int32(i), Model: "X", MemoryMiB: m, MemoryBandwidthGBps: m / 10})
	}
	return inv
}

func TestCards(t *testing.T) {
	s := NewStandalone()
	labels := map[string]string{gpu.GFDCountLabel: "2", gpu.GFDMemoryLabel: "16384", gpu.GFDProductLabel: "Tesla-T4"}
	node := gpuNode("n", "2", labels)
	noLabels := NewStandalone()
	if err := noLabels.UseFeatureDiscoveryLabels(false); err != nil {
		t.Fatal(err)
	}
	if got := noLabels.Cards(node).Len(); got != 0 {
		t.Errorf("labels not allowed: %d cards, want 0", got)
	}
	if err := noLabels.UseFeatureDiscoveryLabels(true); err == nil {
		t.Error("two profiles could disagree on useFeatureDiscoveryLabels")
	}
	if got := s.Cards(node); got.Len() != 2 || got.Cards[0].MemoryMiB != 16384 || !got.Uniform {
		t.Errorf("from labels: %+v, want 2 uniform 16384 MiB cards", got)
	}
	// Changed labels are read again, not served from the cache.
	node = gpuNode("n", "2", map[string]string{gpu.GFDCountLabel: "2", gpu.GFDMemoryLabel: "32768", gpu.GFDProductLabel: "Tesla-V100"})
	if got := s.Cards(node); got.Cards[0].MemoryMiB != 32768 {
		t.Errorf("after a label change: memory %d, want 32768", got.Cards[0].MemoryMiB)
	}
	// An inventory wins over labels, and its removal falls back to them.
	s.ObserveInventory(inventory("n", 40960, 81920))
	if got := s.Cards(node); got.Len() != 2 || got.Uniform || got.MaxMemoryMiB != 81920 {
		t.Errorf("from the inventory: %+v, want 2 mixed cards, max 81920 MiB", got)
	}
	s.ForgetInventory(inventory("n"))
	if got := s.Cards(node); got.Cards[0].MemoryMiB != 32768 {
		t.Errorf("after the inventory left: memory %d, want the labels' 32768", got.Cards[0].MemoryMiB)
	}
}

func TestUsage(t *testing.T) {
	s := NewStandalone()
	node := gpuNode("n", "8", nil)
	known := st.MakePod().Name("known").UID("known").Node("n").Req(map[corev1.ResourceName]string{gpu.ResourceName: "2"}).Obj()
	other := st.MakePod().Name("other").UID("other").Node("n").Req(map[corev1.ResourceName]string{gpu.ResourceName: "3"}).Obj()
	self := st.MakePod().Name("self").UID("self").Node("n").Req(map[corev1.ResourceName]string{gpu.ResourceName: "1"}).Obj()
	cpu := st.MakePod().Name("cpu").UID("cpu").Node("n").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj()
	ni := framework.NewNodeInfo(known, other, self, cpu)
	ni.SetNode(node)
	s.Assign("known", "n", []int{1, 4}, Share{})
	s.Assign("elsewhere", "m", []int{0}, Share{})

	u := s.Usage(ni, "self", 1)
	// known holds 1 and 4; other holds 3 unnamed cards; self is left out.
	if !u.Used(1) || !u.Used(4) || u.Used(0) || u.Count() != 2 || u.Unknown != 3 {
		t.Errorf("usage: used 1:%v 4:%v 0:%v count %d unknown %d; want cards 1 and 4 and 3 unknown", u.Used(1), u.Used(4), u.Used(0), u.Count(), u.Unknown)
	}
	empty := framework.NewNodeInfo(cpu)
	empty.SetNode(node)
	if u := s.Usage(empty, "", 0); u.Count() != 0 || u.Unknown != 0 {
		t.Errorf("node without GPU pods: %+v", u)
	}
}

func TestObservePod(t *testing.T) {
	s := NewStandalone()
	pod := st.MakePod().Name("p").UID("p").Node("n").Obj()
	pod.Annotations = map[string]string{gpu.AssignedAnnotation: "2,5"}
	s.ObservePod(pod)
	if node, cards, ok := s.Held("p"); !ok || node != "n" || !cmp.Equal(cards, []int{2, 5}) {
		t.Errorf("bound pod holds %s %v %v, want n [2 5]", node, cards, ok)
	}
	done := pod.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	s.ObservePod(done)
	if _, _, ok := s.Held("p"); ok {
		t.Error("a finished pod still holds cards")
	}
	unbound := pod.DeepCopy()
	unbound.Spec.NodeName = ""
	s.ObservePod(unbound)
	if _, _, ok := s.Held("p"); ok {
		t.Error("an unbound pod's annotation was believed")
	}
	malformed := pod.DeepCopy()
	malformed.Annotations[gpu.AssignedAnnotation] = "x"
	s.ObservePod(malformed)
	if _, _, ok := s.Held("p"); ok {
		t.Error("a malformed annotation was believed")
	}
	s.ObservePod(pod)
	s.ForgetPod(pod)
	if _, _, ok := s.Held("p"); ok {
		t.Error("a deleted pod still holds cards")
	}
}

func TestFacts(t *testing.T) {
	s := NewStandalone()
	s.ObserveNode(gpuNode("cpu", "0", nil))
	s.ObserveNode(gpuNode("g1", "2", nil))
	s.ObserveInventory(inventory("g1", 16384, 16384))
	want := ClusterFacts{Nodes: 2, GPUNodes: 1, BestBandwidthGBps: 1638}
	if diff := cmp.Diff(want, s.Facts()); diff != "" {
		t.Errorf("facts (-want,+got):\n%s", diff)
	}
	s.ObserveNode(gpuNode("g2", "1", nil))
	s.ObserveInventory(inventory("g2", 40960))
	want = ClusterFacts{Nodes: 3, GPUNodes: 2, BestBandwidthGBps: 4096}
	if diff := cmp.Diff(want, s.Facts()); diff != "" {
		t.Errorf("after a node joined (-want,+got):\n%s", diff)
	}
	s.ForgetNode(gpuNode("g2", "1", nil))
	want = ClusterFacts{Nodes: 2, GPUNodes: 1, BestBandwidthGBps: 1638}
	if diff := cmp.Diff(want, s.Facts()); diff != "" {
		t.Errorf("after a node left (-want,+got):\n%s", diff)
	}
	// An update that changes nothing GPU-related (a heartbeat) keeps the facts.
	s.ObserveNode(gpuNode("g1", "2", nil))
	if s.factsStale {
		t.Error("a heartbeat made the facts stale")
	}
}

// The cache by node object never serves cards an inventory change made
// stale, and forgets node objects the informer replaced.
func TestCardsCache(t *testing.T) {
	s := NewStandalone()
	node := gpuNode("n", "2", nil)
	s.ObserveNode(node)
	s.ObserveInventory(inventory("n", 16384, 16384))
	if got := s.Cards(node); got.MaxMemoryMiB != 16384 {
		t.Fatalf("first read: max memory %d, want 16384", got.MaxMemoryMiB)
	}
	s.ObserveInventory(inventory("n", 32768, 32768))
	if got := s.Cards(node); got.MaxMemoryMiB != 32768 {
		t.Errorf("after an inventory change: max memory %d, want 32768", got.MaxMemoryMiB)
	}
	updated := node.DeepCopy()
	s.ObserveNode(updated)
	if _, ok := s.byNode.Load(node); ok {
		t.Error("the replaced node object is still cached")
	}
	if got := s.Cards(updated); got.MaxMemoryMiB != 32768 {
		t.Errorf("new node object: max memory %d, want 32768", got.MaxMemoryMiB)
	}
	s.ForgetNode(updated)
	cached := 0
	s.byNode.Range(func(_, _ any) bool { cached++; return true })
	if cached != 0 || len(s.ptrs) != 0 {
		t.Errorf("after the node left: %d cached objects, %d names; want none", cached, len(s.ptrs))
	}
}
