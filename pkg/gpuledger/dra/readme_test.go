package dra

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
)

// TestREADMEExample checks every number of the worked example of
// README.md, step by step.
func TestREADMEExample(t *testing.T) {
	// Node n1: card 0 of 80 GiB, cards 1 and 2 of 40 GiB, card 3 of 40
	// GiB with a NoSchedule taint; the driver shares each card by memory.
	cards := draCards(gpu.Card{MemoryMiB: 81920, Healthy: true}, gpu.Card{MemoryMiB: 40960, Healthy: true},
		gpu.Card{MemoryMiB: 40960, Healthy: true}, gpu.Card{MemoryMiB: 40960, Healthy: false})
	s := draState(t, cards, nvidiadra.Options{ConsumableShares: "memory"})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}

	// 1. The devices enter the card ledger as four cards; the healthy
	// three are free: 3 x 1000 thousandths.
	if got := s.Cards(node); got.Len() != 4 || got.Cards[3].Healthy {
		t.Fatalf("cards %+v, want four, card 3 unhealthy", got)
	}
	if got := s.NodeGPUs(node, nil, 0).FreeMilli(); got != 3000 {
		t.Errorf("step 1: free %d thousandths, want 3000", got)
	}
	order := func() []string {
		v, _ := s.View("n1")
		var devs []*Device
		for _, d := range v.Devices {
			devs = append(devs, d)
		}
		slices.SortFunc(devs, v.CompareDevices)
		var out []string
		for _, d := range devs {
			out = append(out, d.Device)
		}
		return out
	}
	// 2. No card in use: the smallest healthy first, the tainted last.
	if diff := cmp.Diff([]string{"gpu-1", "gpu-2", "gpu-0", "gpu-3"}, order()); diff != "" {
		t.Errorf("step 2: order (-want,+got):\n%s", diff)
	}
	// 3. A claim takes 8 GiB of gpu-0: card 0 holds a share of 8192 MiB,
	// (81920 - 8192) / 81920 = 900 thousandths of it left.
	shared := result("gpu-0")
	shared.ShareID = ptr.To(types.UID("s1"))
	shared.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("8Gi")}
	s.ObserveClaim(allocated("c1", "share", shared))
	u := s.UsageOf("n1", nil, 0)
	if !u.Used(0) || u.Whole(0) || u.HeldMemMiB(0) != 8192 || u.FreeOn(&s.Cards(node).Cards[0]) != 900 {
		t.Errorf("step 3: card 0 used %v whole %v, %d MiB held, %d free; want a share of 8192 MiB, 900 free",
			u.Used(0), u.Whole(0), u.HeldMemMiB(0), u.FreeOn(&s.Cards(node).Cards[0]))
	}
	if got := s.NodeGPUs(node, nil, 0).FreeMilli(); got != 2900 {
		t.Errorf("step 3: free %d thousandths, want 2900", got)
	}
	// 4. The card in use comes first: the next share packs onto it.
	if diff := cmp.Diff([]string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}, order()); diff != "" {
		t.Errorf("step 4: order (-want,+got):\n%s", diff)
	}
	// 5. A pod whose claim asks for two GPUs of the class is, to the score
	// plugins, a pod of two whole cards of at least 40 GiB; five GPUs
	// never fit.
	s.ObserveClaim(claimFor("two", exactly("gpu", nvidiadra.GPUClass, "", 2, nil)))
	if got, _ := s.RequestOf(draPod("two")); !got.Equal(gpu.Request{Count: 2, MemoryMiB: 40960}) {
		t.Errorf("step 5: request %+v, want 2 cards of 40960 MiB", got)
	}
	s.ObserveClaim(claimFor("five", exactly("gpu", nvidiadra.GPUClass, "", 5, nil)))
	if got, want := s.NeverFits(draPod("five")), "claim ns/five, request gpu: gpu asks for 5 devices; no node has more than 4 that match"; got != want {
		t.Errorf("step 5: NeverFits = %q, want %q", got, want)
	}
}
