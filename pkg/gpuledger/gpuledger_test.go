package gpuledger

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	s := NewStandalone(Options{})
	labels := map[string]string{gpu.GFDCountLabel: "2", gpu.GFDMemoryLabel: "16384", gpu.GFDProductLabel: "Tesla-T4"}
	node := gpuNode("n", "2", labels)
	noLabels := NewStandalone(Options{NoFeatureDiscoveryLabels: true})
	if got := noLabels.Cards(node).Len(); got != 0 {
		t.Errorf("labels not allowed: %d cards, want 0", got)
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
	s := NewStandalone(Options{})
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
	s := NewStandalone(Options{})
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

// TestObserveLocated: another scheduler's pod whose cards the node agent
// located holds those cards, no longer "some cards" of its node.
func TestObserveLocated(t *testing.T) {
	s := NewStandalone(Options{})
	other := st.MakePod().Name("other").UID("other").Node("n").Req(map[corev1.ResourceName]string{gpu.ResourceName: "2"}).Obj()
	ni := framework.NewNodeInfo(other)
	ni.SetNode(gpuNode("n", "8", nil))
	s.ObservePod(other)
	if u := s.Usage(ni, "", 0); u.Unknown != 2 || u.Count() != 0 {
		t.Errorf("before it is located: %d unknown, %d known cards; want 2 and 0", u.Unknown, u.Count())
	}
	located := other.DeepCopy()
	located.Annotations = map[string]string{gpu.LocatedAnnotation: "3,6"}
	s.ObservePod(located)
	ni = framework.NewNodeInfo(located)
	ni.SetNode(gpuNode("n", "8", nil))
	if u := s.Usage(ni, "", 0); u.Unknown != 0 || !u.Whole(3) || !u.Whole(6) || u.Count() != 2 {
		t.Errorf("located on 3 and 6: %d unknown, cards 3:%v 6:%v, count %d", u.Unknown, u.Whole(3), u.Whole(6), u.Count())
	}
	short := other.DeepCopy()
	short.UID = "short"
	short.Annotations = map[string]string{gpu.LocatedAnnotation: "1"}
	s.ObservePod(short)
	if _, _, ok := s.Held("short"); ok {
		t.Error("a located annotation that names fewer cards than the pod requests was believed")
	}
}

func TestFacts(t *testing.T) {
	s := NewStandalone(Options{})
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
	s := NewStandalone(Options{})
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

// The memo of a node's Usage changes nothing: over a random walk of pods
// coming and going, holdings assigned and released, and the pod to leave
// out, Usage answers as a fresh computation, and it is memoised often.
func TestUsageMemo(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	s := NewStandalone(Options{})
	node := gpuNode("n", "8", nil)
	var pods []*corev1.Pod
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	hits := 0
	for step := range 500 {
		switch rng.IntN(5) {
		case 0: // a GPU pod comes, with or without a holding
			uid := fmt.Sprint("p", step)
			p := st.MakePod().Name(uid).UID(uid).Node("n").Req(map[corev1.ResourceName]string{gpu.ResourceName: "1"}).Obj()
			pods = append(pods, p)
			ni = framework.NewNodeInfo(pods...)
			ni.SetNode(node)
			if rng.IntN(3) > 0 {
				s.Assign(p.UID, "n", []int{rng.IntN(8)}, Share{})
			}
		case 1: // a pod goes
			if len(pods) > 0 {
				i := rng.IntN(len(pods))
				s.ForgetPod(pods[i])
				pods = slices.Delete(pods, i, i+1)
				ni = framework.NewNodeInfo(pods...)
				ni.SetNode(node)
			}
		case 2: // a share is assigned, the NodeInfo unchanged
			s.Assign(types.UID(fmt.Sprint("s", step%7)), "n", []int{rng.IntN(8)}, Share{Milli: int64(100 * (1 + rng.IntN(5)))})
		case 3: // a holding is released, or moves to another node
			uid := types.UID(fmt.Sprint("s", rng.IntN(7)))
			if len(pods) > 0 && rng.IntN(2) == 0 {
				uid = pods[rng.IntN(len(pods))].UID
			}
			if rng.IntN(2) == 0 {
				s.Release(uid, "")
			} else {
				s.Assign(uid, "m", []int{0}, Share{})
			}
		}
		skip := types.UID("")
		if len(pods) > 0 && rng.IntN(4) == 0 {
			skip = pods[rng.IntN(len(pods))].UID
		}
		got := s.Usage(ni, skip, 1)
		s.mu.RLock()
		h := s.held["n"]
		if h != nil && h.usage.Load() != nil {
			hits++
		}
		requested := ni.GetRequested().GetScalarResources()[gpu.ResourceName]
		want := Usage{}
		if requested > 0 || h != nil && h.shared > 0 {
			want = s.usageLocked("n", podsOf(ni), requested, h != nil && h.shared > 0, skip, 1)
		}
		s.mu.RUnlock()
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(Usage{}, cardShares{})); diff != "" {
			t.Fatalf("step %d: Usage (-fresh,+memoised):\n%s", step, diff)
		}
	}
	if hits < 100 {
		t.Errorf("memoised %d times in 500 steps, want many", hits)
	}
}

// TestUnlocated: on a node whose cards the node agent delivers as assigned
// (it has a GPUInventory), no card is free while another scheduler's pod
// holds cards the agent has not located: any card chosen may be one of
// them. Once located, the others are free; a node known by its labels
// only (no agent delivers) counts them free all along.
func TestUnlocated(t *testing.T) {
	s := NewStandalone(Options{})
	s.ObserveInventory(inventory("n", 15360, 15360))
	other := st.MakePod().Name("other").UID("other").Node("n").Req(map[corev1.ResourceName]string{gpu.ResourceName: "1"}).Obj()
	s.ObservePod(other)
	ni := framework.NewNodeInfo(other)
	ni.SetNode(gpuNode("n", "2", nil))
	one := gpu.Request{Count: 1}
	g := s.NodeGPUsOf(ni)
	if !g.Usage.Unlocated() || g.Fits(one) || s.AllKnown("n", 1) {
		t.Errorf("before it is located: unlocated %v, fits %v, all known %v; want true, false, false", g.Usage.Unlocated(), g.Fits(one), s.AllKnown("n", 1))
	}
	located := other.DeepCopy()
	located.Annotations = map[string]string{gpu.LocatedAnnotation: "0"}
	s.ObservePod(located)
	ni = framework.NewNodeInfo(located)
	ni.SetNode(gpuNode("n", "2", nil))
	g = s.NodeGPUsOf(ni)
	if g.Usage.Unlocated() || !g.Fits(one) || !s.AllKnown("n", 1) {
		t.Errorf("located: unlocated %v, fits %v, all known %v; want false, true, true", g.Usage.Unlocated(), g.Fits(one), s.AllKnown("n", 1))
	}

	labelled := NewStandalone(Options{})
	node := gpuNode("m", "2", map[string]string{gpu.GFDCountLabel: "2", gpu.GFDMemoryLabel: "15360", gpu.GFDProductLabel: "Tesla-T4"})
	foreign := other.DeepCopy()
	foreign.Spec.NodeName = "m"
	labelled.ObservePod(foreign)
	ni = framework.NewNodeInfo(foreign)
	ni.SetNode(node)
	if g := labelled.NodeGPUsOf(ni); g.Usage.Unlocated() || !g.Fits(one) {
		t.Errorf("a node known by its labels: unlocated %v, fits %v; want false, true", g.Usage.Unlocated(), g.Fits(one))
	}
}
