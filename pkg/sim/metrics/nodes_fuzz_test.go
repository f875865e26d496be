package metrics

import (
	"encoding/binary"
	"math"
	"testing"
)

// FuzzNodeMetrics checks that the node metrics stay finite and in range for
// any non-negative capacities and requests, zeros and extremes included,
// and for any L and S: encoding/json refuses NaN and infinities, so one of
// them would lose the whole report.
func FuzzNodeMetrics(f *testing.F) {
	const fields = 8 // uint64s per node, in the order read below
	words := func(ws ...uint64) []byte {
		var b []byte
		for _, w := range ws {
			b = binary.LittleEndian.AppendUint64(b, w)
		}
		return b
	}
	f.Add([]byte{})
	f.Add(make([]byte, 8*fields)) // one node with every field 0
	// Requests of MaxInt64 on capacities of 1, and L/S = MaxFloat64/5e-324
	// (the float64 with bits 1).
	f.Add(words(1, math.MaxInt64, 1, math.MaxInt64, 1, math.MaxInt64,
		math.Float64bits(math.MaxFloat64), 1))
	// Two nodes, one with S = 5e-324 and one idle.
	f.Add(words(4000, 800, 8, 4, 4, 3200, math.Float64bits(1), 1,
		4000, 0, 8, 0, 0, 0, 0, math.Float64bits(1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() uint64 {
			var b [8]byte
			n := copy(b[:], data)
			data = data[n:]
			return binary.LittleEndian.Uint64(b[:])
		}
		nonNegative := func() int64 { return int64(next() & math.MaxInt64) }
		var nodes []Node
		for len(data) > 0 {
			nodes = append(nodes, Node{
				MilliCPU: nonNegative(), UsedMilliCPU: nonNegative(),
				Memory: nonNegative(), UsedMemory: nonNegative(),
				GPUs: int(nonNegative()), UsedGPUMilli: nonNegative(),
				Load: math.Float64frombits(next()), Performance: math.Float64frombits(next()),
			})
		}
		finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
		if v := MeanNodeVariance(nodes); !finite(v) || v < 0 {
			t.Errorf("MeanNodeVariance(%+v) = %v", nodes, v)
		}
		if h := BalanceEfficiencyH(nodes); h != nil && !(*h >= 0 && *h <= 1) {
			t.Errorf("BalanceEfficiencyH(%+v) = %v", nodes, *h)
		}
		if r := GPUAllocationRate(nodes); r != nil && (!finite(*r) || *r < 0) {
			t.Errorf("GPUAllocationRate(%+v) = %v", nodes, *r)
		}
		if u := UnallocatedGPUPct(nodes); u != nil && !finite(*u) {
			t.Errorf("UnallocatedGPUPct(%+v) = %v", nodes, *u)
		}
	})
}
