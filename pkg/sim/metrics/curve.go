package metrics

import "math"

// UnallocatedCurve reads the unallocated GPU percentage of a trace replay
// at each arrived percentage of percents, the way the FGD paper's analysis
// scripts read it (merge_alloc_discrete in hkust-adsl/kubernetes-scheduler-
// simulator). requested[i] and allocated[i] are the GPU requested by the
// first i+1 pods of the sequence and the GPU allocated after the scheduler
// handled them, in the unit of capacity. After each pod, arrived% =
// round(100*requested/capacity), rounded half to even as Python's round,
// and allocated% = 100*allocated/capacity. The value at x is 100 less the
// mean allocated% over the pods with arrived% == x, or, when no pod has
// exactly x, over those within x-1..x+1; a percentage no pod comes within 1
// of is left out. A sequence of pods without GPUs moves arrived% in no
// step, so the mean is over every pod handled while it stood at x.
func UnallocatedCurve(requested, allocated []int64, capacity int64, percents []int) []CurvePoint {
	if capacity <= 0 || len(requested) != len(allocated) {
		return nil
	}
	arrived := make([]int, len(requested))
	for i, r := range requested {
		arrived[i] = int(math.RoundToEven(100 * float64(r) / float64(capacity)))
	}
	mean := func(lo, hi int) (float64, bool) {
		var sum float64
		n := 0
		for i, a := range arrived {
			if a >= lo && a <= hi {
				sum += 100 * float64(allocated[i]) / float64(capacity)
				n++
			}
		}
		if n == 0 {
			return 0, false
		}
		return sum / float64(n), true
	}
	var out []CurvePoint
	for _, x := range percents {
		m, ok := mean(x, x)
		if !ok {
			m, ok = mean(x-1, x+1)
		}
		if ok {
			out = append(out, CurvePoint{ArrivedPct: x, UnallocatedGPUPct: 100 - m})
		}
	}
	return out
}
