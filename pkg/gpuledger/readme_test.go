package gpuledger

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aisched/aisched/pkg/gpu"
)

// TestREADMEExample checks every number of the worked example of
// README.md, step by step, placing pods as GPUFit's Reserve does.
func TestREADMEExample(t *testing.T) {
	s := NewStandalone(Options{})
	node := gpuNode("n1", "4", nil)
	s.ObserveNode(node)
	// Cards 0 and 1 of 40 GiB, 2 and 3 of 80 GiB.
	s.ObserveInventory(inventory("n1", 40960, 40960, 81920, 81920))
	var pods []*corev1.Pod
	nodeGPUs := func() NodeGPUs { return s.NodeGPUs(node, pods, gpu.RequestedCardsOf(pods)) }
	// place picks the cards of r as GPUFit's Reserve does, records the
	// holding (AssignPod) and binds the pod with its assignment, as the
	// pod informer then sees it (ObservePod).
	place := func(name string, r gpu.Request, want ...int) {
		t.Helper()
		n := nodeGPUs()
		cards, ok := n.Usage.Pick(n.Cards.Cards, r, nil)
		if !ok || len(cards) != len(want) || cards[0] != want[0] {
			t.Fatalf("%s: picked %v, %v; want %v", name, cards, ok, want)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c"}}}}
		s.AssignPod(pod, "n1", cards, ShareOf(r, gpu.CardByIndex(n.Cards.Cards, cards[0])))
		pod.Annotations = map[string]string{gpu.AssignedAnnotation: gpu.FormatIndices(cards)}
		if r.Shared() {
			pod.Annotations[gpu.MilliAnnotation] = resource.NewQuantity(r.Milli, resource.DecimalSI).String()
			pod.Annotations[gpu.GPUMemAnnotation] = resource.NewQuantity(r.GPUMemMiB, resource.DecimalSI).String()
		} else {
			q := *resource.NewQuantity(r.Count, resource.DecimalSI)
			pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{gpu.ResourceName: q}
			pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{gpu.ResourceName: q}
		}
		s.ObservePod(pod)
		pods = append(pods, pod)
	}
	// 1. One whole card of at least 80 GiB: of the free cards that
	// qualify (2, 3), the smallest, then the lowest index: card 2.
	place("train", gpu.Request{Count: 1, MemoryMiB: 81920}, 2)
	// 2. A share of 300 thousandths and 20480 MiB: every card with room
	// is free (1000), so the lowest index: card 0.
	place("a", gpu.Request{Count: 1, Milli: 300, GPUMemMiB: 20480}, 0)
	// 3. 250 and 10240 MiB: card 0 has min(1000-300, (40960-20480)*1000/
	// 40960) = min(700, 500) = 500 free, the least of the cards with room
	// (1 and 3 have 1000): card 0 again.
	place("b", gpu.Request{Count: 1, Milli: 250, GPUMemMiB: 10240}, 0)
	u := nodeGPUs().Usage
	cards := nodeGPUs().Cards.Cards
	if u.HeldMilli(0) != 550 || u.HeldMemMiB(0) != 30720 || u.FreeOn(&cards[0]) != 250 {
		t.Errorf("step 3: card 0 holds %d and %d MiB, %d free; want 550, 30720 MiB, min(450, 10240*1000/40960) = 250",
			u.HeldMilli(0), u.HeldMemMiB(0), u.FreeOn(&cards[0]))
	}
	// 4. 300 and 20480 MiB again: card 0 has the compute (450) but only
	// 10240 MiB left, so no room; cards 1 and 3 tie at 1000: card 1.
	place("c", gpu.Request{Count: 1, Milli: 300, GPUMemMiB: 20480}, 1)
	// 5. Free: card 0 250, card 1 min(700, 500) = 500, card 2 0 (whole),
	// card 3 1000: 1750 thousandths; one whole card left (card 3).
	n := nodeGPUs()
	if got := n.FreeMilli(); got != 1750 {
		t.Errorf("step 5: free %d thousandths, want 1750", got)
	}
	if _, free := n.Usage.Fit(n.Cards.Cards, gpu.Request{Count: 2}); free != 1 || n.Fits(gpu.Request{Count: 2}) {
		t.Errorf("step 5: %d whole cards free, want 1: two whole cards do not fit", free)
	}
	// 6. Another scheduler's pod binds with nvidia.com/gpu: 1 and no
	// record: it holds one card, nobody knows which. Free drops by a whole
	// card (750); and as the node's cards come from a GPUInventory, whose
	// agent delivers the cards aisched assigns, no card may be chosen
	// until the agent has located it: Fit counts none free, less the
	// unknown card (-1).
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "ns", UID: "other"},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{gpu.ResourceName: resource.MustParse("1")}, Requests: corev1.ResourceList{gpu.ResourceName: resource.MustParse("1")}}}}}}
	s.ObservePod(other)
	pods = append(pods, other)
	n = nodeGPUs()
	if _, free := n.Usage.Fit(n.Cards.Cards, gpu.Request{Count: 1}); n.Usage.Unknown != 1 || !n.Usage.Unlocated() || n.FreeMilli() != 750 || free != -1 {
		t.Errorf("step 6: unknown %d, unlocated %v, free %d thousandths, %d whole cards; want 1, true, 750, -1",
			n.Usage.Unknown, n.Usage.Unlocated(), n.FreeMilli(), free)
	}
	// 7. The node agent locates its card: card 3, held whole. Nothing is
	// unknown; free is still 750, and no whole card is left.
	other.Annotations = map[string]string{gpu.LocatedAnnotation: "3"}
	s.ObservePod(other)
	n = nodeGPUs()
	if _, free := n.Usage.Fit(n.Cards.Cards, gpu.Request{Count: 1}); n.Usage.Unknown != 0 || !n.Usage.Whole(3) || n.FreeMilli() != 750 || free != 0 {
		t.Errorf("step 7: unknown %d, card 3 whole %v, free %d thousandths, %d whole cards; want 0, true, 750, 0",
			n.Usage.Unknown, n.Usage.Whole(3), n.FreeMilli(), free)
	}
	// 8. Pod b ends: its share is released; card 0 has min(700, 500) =
	// 500 free again.
	s.Release("b", "")
	pods = append(pods[:2:2], pods[3:]...)
	if got := nodeGPUs().Usage.FreeOn(&cards[0]); got != 500 {
		t.Errorf("step 8: card 0 has %d free, want 500", got)
	}
}
