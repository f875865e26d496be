package gpuledger

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aisched/aisched/pkg/gpu"
)

func TestPickWhole(t *testing.T) {
	// A mixed node: two 16 GiB cards, two 32 GiB cards, card 3 unhealthy.
	cards := []gpu.Card{
		{Index: 0, Model: "V100", MemoryMiB: 32768, Cores: 5120, Healthy: true},
		{Index: 1, Model: "T4", MemoryMiB: 16384, Cores: 2560, Healthy: true},
		{Index: 2, Model: "T4", MemoryMiB: 16384, Cores: 2560, Healthy: true},
		{Index: 3, Model: "V100", MemoryMiB: 32768, Cores: 5120, Healthy: false},
		{Index: 4, Model: "V100", MemoryMiB: 32768, Cores: 5120, Healthy: true},
	}
	tests := []struct {
		name   string
		used   []int
		req    gpu.Request
		want   []int
		wantOK bool
	}{
		{"smallest cards first", nil, gpu.Request{Count: 2}, []int{1, 2}, true},
		{"memory constraint skips small cards", nil, gpu.Request{Count: 2, MemoryMiB: 30000}, []int{0, 4}, true},
		{"unhealthy card never given", []int{0}, gpu.Request{Count: 2, MemoryMiB: 30000}, nil, false},
		{"held cards skipped", []int{1}, gpu.Request{Count: 2}, []int{0, 2}, true},
		{"cores constraint", nil, gpu.Request{Count: 1, Cores: 3000}, []int{0}, true},
		{"model constraint", nil, gpu.Request{Count: 1, Models: []string{"v100"}}, []int{0}, true},
		{"too many", nil, gpu.Request{Count: 5}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var u Usage
			for _, i := range tc.used {
				u = u.With([]int{i}, Share{})
			}
			got, ok := u.PickWhole(cards, tc.req, nil)
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("picked (-want,+got):\n%s", diff)
			}
		})
	}
}
