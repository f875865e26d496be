package nvidiasmi

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

const (
	a100  = "NVIDIA A100-SXM4-80GB"
	t4    = "Tesla T4"
	h100  = "NVIDIA H100 80GB HBM3"
	rtx   = "NVIDIA GeForce RTX 4090"
	t4Mem = 15360
)

// readTestdata returns the recorded nvidia-smi output in testdata/name.
func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	out, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestParseTestdata parses outputs recorded on real nodes.
func TestParseTestdata(t *testing.T) {
	tests := []struct {
		file      string
		wantCards []Card
	}{
		{
			file: "a100-sxm4-80gb-x8.csv",
			wantCards: []Card{
				{Index: 0, UUID: "GPU-4f2c9a3e-1b7d-6e58-0c4a-9d3e7b21f6a8", Name: a100, MemoryTotalMiB: 81920, MemoryUsedMiB: 72311, UtilizationPercent: ptr.To[int32](97), MaxClockMHz: 1410, ComputeCapability: "8.0"},
				{Index: 1, UUID: "GPU-8a61d0f4-3c92-b7e1-55d0-2f8c94a3e716", Name: a100, MemoryTotalMiB: 81920, MemoryUsedMiB: 72311, UtilizationPercent: ptr.To[int32](96), MaxClockMHz: 1410, ComputeCapability: "8.0"},
				{Index: 2, UUID: "GPU-c03e7b9d-9f14-2a6c-e8b3-71d5a0c4f29e", Name: a100, MemoryTotalMiB: 81920, MemoryUsedMiB: 72311, UtilizationPercent: ptr.To[int32](98), MaxClockMHz: 1410, ComputeCapability: "8.0"},
				{Index: 3, UUID: "GPU-1d9b4e62-a7c0-3f85-9b16-e4c2d8f07a53", Name: a100, MemoryTotalMiB: 81920, MemoryUsedMiB: 72309, UtilizationPercent: ptr.To[int32](97), MaxClockMHz: 1410, ComputeCapability: "8.0"},
				{Index: 4, UUID: "GPU-e57a2c18-64bd-0d9f-3e7a-b8c1f2946d05", Name: a100, MemoryTotalMiB: 81920, MemoryUsedMiB: 4, UtilizationPercent: ptr.To[int32](0), MaxClockMHz: 1410, ComputeCapability: "8.0"},
				{Index: 5, UUID: "GPU-7b3f91ad-d2e6-48c7-a0f9-3c6e51b8d274", Name: a100, MemoryTotalMiB: 81920, MemoryUsedMiB: 4, UtilizationPercent: ptr.To[int32](0), MaxClockMHz: 1410, ComputeCapability: "8.0"},
				{Index: 6, UUID: "GPU-29c6e0b7-5a1f-c4d3-87e2-d90b4a6f3c18", Name: a100, MemoryTotalMiB: 81920, MemoryUsedMiB: 38215, UtilizationPercent: ptr.To[int32](41), MaxClockMHz: 1410, ComputeCapability: "8.0"},
				{Index: 7, UUID: "GPU-f0a48d3c-be79-1625-dc4b-6a27e9f0b5c1", Name: a100, MemoryTotalMiB: 81920, MemoryUsedMiB: 38215, UtilizationPercent: ptr.To[int32](43), MaxClockMHz: 1410, ComputeCapability: "8.0"},
			},
		},
		{
			// T4s print [N/A] for utilization in some virtualised setups.
			file: "tesla-t4-x2.csv",
			wantCards: []Card{
				{Index: 0, UUID: "GPU-5e8d1a7c-02f4-9b3e-6c1d-a48f7e20b9d6", Name: t4, MemoryTotalMiB: t4Mem, MemoryUsedMiB: 3, MaxClockMHz: 1590, ComputeCapability: "7.5"},
				{Index: 1, UUID: "GPU-b2c79f04-e6a1-5d83-1f9c-07e3a6d4c8b2", Name: t4, MemoryTotalMiB: t4Mem, MemoryUsedMiB: 11204, MaxClockMHz: 1590, ComputeCapability: "7.5"},
			},
		},
		{
			// Driver 470 knows no compute_cap: 7 fields.
			file: "tesla-t4-x2-r470.csv",
			wantCards: []Card{
				{Index: 0, UUID: "GPU-5e8d1a7c-02f4-9b3e-6c1d-a48f7e20b9d6", Name: t4, MemoryTotalMiB: t4Mem, MemoryUsedMiB: 3, UtilizationPercent: ptr.To[int32](0), MaxClockMHz: 1590},
				{Index: 1, UUID: "GPU-b2c79f04-e6a1-5d83-1f9c-07e3a6d4c8b2", Name: t4, MemoryTotalMiB: t4Mem, MemoryUsedMiB: 11204, UtilizationPercent: ptr.To[int32](63), MaxClockMHz: 1590},
			},
		},
		{
			file: "h100-80gb-hbm3.csv",
			wantCards: []Card{
				{Index: 0, UUID: "GPU-9a1c64e3-7d2b-0f58-c3e9-5b84a1d7f026", Name: h100, MemoryTotalMiB: 81559, MemoryUsedMiB: 1, UtilizationPercent: ptr.To[int32](0), MaxClockMHz: 1980, ComputeCapability: "9.0"},
			},
		},
		{
			file: "rtx-4090.csv",
			wantCards: []Card{
				{Index: 0, UUID: "GPU-3d7e0b5a-c91f-8246-ae03-6f1b9d2c7e48", Name: rtx, MemoryTotalMiB: 24564, MemoryUsedMiB: 1893, UtilizationPercent: ptr.To[int32](12), MaxClockMHz: 3120, ComputeCapability: "8.9"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			got, err := Parse(readTestdata(t, tc.file))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.wantCards, got); diff != "" {
				t.Errorf("Parse (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestParse covers the values that cards may not report and malformed
// output: bad lines are errors naming line and field, good lines still
// come back.
func TestParse(t *testing.T) {
	const (
		good  = "0, GPU-a, Tesla T4, 15360, 3, 0, 1590, 7.5\n"
		good1 = "1, GPU-b, Tesla T4, 15360, 3, 0, 1590, 7.5\n"
	)
	goodCard := Card{Index: 0, UUID: "GPU-a", Name: t4, MemoryTotalMiB: t4Mem, MemoryUsedMiB: 3, UtilizationPercent: ptr.To[int32](0), MaxClockMHz: 1590, ComputeCapability: "7.5"}
	tests := []struct {
		name      string
		out       string
		wantCards []Card
		wantErr   string
	}{
		{
			name:      "not reported optional fields",
			out:       "0, GPU-a, Tesla T4, 15360, [N/A], [Not Supported], [N/A], [N/A]\n",
			wantCards: []Card{{Index: 0, UUID: "GPU-a", Name: t4, MemoryTotalMiB: t4Mem}},
		},
		{
			name:      "CRLF and blank lines",
			out:       "\r\n" + "0, GPU-a, Tesla T4, 15360, 3, 0, 1590, 7.5\r\n\r\n",
			wantCards: []Card{goodCard},
		},
		{
			name:    "empty output",
			out:     "",
			wantErr: "nvidia-smi printed no cards",
		},
		{
			name:    "blank output",
			out:     "\n \n",
			wantErr: "nvidia-smi printed no cards",
		},
		{
			name:      "non-numeric memory",
			out:       good + "1, GPU-b, Tesla T4, abc, 3, 0, 1590, 7.5\n",
			wantCards: []Card{goodCard},
			wantErr:   `line 2: memory.total "abc": not a number`,
		},
		{
			name:      "line numbers count blank lines",
			out:       good + "\n1, GPU-b, Tesla T4, 15360, 3, 0, 1590, 7.5, 1\n",
			wantCards: []Card{goodCard},
			wantErr:   "line 3: 9 fields, want 8 (" + Query + ") or 7 (without compute_cap)",
		},
		{
			name:    "too few fields",
			out:     "0, GPU-a, Tesla T4, 15360\n",
			wantErr: "line 1: 4 fields, want 8 (" + Query + ") or 7 (without compute_cap)",
		},
		{
			name:    "not CSV",
			out:     "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
			wantErr: "line 1: 1 fields, want 8 (" + Query + ") or 7 (without compute_cap)",
		},
		{
			name:    "negative index",
			out:     "-1, GPU-a, Tesla T4, 15360, 3, 0, 1590, 7.5\n",
			wantErr: `line 1: index "-1": negative`,
		},
		{
			name:    "index out of range",
			out:     "4294967296, GPU-a, Tesla T4, 15360, 3, 0, 1590, 7.5\n",
			wantErr: `line 1: index "4294967296": out of range`,
		},
		{
			name:    "index not reported",
			out:     "[N/A], GPU-a, Tesla T4, 15360, 3, 0, 1590, 7.5\n",
			wantErr: `line 1: index "[N/A]": not reported`,
		},
		{
			name:      "duplicate index",
			out:       good + good1 + good,
			wantCards: []Card{goodCard, {Index: 1, UUID: "GPU-b", Name: t4, MemoryTotalMiB: t4Mem, MemoryUsedMiB: 3, UtilizationPercent: ptr.To[int32](0), MaxClockMHz: 1590, ComputeCapability: "7.5"}},
			wantErr:   "line 3: index 0: duplicate of line 1",
		},
		{
			name:    "empty name",
			out:     "0, GPU-a, , 15360, 3, 0, 1590, 7.5\n",
			wantErr: "line 1: name: empty",
		},
		{
			name:    "zero memory",
			out:     "0, GPU-a, Tesla T4, 0, 0, 0, 1590, 7.5\n",
			wantErr: `line 1: memory.total "0": zero`,
		},
		{
			name:    "memory not reported",
			out:     "0, GPU-a, Tesla T4, [N/A], 0, 0, 1590, 7.5\n",
			wantErr: `line 1: memory.total "[N/A]": not reported`,
		},
		{
			name:    "memory with units",
			out:     "0, GPU-a, Tesla T4, 15360 MiB, 3 MiB, 0 %, 1590 MHz, 7.5\n",
			wantErr: `line 1: memory.total "15360 MiB": not a number`,
		},
		{
			name:    "negative memory used",
			out:     "0, GPU-a, Tesla T4, 15360, -5, 0, 1590, 7.5\n",
			wantErr: `line 1: memory.used "-5": negative`,
		},
		{
			name:    "utilization above 100",
			out:     "0, GPU-a, Tesla T4, 15360, 3, 101, 1590, 7.5\n",
			wantErr: `line 1: utilization.gpu "101": above 100`,
		},
		{
			name:    "negative clock",
			out:     "0, GPU-a, Tesla T4, 15360, 3, 0, -1590, 7.5\n",
			wantErr: `line 1: clocks.max.sm "-1590": negative`,
		},
		{
			name:    "bad compute capability",
			out:     "0, GPU-a, Tesla T4, 15360, 3, 0, 1590, 7\n",
			wantErr: `line 1: compute_cap "7": not major.minor`,
		},
		{
			name:      "all errors",
			out:       "x, GPU-a, Tesla T4, 15360, 3, 0, 1590, 7.5\n" + good1 + "2, GPU-c, Tesla T4, 15360, 3, 0, 1590\n" + "3, GPU-d\n",
			wantCards: []Card{{Index: 1, UUID: "GPU-b", Name: t4, MemoryTotalMiB: t4Mem, MemoryUsedMiB: 3, UtilizationPercent: ptr.To[int32](0), MaxClockMHz: 1590, ComputeCapability: "7.5"}, {Index: 2, UUID: "GPU-c", Name: t4, MemoryTotalMiB: t4Mem, MemoryUsedMiB: 3, UtilizationPercent: ptr.To[int32](0), MaxClockMHz: 1590}},
			wantErr:   "line 1: index \"x\": not a number\nline 4: 2 fields, want 8 (" + Query + ") or 7 (without compute_cap)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.out))
			if diff := cmp.Diff(tc.wantCards, got); diff != "" {
				t.Errorf("Parse cards (-want,+got):\n%s", diff)
			}
			var gotErr string
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("Parse error (-want,+got):\n%s", diff)
			}
		})
	}
}
