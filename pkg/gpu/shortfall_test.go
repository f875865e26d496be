package gpu

import (
	"testing"
)

func TestShortfall(t *testing.T) {
	card := func(i int, model string, mib, cores int64) Card {
		return Card{Index: i, UUID: "GPU-" + string(rune('a'+i)), Model: model, MemoryMiB: mib, Cores: cores, Healthy: true, model: NormalizeModel(model)}
	}
	// Two T4 (15 GiB, 2560 cores) and two A100 (40 GiB, 6912 cores).
	cards := []Card{card(0, "Tesla-T4", 15360, 2560), card(1, "Tesla-T4", 15360, 2560), card(2, "NVIDIA-A100-SXM4-40GB", 40960, 6912), card(3, "NVIDIA-A100-SXM4-40GB", 40960, 6912)}
	sick := []Card{card(0, "Tesla-T4", 15360, 2560)}
	sick[0].Healthy = false
	for _, tc := range []struct {
		name        string
		count       int64
		annotations map[string]string
		cards       []Card
		want        string
	}{
		{name: "enough cards", count: 4, cards: cards, want: ""},
		{name: "enough big cards", count: 2, annotations: map[string]string{MemoryAnnotation: "40Gi"}, cards: cards, want: ""},
		{name: "no cards", count: 1, want: "have no GPUs"},
		{name: "more cards than the node has", count: 5, cards: cards, want: "have 4 GPUs, fewer than the pod's 5"},
		{name: "memory, oks key", count: 1, annotations: map[string]string{OKSMemoryAnnotation: "80000"}, cards: cards,
			want: `have no GPU with oks/gpu-memory="80000": the largest has 40 GiB`},
		{name: "cores", count: 1, annotations: map[string]string{CoresAnnotation: "10000"}, cards: cards,
			want: `have no GPU with gpu.aisched.io/cores="10000": the most has 6912 cores`},
		{name: "model", count: 1, annotations: map[string]string{ModelsAnnotation: "H100"}, cards: cards,
			want: `have no GPU of gpu.aisched.io/models="H100": their cards are Tesla-T4, NVIDIA-A100-SXM4-40GB`},
		{name: "every model refused", count: 1, annotations: map[string]string{HAMiNoUseTypeAnnotation: "T4,A100"}, cards: cards,
			want: `have only GPUs that nvidia.com/nouse-gputype="T4,A100" refuses: Tesla-T4, NVIDIA-A100-SXM4-40GB`},
		{name: "UUID not on the node", count: 1, annotations: map[string]string{HAMiUseUUIDAnnotation: "GPU-z"}, cards: cards,
			want: `have no GPU that nvidia.com/use-gpuuuid="GPU-z" names`},
		{name: "too few meet it", count: 3, annotations: map[string]string{MemoryAnnotation: "20Gi"}, cards: cards,
			want: `have 2 GPUs that meet gpu.aisched.io/memory="20Gi", fewer than the pod's 3`},
		// Each alone is met by some card (A100 memory; T4 model), not both.
		{name: "only together", count: 1, annotations: map[string]string{MemoryAnnotation: "20Gi", ModelsAnnotation: "T4"}, cards: cards,
			want: `have no GPU that meets gpu.aisched.io/memory="20Gi" and gpu.aisched.io/models="T4" at once`},
		{name: "share of memory", count: 0, annotations: map[string]string{GPUMemAnnotation: "50000"}, cards: cards,
			want: `have no GPU with gpu.aisched.io/gpumem="50000": the largest has 40 GiB`},
		{name: "unhealthy", count: 1, cards: sick, want: "have no healthy GPU (1 unhealthy)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRequest(gpuPod(tc.count, tc.annotations))
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Shortfall(tc.cards); got != tc.want {
				t.Errorf("Shortfall = %q, want %q", got, tc.want)
			}
		})
	}
}
