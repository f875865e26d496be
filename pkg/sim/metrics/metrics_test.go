package metrics

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

func TestPercentilesOf(t *testing.T) {
	tests := []struct {
		name   string
		values []float64
		want   *Percentiles
	}{
		{name: "none", want: nil},
		// n = 1: every rank is ceil(p/100 * 1) = 1.
		{name: "one value", values: []float64{7}, want: &Percentiles{P50: 7, P95: 7}},
		// n = 10: p50 is rank ceil(0.50*10) = 5 -> 5; p95 is rank
		// ceil(0.95*10) = ceil(9.5) = 10 -> 10 (linear interpolation would
		// give 5.5 and 9.55, values no one had).
		{name: "1..10", values: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, want: &Percentiles{P50: 5, P95: 10}},
		// n = 20, values 1..20: p50 is rank 0.50*20 = 10 -> 10; p95 is rank
		// 0.95*20 = 19 exactly -> 19, not 20.
		{name: "1..20 whole ranks", values: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20},
			want: &Percentiles{P50: 10, P95: 19}},
		// Sorted: 0.5, 2, 30. p50 is rank ceil(1.5) = 2 -> 2; p95 is rank
		// ceil(2.85) = 3 -> 30.
		{name: "unsorted", values: []float64{30, 0.5, 2}, want: &Percentiles{P50: 2, P95: 30}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]float64(nil), tc.values...)
			got := PercentilesOf(in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PercentilesOf (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.values, in); diff != "" {
				t.Errorf("PercentilesOf modified its input (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPodsPerSecond(t *testing.T) {
	tests := []struct {
		name    string
		pods    int
		elapsed time.Duration
		want    float64
	}{
		// 50 pods / 4 s = 12.5.
		{name: "rate", pods: 50, elapsed: 4 * time.Second, want: 12.5},
		// 3 pods / 0.5 s = 6.
		{name: "under a second", pods: 3, elapsed: 500 * time.Millisecond, want: 6},
		{name: "no time", pods: 3, want: 0},
		{name: "negative time", pods: 3, elapsed: -time.Second, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PodsPerSecond(tc.pods, tc.elapsed)); diff != "" {
				t.Errorf("PodsPerSecond (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestResultJSON pins the report's keys: they are read by other tools, so a
// change here is a breaking change.
func TestResultJSON(t *testing.T) {
	tests := []struct {
		name   string
		result Result
		want   string
	}{
		{
			name: "every metric",
			result: Result{
				PendingPods:        2,
				MeanNodeVariance:   666.5,
				BalanceEfficiencyH: ptr.To(0.5),
				GPUAllocationRate:  ptr.To(0.75),
				UnallocatedGPUPct:  ptr.To(25.0),
				UnallocatedGPUPctCurve: []CurvePoint{
					{ArrivedPct: 80, UnallocatedGPUPct: 30},
					{ArrivedPct: 130, UnallocatedGPUPct: 12.3},
				},
				PartialGroups:    1,
				GroupWaitSeconds: &Percentiles{P50: 5, P95: 10},
				MisplacedGPUPods: 3,
				PodsPerSecond:    12.5,
			},
			want: `{"pending_pods":2,"mean_node_variance":666.5,"balance_efficiency_h":0.5,` +
				`"gpu_allocation_rate":0.75,"unallocated_gpu_pct":25,` +
				`"unallocated_gpu_pct_curve":[{"arrived_pct":80,"unallocated_gpu_pct":30},{"arrived_pct":130,"unallocated_gpu_pct":12.3}],` +
				`"partial_groups":1,"group_wait_seconds":{"p50":5,"p95":10},"misplaced_gpu_pods":3,"pods_per_second":12.5}`,
		},
		{
			// Measured zeros stay; metrics the scenario cannot define go.
			name:   "CPU-only scenario without gangs",
			result: Result{},
			want:   `{"pending_pods":0,"mean_node_variance":0,"partial_groups":0,"misplaced_gpu_pods":0,"pods_per_second":0}`,
		},
		{
			// A measured 0 is not "not measured": a fully allocated
			// cluster reports unallocated_gpu_pct 0 and H 0.
			name:   "zero pointers are kept",
			result: Result{BalanceEfficiencyH: ptr.To(0.0), UnallocatedGPUPct: ptr.To(0.0)},
			want: `{"pending_pods":0,"mean_node_variance":0,"balance_efficiency_h":0,"unallocated_gpu_pct":0,` +
				`"partial_groups":0,"misplaced_gpu_pods":0,"pods_per_second":0}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.result)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("JSON (-want,+got):\n%s", diff)
			}
		})
	}
}
