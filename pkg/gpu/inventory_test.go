package gpu

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
)

func TestFromInventory(t *testing.T) {
	inv := &aischedv1alpha1.GPUInventory{Spec: aischedv1alpha1.GPUInventorySpec{GPUs: []aischedv1alpha1.GPU{
		{Index: 1, UUID: "GPU-b", Model: "T4", MemoryMiB: 15360, ComputeCapability: "7.5", Health: aischedv1alpha1.GPUUnhealthy},
		{Index: 0, UUID: "GPU-a", Model: "T4", MemoryMiB: 15360, CUDACores: 2560, MemoryBandwidthGBps: 320, MaxClockMHz: 1590},
	}}}
	want := []Card{
		{Index: 0, UUID: "GPU-a", Model: "T4", MemoryMiB: 15360, Cores: 2560, BandwidthGBps: 320, ClockMHz: 1590, Healthy: true},
		{Index: 1, UUID: "GPU-b", Model: "T4", MemoryMiB: 15360, ComputeCapability: 7.5, Healthy: false},
	}
	if diff := cmp.Diff(want, FromInventory(inv), cmpopts.IgnoreUnexported(Card{})); diff != "" {
		t.Errorf("cards (-want,+got):\n%s", diff)
	}
}

func TestFromNodeLabels(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
		GFDCountLabel: "2", GFDMemoryLabel: "40960", GFDProductLabel: "NVIDIA-A100-SXM4-40GB",
		GFDComputeMajorLabel: "8", GFDComputeMinorLabel: "0",
	}}}
	// Cores, bandwidth and clock come from the table for A100.
	card := Card{Model: "NVIDIA-A100-SXM4-40GB", MemoryMiB: 40960, Cores: 6912, ComputeCapability: 8.0, BandwidthGBps: 1555, ClockMHz: 1410, Healthy: true}
	second := card
	second.Index = 1
	if diff := cmp.Diff([]Card{card, second}, FromNodeLabels(node), cmpopts.IgnoreUnexported(Card{})); diff != "" {
		t.Errorf("cards (-want,+got):\n%s", diff)
	}
	node.Labels[GFDMemoryLabel] = "lots"
	if got := FromNodeLabels(node); got != nil {
		t.Errorf("malformed memory label gave cards %v, want none", got)
	}
}

func TestLookupModel(t *testing.T) {
	tests := map[string]int64{
		"NVIDIA-A100-SXM4-80GB":   6912,
		"NVIDIA H100 PCIe":        14592,
		"NVIDIA-H100-80GB-HBM3":   16896,
		"Tesla-T4":                2560,
		"NVIDIA-A10":              9216, // not the A100
		"NVIDIA-L40S":             18176,
		"NVIDIA GeForce RTX 4090": 16384,
	}
	for model, cores := range tests {
		spec, ok := LookupModel(model)
		if !ok || spec.Cores != cores {
			t.Errorf("LookupModel(%q) = %+v, %v; want %d cores", model, spec, ok, cores)
		}
	}
	if _, ok := LookupModel("Voodoo 5"); ok {
		t.Error("an unknown model was found")
	}
}

func TestIndices(t *testing.T) {
	s := FormatIndices([]int{0, 3})
	got, ok := ParseIndices(s)
	if !ok || !cmp.Equal(got, []int{0, 3}) || s != "0,3" {
		t.Errorf("round trip of [0 3]: %q -> %v %v", s, got, ok)
	}
	for _, bad := range []string{"", "a", "1,,2", "-1", "99"} {
		if _, ok := ParseIndices(bad); ok {
			t.Errorf("ParseIndices(%q) accepted", bad)
		}
	}
}

func TestSatisfiesModel(t *testing.T) {
	card := FromNodeLabels(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
		GFDCountLabel: "1", GFDMemoryLabel: "40960", GFDProductLabel: "NVIDIA-A100-SXM4-40GB",
	}}})[0]
	for model, want := range map[string]bool{
		"a100": true, "A100": true, "a100-sxm4": true, "NVIDIA A100 SXM4 40GB": true,
		"a10": false, "sxm4-a100": false, "h100": false, "100": false,
	} {
		r := Request{Count: 1, Models: []string{NormalizeModel(model)}}
		if got := card.Satisfies(r); got != want {
			t.Errorf("model %q: Satisfies = %v, want %v", model, got, want)
		}
	}
	// Either of two models.
	if !card.Satisfies(Request{Count: 1, Models: []string{"h100", "a100"}}) {
		t.Error("a100 card does not satisfy h100,a100")
	}
	// HAMi's refused types and the UUID lists.
	card.UUID = "GPU-1"
	for _, tc := range []struct {
		r    Request
		want bool
	}{
		{Request{Count: 1, ExcludeModels: []string{"a100"}}, false},
		{Request{Count: 1, ExcludeModels: []string{"t4", "v100"}}, true},
		{Request{Count: 1, Models: []string{"a100"}, ExcludeModels: []string{"sxm4"}}, false},
		{Request{Count: 1, UUIDs: []string{"GPU-0", "GPU-1"}}, true},
		{Request{Count: 1, UUIDs: []string{"GPU-0"}}, false},
		{Request{Count: 1, ExcludeUUIDs: []string{"GPU-1"}}, false},
		{Request{Count: 1, ExcludeUUIDs: []string{"GPU-2"}}, true},
	} {
		if got := card.Satisfies(tc.r); got != tc.want {
			t.Errorf("%+v: Satisfies = %v, want %v", tc.r, got, tc.want)
		}
	}
}

func TestFromNodeLabelsBounds(t *testing.T) {
	for _, count := range []string{"65", "9999999999", "-1", "x"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
			GFDCountLabel: count, GFDMemoryLabel: "40960", GFDProductLabel: "NVIDIA-A100-SXM4-40GB",
		}}}
		if cards := FromNodeLabels(node); cards != nil {
			t.Errorf("count %q: %d cards, want none", count, len(cards))
		}
	}
}
