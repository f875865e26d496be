package metrics

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/utils/ptr"
)

const gib = 1 << 30

// nodeWrapper builds a Node in one line: makeNode("n1").cpu(4000, 800).obj().
type nodeWrapper struct{ Node }

func makeNode(name string) nodeWrapper { return nodeWrapper{Node{Name: name}} }

// cpu sets allocatable and requested milli-CPU.
func (w nodeWrapper) cpu(allocatable, used int64) nodeWrapper {
	w.MilliCPU, w.UsedMilliCPU = allocatable, used
	return w
}

// mem sets allocatable and requested memory in GiB.
func (w nodeWrapper) mem(allocatable, used int64) nodeWrapper {
	w.Memory, w.UsedMemory = allocatable*gib, used*gib
	return w
}

// gpu sets the card count and the allocated milli.
func (w nodeWrapper) gpu(cards int, usedMilli int64) nodeWrapper {
	w.GPUs, w.UsedGPUMilli = cards, usedMilli
	return w
}

// load sets a node's L and S.
func (w nodeWrapper) load(l, s float64) nodeWrapper {
	w.Load, w.Performance = l, s
	return w
}

func (w nodeWrapper) obj() Node { return w.Node }

func TestMeanNodeVariance(t *testing.T) {
	// 800/4000 = 20%, 4/8 = 50%, 3200/4000 = 80%: mean 50, deviations
	// -30, 0, 30, variance (900 + 0 + 900)/3 = 600.
	n1 := makeNode("n1").cpu(4000, 800).mem(8, 4).gpu(4, 3200).obj()
	// 4800/8000 = 60%, 6/10 = 60%, 1200/2000 = 60% (one card and a 0.2
	// share of the other): variance 0.
	n2 := makeNode("n2").cpu(8000, 4800).mem(10, 6).gpu(2, 1200).obj()
	// 200/2000 = 10%, 8/20 = 40%, 8000/8000 = 100%: mean 50, deviations
	// -40, -10, 50, variance (1600 + 100 + 2500)/3 = 1400.
	n3 := makeNode("n3").cpu(2000, 200).mem(20, 8).gpu(8, 8000).obj()
	// CPU-only: 1200/4000 = 30%, 7/10 = 70%: mean 50, deviations -20, 20,
	// variance (400 + 400)/2 = 400.
	cpuOnly := makeNode("c1").cpu(4000, 1200).mem(10, 7).obj()
	tests := []struct {
		name  string
		nodes []Node
		want  float64
	}{
		{name: "no nodes", want: 0},
		// The PCC experiment's metric on a heterogeneous trio:
		// (600 + 0 + 1400)/3 = 666.67.
		{name: "three GPU nodes", nodes: []Node{n1, n2, n3}, want: 2000.0 / 3},
		{name: "CPU-only node", nodes: []Node{cpuOnly}, want: 400},
		// 50% and 50%: variance 0. Were gpu% counted as 0, (50, 50, 0)
		// would give mean 33.33 and variance (277.78 + 277.78 + 1111.11)/3
		// = 555.56 for a perfectly balanced node.
		{name: "balanced CPU-only node", nodes: []Node{makeNode("c2").cpu(4000, 2000).mem(16, 8).obj()}, want: 0},
		// (600 + 400)/2 = 500.
		{name: "GPU and CPU-only nodes", nodes: []Node{n1, cpuOnly}, want: 500},
		// The node with nothing allocatable is not in the mean: 600/1, not
		// (600 + 0)/2.
		{name: "node without resources left out", nodes: []Node{n1, makeNode("empty").obj()}, want: 600},
		// Memory allocatable 0: only cpu% = 50 counts, variance 0; then
		// (600 + 0)/2 = 300.
		{name: "zero memory allocatable", nodes: []Node{n1, makeNode("odd").cpu(4000, 2000).obj()}, want: 300},
		// 0%, 0%, 0%: variance 0.
		{name: "idle GPU node", nodes: []Node{makeNode("idle").cpu(4000, 0).mem(8, 0).gpu(4, 0).obj()}, want: 0},
	}
	approx := cmpopts.EquateApprox(0, 1e-9) // the rounding of 2000/3 and such
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, MeanNodeVariance(tc.nodes), approx); diff != "" {
				t.Errorf("MeanNodeVariance (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestBalanceEfficiencyH(t *testing.T) {
	tests := []struct {
		name  string
		nodes []Node
		want  *float64
	}{
		{name: "no nodes", want: nil},
		{name: "no node with performance", nodes: []Node{makeNode("n1").load(0.5, 0).obj()}, want: nil},
		// R = 0.2/0.4 = 0.4/0.8 = 0.5/1 = 0.5: stddev 0, H = 1 - 0/0.5 = 1.
		{name: "equal R", nodes: []Node{
			makeNode("n1").load(0.2, 0.4).obj(),
			makeNode("n2").load(0.4, 0.8).obj(),
			makeNode("n3").load(0.5, 1).obj(),
		}, want: ptr.To(1.0)},
		// R = 0.2, 0.6 (the node without S is left out): mean 0.4,
		// population stddev sqrt((0.2² + 0.2²)/2) = 0.2, H = 1 - 0.2/0.4 = 0.5.
		{name: "spread R", nodes: []Node{
			makeNode("n1").load(0.2, 1).obj(),
			makeNode("n2").load(0.6, 1).obj(),
			makeNode("unknown").load(0.9, 0).obj(),
		}, want: ptr.To(0.5)},
		// R = 0.3/0.5 = 0.6 and 0.3/1 = 0.3: mean 0.45, stddev 0.15,
		// H = 1 - 0.15/0.45 = 2/3. Equal loads are not balance when the
		// nodes differ in performance.
		{name: "performance matters", nodes: []Node{
			makeNode("slow").load(0.3, 0.5).obj(),
			makeNode("fast").load(0.3, 1).obj(),
		}, want: ptr.To(2.0 / 3)},
		// R = 0, 0, 0, 1: mean 0.25, stddev sqrt((3*0.25² + 0.75²)/4) =
		// sqrt(0.1875) = 0.433, 1 - 0.433/0.25 = -0.73, floored at 0.
		{name: "floored at zero", nodes: []Node{
			makeNode("n1").load(0, 1).obj(),
			makeNode("n2").load(0, 1).obj(),
			makeNode("n3").load(0, 1).obj(),
			makeNode("n4").load(1, 1).obj(),
		}, want: ptr.To(0.0)},
		// mean(R) = 0: defined as perfectly balanced.
		{name: "all idle", nodes: []Node{
			makeNode("n1").load(0, 0.5).obj(),
			makeNode("n2").load(0, 1).obj(),
		}, want: ptr.To(1.0)},
		// One node is the whole cluster: stddev 0, H = 1.
		{name: "one node", nodes: []Node{makeNode("n1").load(0.7, 0.3).obj()}, want: ptr.To(1.0)},
		// L/S = 1/5e-324 overflows to +Inf. Scaled by min S = 5e-324, the
		// Rs are 1*(5e-324/1) = 5e-324 and 1*(5e-324/5e-324) = 1: mean 0.5,
		// stddev 0.5, H = 1 - 0.5/0.5 = 0.
		{name: "ratio beyond float64", nodes: []Node{
			makeNode("n1").load(1, 1).obj(),
			makeNode("n2").load(1, 5e-324).obj(),
		}, want: ptr.To(0.0)},
		// Negative, NaN and infinite samples are left out: only n1 counts,
		// H = 1.
		{name: "bad samples left out", nodes: []Node{
			makeNode("n1").load(0.5, 1).obj(),
			makeNode("negative").load(-0.5, 1).obj(),
			makeNode("nan").load(math.NaN(), 1).obj(),
			makeNode("inf").load(0.5, math.Inf(1)).obj(),
		}, want: ptr.To(1.0)},
	}
	approx := cmpopts.EquateApprox(0, 1e-9)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, BalanceEfficiencyH(tc.nodes), approx); diff != "" {
				t.Errorf("BalanceEfficiencyH (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestGPUAllocation(t *testing.T) {
	tests := []struct {
		name            string
		nodes           []Node
		wantRate        *float64
		wantUnallocated *float64
	}{
		{name: "no nodes"},
		{name: "no GPUs", nodes: []Node{makeNode("c1").cpu(4000, 1000).obj()}},
		// Capacity (8 + 4) * 1000 = 12000 milli; allocated 5500 (five
		// cards and half of a sixth) + 3500 = 9000; rate 9000/12000 = 0.75,
		// unallocated 100 - 100*0.75 = 25. The CPU-only node adds nothing.
		{name: "8 and 4 GPUs with shares", nodes: []Node{
			makeNode("g8").gpu(8, 5500).obj(),
			makeNode("g4").gpu(4, 3500).obj(),
			makeNode("c1").cpu(4000, 1000).obj(),
		}, wantRate: ptr.To(0.75), wantUnallocated: ptr.To(25.0)},
		// 1000/12000 = 1/12; unallocated 100 - 100/12 = 91.67.
		{name: "one card used", nodes: []Node{
			makeNode("g8").gpu(8, 1000).obj(),
			makeNode("g4").gpu(4, 0).obj(),
		}, wantRate: ptr.To(1.0 / 12), wantUnallocated: ptr.To(100 - 100.0/12)},
		// 8000 + 4000 = 12000 of 12000: rate 1, unallocated 0.
		{name: "full", nodes: []Node{
			makeNode("g8").gpu(8, 8000).obj(),
			makeNode("g4").gpu(4, 4000).obj(),
		}, wantRate: ptr.To(1.0), wantUnallocated: ptr.To(0.0)},
		// 0 of 12000: rate 0, unallocated 100.
		{name: "idle", nodes: []Node{
			makeNode("g8").gpu(8, 0).obj(),
			makeNode("g4").gpu(4, 0).obj(),
		}, wantRate: ptr.To(0.0), wantUnallocated: ptr.To(100.0)},
	}
	approx := cmpopts.EquateApprox(0, 1e-9)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantRate, GPUAllocationRate(tc.nodes), approx); diff != "" {
				t.Errorf("GPUAllocationRate (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantUnallocated, UnallocatedGPUPct(tc.nodes), approx); diff != "" {
				t.Errorf("UnallocatedGPUPct (-want,+got):\n%s", diff)
			}
		})
	}
}
