package trace

import (
	"testing"

	"github.com/aisched/aisched/pkg/gpu"
)

func TestNodeModel(t *testing.T) {
	tests := []struct {
		name      string
		trace     string
		want      string
		wantKnown bool
	}{
		{"T4", "T4", "Tesla-T4", true},
		{"P100", "P100", "Tesla-P100-PCIE-16GB", true},
		{"V100 16 GB", "V100M16", "Tesla-V100-SXM2-16GB", true},
		{"V100 32 GB", "V100M32", "Tesla-V100-SXM2-32GB", true},
		{"A10", "A10", "NVIDIA-A10", true},
		{"case and space", " v100m32 ", "Tesla-V100-SXM2-32GB", true},
		{"undisclosed G1", "G1", "G1", false},
		{"undisclosed G2", "G2", "G2", false},
		{"undisclosed G3", "G3", "G3", false},
		{"unknown, trimmed", " M60 ", "M60", false},
		{"CPU-only node", "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := NodeModel(tc.trace)
			if got != tc.want {
				t.Errorf("NodeModel(%q) = %q, want %q", tc.trace, got, tc.want)
			}
			// Converted names must be ones pkg/gpu has a data sheet for, so
			// that simulated nodes get cores and bandwidth.
			if _, ok := gpu.LookupModel(got); ok != tc.wantKnown {
				t.Errorf("gpu.LookupModel(%q) found = %t, want %t", got, ok, tc.wantKnown)
			}
		})
	}
}
