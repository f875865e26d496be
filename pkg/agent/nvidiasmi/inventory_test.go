package nvidiasmi

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
)

func TestInventory(t *testing.T) {
	tests := []struct {
		name string
		// file's first card is the one converted, unless card is set.
		file    string
		card    *Card
		wantGPU aischedv1alpha1.GPU
		// wantModels are model requests (gpu.ModelsAnnotation) that the
		// GPU-fit plugin must find the card to satisfy.
		wantModels []string
	}{
		{
			// Cores and bandwidth from the data sheet of the A100 SXM4 80GB.
			name: "A100",
			file: "a100-sxm4-80gb-x8.csv",
			wantGPU: aischedv1alpha1.GPU{
				Index: 0, UUID: "GPU-4f2c9a3e-1b7d-6e58-0c4a-9d3e7b21f6a8", Model: "NVIDIA-A100-SXM4-80GB", MemoryMiB: 81920,
				CUDACores: 6912, ComputeCapability: "8.0", MemoryBandwidthGBps: 2039, MaxClockMHz: 1410, Health: aischedv1alpha1.GPUHealthy,
			},
			wantModels: []string{"A100", "a100-sxm4", "NVIDIA A100-SXM4-80GB"},
		},
		{
			// The model as the default cluster file writes it: Tesla-T4.
			name: "T4",
			file: "tesla-t4-x2.csv",
			wantGPU: aischedv1alpha1.GPU{
				Index: 0, UUID: "GPU-5e8d1a7c-02f4-9b3e-6c1d-a48f7e20b9d6", Model: "Tesla-T4", MemoryMiB: 15360,
				CUDACores: 2560, ComputeCapability: "7.5", MemoryBandwidthGBps: 320, MaxClockMHz: 1590, Health: aischedv1alpha1.GPUHealthy,
			},
			wantModels: []string{"t4", "Tesla-T4"},
		},
		{
			// Driver 470 does not report compute capability; the table does.
			name: "T4 on an old driver",
			file: "tesla-t4-x2-r470.csv",
			wantGPU: aischedv1alpha1.GPU{
				Index: 0, UUID: "GPU-5e8d1a7c-02f4-9b3e-6c1d-a48f7e20b9d6", Model: "Tesla-T4", MemoryMiB: 15360,
				CUDACores: 2560, ComputeCapability: "7.5", MemoryBandwidthGBps: 320, MaxClockMHz: 1590, Health: aischedv1alpha1.GPUHealthy,
			},
			wantModels: []string{"t4"},
		},
		{
			name: "H100",
			file: "h100-80gb-hbm3.csv",
			wantGPU: aischedv1alpha1.GPU{
				Index: 0, UUID: "GPU-9a1c64e3-7d2b-0f58-c3e9-5b84a1d7f026", Model: "NVIDIA-H100-80GB-HBM3", MemoryMiB: 81559,
				CUDACores: 16896, ComputeCapability: "9.0", MemoryBandwidthGBps: 3350, MaxClockMHz: 1980, Health: aischedv1alpha1.GPUHealthy,
			},
			wantModels: []string{"h100", "H100 80GB HBM3"},
		},
		{
			// nvidia-smi's boost clock of 3120 MHz wins over the table's 2520.
			name: "RTX 4090",
			file: "rtx-4090.csv",
			wantGPU: aischedv1alpha1.GPU{
				Index: 0, UUID: "GPU-3d7e0b5a-c91f-8246-ae03-6f1b9d2c7e48", Model: "NVIDIA-GeForce-RTX-4090", MemoryMiB: 24564,
				CUDACores: 16384, ComputeCapability: "8.9", MemoryBandwidthGBps: 1008, MaxClockMHz: 3120, Health: aischedv1alpha1.GPUHealthy,
			},
			wantModels: []string{"rtx-4090", "GeForce RTX 4090"},
		},
		{
			// No clock from nvidia-smi: the table's.
			name: "clock not reported",
			card: &Card{Index: 3, Name: "Tesla T4", MemoryTotalMiB: 15360},
			wantGPU: aischedv1alpha1.GPU{
				Index: 3, Model: "Tesla-T4", MemoryMiB: 15360,
				CUDACores: 2560, ComputeCapability: "7.5", MemoryBandwidthGBps: 320, MaxClockMHz: 1590, Health: aischedv1alpha1.GPUHealthy,
			},
			wantModels: []string{"t4"},
		},
		{
			// A model the table does not know keeps what nvidia-smi said.
			name: "unknown model",
			card: &Card{Index: 0, UUID: "GPU-0", Name: "NVIDIA  B200 ", MemoryTotalMiB: 183359, MaxClockMHz: 1965, ComputeCapability: "10.0"},
			wantGPU: aischedv1alpha1.GPU{
				Index: 0, UUID: "GPU-0", Model: "NVIDIA-B200", MemoryMiB: 183359,
				ComputeCapability: "10.0", MaxClockMHz: 1965, Health: aischedv1alpha1.GPUHealthy,
			},
			wantModels: []string{"b200"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			card := tc.card
			if card == nil {
				cards, err := Parse(readTestdata(t, tc.file))
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				card = &cards[0]
			}
			got := card.Inventory()
			if diff := cmp.Diff(tc.wantGPU, got); diff != "" {
				t.Errorf("Inventory (-want,+got):\n%s", diff)
			}
			// Model names compare equal to nvidia-smi's once normalised.
			if n, want := gpu.NormalizeModel(got.Model), gpu.NormalizeModel(card.Name); n != want {
				t.Errorf("NormalizeModel(%q) = %q, want %q as for the raw name", got.Model, n, want)
			}
			inv := &aischedv1alpha1.GPUInventory{Spec: aischedv1alpha1.GPUInventorySpec{GPUs: []aischedv1alpha1.GPU{got}}}
			fitCard := gpu.FromInventory(inv)[0]
			for _, m := range tc.wantModels {
				if r := (gpu.Request{Count: 1, Models: []string{gpu.NormalizeModel(m)}}); !fitCard.Satisfies(r) {
					t.Errorf("card %q does not satisfy a request for model %q", got.Model, m)
				}
			}
		})
	}
}
