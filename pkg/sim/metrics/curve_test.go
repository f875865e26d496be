package metrics

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestUnallocatedCurve(t *testing.T) {
	// Capacity 1000. Five pods of 300, 250, 0, 450, 200 requested; the
	// fourth does not fit. After each pod:
	//   requested  300  550  550  1000  1200
	//   arrived%    30   55   55   100   120
	//   allocated  300  550  550   550   750
	//   alloc%      30   55   55    55    75
	requested := []int64{300, 550, 550, 1000, 1200}
	allocated := []int64{300, 550, 550, 550, 750}
	tests := []struct {
		name     string
		percents []int
		want     []CurvePoint
	}{
		{"exact points", []int{30, 100, 120}, []CurvePoint{{30, 70}, {100, 45}, {120, 25}}},
		// 55 is reached by two pods: the mean of 55 and 55.
		{"mean over the pods at a point", []int{55}, []CurvePoint{{55, 45}}},
		// No pod at 56: the window 55..57 holds the two pods at 55.
		{"window of one either side", []int{56}, []CurvePoint{{56, 45}}},
		// 80 has nothing within 1: left out, as is 130 beyond the end.
		{"unreached points left out", []int{80, 130}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := UnallocatedCurve(requested, allocated, 1000, tc.percents)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("UnallocatedCurve (-want,+got):\n%s", diff)
			}
		})
	}
}

// Arrived percentages round half to even, as the paper's Python scripts:
// 99.5% and 100.5% both read as 100, 98.5% as 98.
func TestUnallocatedCurveRounding(t *testing.T) {
	requested := []int64{985, 995, 1005}
	allocated := []int64{900, 910, 920}
	got := UnallocatedCurve(requested, allocated, 1000, []int{98, 100})
	want := []CurvePoint{{98, 10}, {100, 100 - 91.5}}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("UnallocatedCurve (-want,+got):\n%s", diff)
	}
}

func TestUnallocatedCurveBadInput(t *testing.T) {
	if got := UnallocatedCurve([]int64{1}, []int64{1}, 0, []int{100}); got != nil {
		t.Errorf("capacity 0: got %v, want nil", got)
	}
	if got := UnallocatedCurve([]int64{1, 2}, []int64{1}, 10, []int{100}); got != nil {
		t.Errorf("mismatched lengths: got %v, want nil", got)
	}
}
