package metrics

import (
	"math"
	"slices"

	"k8s.io/utils/ptr"
)

// Node is a node at one instant: what it can hold (allocatable) and what
// the pods bound to it request.
type Node struct {
	// Name identifies the node in reports; the arithmetic does not use it.
	Name string
	// MilliCPU and Memory (bytes) are allocatable.
	MilliCPU, Memory int64
	// UsedMilliCPU and UsedMemory are requested by the bound pods.
	UsedMilliCPU, UsedMemory int64
	// GPUs is the number of cards.
	GPUs int
	// UsedGPUMilli is the sum over the cards of the allocated share in milli
	// (1000 per whole card).
	UsedGPUMilli int64
	// Load and Performance are L in [0, 1] and S in (0, 1] as LoadAware's README defines them,
	// used by BalanceEfficiencyH; both are 0 when unknown.
	Load, Performance float64
}

// MeanNodeVariance is the balance metric of the PCC experiment: for
// each node the population variance of its utilisation percentages
// (cpu%, mem%, gpu%, each requested / allocatable * 100), then the mean
// over the nodes. Lower is better balanced. Population variance,
// because the three percentages are all of the node, not a sample of it.
//
// Only the resources a node has count: a node without GPUs contributes the
// variance of (cpu%, mem%). Counting its gpu% as 0 would charge it for a
// resource it cannot use: a CPU-only node at 50% CPU and 50% memory is
// perfectly balanced, yet (50, 50, 0) has variance 555.6, and a policy
// would score better the more it left CPU-only nodes empty. The same rule
// covers zero allocatable CPU or memory, and gpu% is the allocated milli
// over 1000 per card, so shared cards count by their share. A node with no
// resource at all has nothing to balance and is left out of the mean;
// MeanNodeVariance is 0 when no node is left.
func MeanNodeVariance(nodes []Node) float64 {
	var sum float64
	var counted int
	for _, n := range nodes {
		pcts := utilisations(n)
		if len(pcts) == 0 {
			continue
		}
		_, variance := meanVariance(pcts)
		sum += variance
		counted++
	}
	if counted == 0 {
		return 0
	}
	return sum / float64(counted)
}

// utilisations returns the utilisation percentages of the resources n has:
// cpu%, mem% and gpu%, each left out when its allocatable is not positive.
// The arithmetic is in float64, so that no product overflows.
func utilisations(n Node) []float64 {
	resources := [...]struct{ used, allocatable float64 }{
		{float64(n.UsedMilliCPU), float64(n.MilliCPU)},
		{float64(n.UsedMemory), float64(n.Memory)},
		{float64(n.UsedGPUMilli), float64(n.GPUs) * 1000},
	}
	pcts := make([]float64, 0, len(resources))
	for _, r := range resources {
		if r.allocatable > 0 {
			pcts = append(pcts, 100*r.used/r.allocatable)
		}
	}
	return pcts
}

// BalanceEfficiencyH is the cluster's balance efficiency:
// H = 1 - stddev(R)/mean(R) with R_i = L_i/S_i, the load per unit of
// performance, floored at 0; 1 is perfect balance. stddev is the population
// standard deviation: the nodes are the whole cluster, not a sample of it.
// When every R is 0 (all nodes idle) H is 1: an idle cluster is perfectly
// balanced, and 0/0 must not reach the report.
//
// Nodes of unknown performance (S = 0) are left out, and so are nodes whose
// L or S is negative, NaN or infinite, so that a bad sample cannot turn H
// into NaN; BalanceEfficiencyH is nil when no node is left.
func BalanceEfficiencyH(nodes []Node) *float64 {
	var loads, perfs []float64
	for _, n := range nodes {
		// NaN fails both comparisons.
		if n.Load >= 0 && n.Performance > 0 && !math.IsInf(n.Load, 1) && !math.IsInf(n.Performance, 1) {
			loads = append(loads, n.Load)
			perfs = append(perfs, n.Performance)
		}
	}
	if len(loads) == 0 {
		return nil
	}
	// H does not change when every R is multiplied by one constant, so R is
	// computed as L_i * (min S / S_i), which stays in [0, L_i], and then
	// divided by its maximum into [0, 1]. L/S itself overflows for a tiny S,
	// and a sum of large Rs overflows; the scaled values do neither.
	minPerf := slices.Min(perfs)
	rs := make([]float64, len(loads))
	for i := range loads {
		rs[i] = loads[i] * (minPerf / perfs[i])
	}
	top := slices.Max(rs)
	if top == 0 {
		return ptr.To(1.0)
	}
	for i := range rs {
		rs[i] /= top
	}
	mean, variance := meanVariance(rs)
	return ptr.To(max(0, 1-math.Sqrt(variance)/mean))
}

// meanVariance returns the mean and the population variance of xs, which
// is not empty.
func meanVariance(xs []float64) (mean, variance float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		d := x - mean
		variance += d * d
	}
	return mean, variance / float64(len(xs))
}

// GPUAllocationRate is the allocated share of the cluster's GPUs:
// sum(UsedGPUMilli) / (sum(GPUs) * 1000) over the nodes with cards, in
// [0, 1] unless the input over-allocates a card, which it then shows rather
// than hides. It is nil when the cluster has no GPUs.
func GPUAllocationRate(nodes []Node) *float64 {
	var used, capacity float64
	for _, n := range nodes {
		if n.GPUs > 0 {
			used += float64(n.UsedGPUMilli)
			capacity += float64(n.GPUs) * 1000
		}
	}
	if capacity == 0 {
		return nil
	}
	return ptr.To(used / capacity)
}

// UnallocatedGPUPct is the FGD paper's metric
// (traces/alibaba-gpu-v2023/README.md): 100 - 100 * allocated GPU milli /
// (GPUs * 1000), the share of GPU capacity left unallocated, fragments of
// shared cards included. The runner reads it when the arrived GPU request
// reaches a given share of capacity. It is nil when the cluster has no GPUs.
func UnallocatedGPUPct(nodes []Node) *float64 {
	rate := GPUAllocationRate(nodes)
	if rate == nil {
		return nil
	}
	return ptr.To(100 - 100*(*rate))
}
