package heteropriority

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/pkg/gpu"
)

const maxScore = float64(fwk.MaxNodeScore)

// cpuPodScore is seed 001's PriorityScore (formula 5): with a the share of
// GPU nodes and lr the least-requested score, a CPU node scores
// 100a + (1-a)lr and a GPU node a*lr. A CPU node never scores below 100a
// and a GPU node never above it.
func cpuPodScore(a float64, gpuNode bool, lr float64) int64 {
	if gpuNode {
		return int64(math.Round(a * lr))
	}
	return int64(math.Round(maxScore*a + (1-a)*lr))
}

// leastRequested is upstream's LeastAllocated over CPU and memory, weight
// 1 each, with the pod placed: mean of (allocatable - requested) /
// allocatable * 100.
func leastRequested(req podRequest, ni fwk.NodeInfo) float64 {
	alloc, used := ni.GetAllocatable(), ni.GetRequested()
	free := func(allocatable, requested int64) float64 {
		if allocatable <= 0 || requested > allocatable {
			return 0
		}
		return float64(allocatable-requested) / float64(allocatable) * maxScore
	}
	return (free(alloc.GetMilliCPU(), used.GetMilliCPU()+req.MilliCPU) + free(alloc.GetMemory(), used.GetMemory()+req.Memory)) / 2
}

// gpuPodScore is 100 * (S_card + S_similarity) / 2 for the cards the pod
// would get on the node (the best-fit pick of GPUFit's Reserve).
func (pl *HeteroPriority) gpuPodScore(s *preScoreState, pod *corev1.Pod, ni fwk.NodeInfo) int64 {
	cards := pl.state.Cards(ni.Node(), true)
	usage := pl.state.Usage(ni, pod.UID, s.req.GPU.Count)
	picked, ok := gpu.Pick(cards, func(i int) bool { return usage.Used[i] }, s.req.GPU)
	if !ok {
		return 0
	}
	chosen := make([]gpu.Card, 0, len(picked))
	for _, c := range cards {
		for _, p := range picked {
			if c.Index == p {
				chosen = append(chosen, c)
			}
		}
	}
	sCard := pl.cardQuality(s, chosen)
	sSim := similarity(s.req, ni, cards, chosen, int64(len(cards)-len(usage.Used))-usage.Unknown)
	return int64(math.Round(maxScore * (sCard + sSim) / 2))
}

// cardQuality is S_card: the weighted mean of the chosen cards' compute
// capability, memory bandwidth and clock, each divided by the best in the
// cluster. A term that no card in the cluster reports is left out.
func (pl *HeteroPriority) cardQuality(s *preScoreState, chosen []gpu.Card) float64 {
	w := pl.weights
	var sum, weights float64
	for _, t := range []struct {
		weight int64
		best   float64
		value  func(gpu.Card) float64
	}{
		{w.ComputeCapability, s.maxCC, func(c gpu.Card) float64 { return c.ComputeCapability }},
		{w.MemoryBandwidth, s.maxBandwidth, func(c gpu.Card) float64 { return float64(c.BandwidthGBps) }},
		{w.MaxClock, s.maxClock, func(c gpu.Card) float64 { return float64(c.ClockMHz) }},
	} {
		if t.weight == 0 || t.best <= 0 {
			continue
		}
		var mean float64
		for _, c := range chosen {
			mean += t.value(c) / t.best
		}
		sum += float64(t.weight) * mean / float64(len(chosen))
		weights += float64(t.weight)
	}
	if weights == 0 {
		return 0
	}
	return sum / weights
}

// similarity is S_similarity = 1 - mean_k((N_k - R_k) / C_k) over the free
// cards, memory per card, cores per card, free CPU and free memory: the
// node left with the least of each after the pod is placed scores highest
// (best fit keeps large holes for large jobs). Dimensions the node has no
// capacity in are left out.
func similarity(req podRequest, ni fwk.NodeInfo, cards, chosen []gpu.Card, freeCards int64) float64 {
	var maxMem, maxCores int64
	for _, c := range cards {
		maxMem = max(maxMem, c.MemoryMiB)
		maxCores = max(maxCores, c.Cores)
	}
	var memPerCard, coresPerCard float64
	for _, c := range chosen {
		memPerCard += float64(c.MemoryMiB)
		coresPerCard += float64(c.Cores)
	}
	memPerCard /= float64(len(chosen))
	coresPerCard /= float64(len(chosen))
	alloc, used := ni.GetAllocatable(), ni.GetRequested()
	dims := []struct{ n, r, c float64 }{
		{float64(freeCards), float64(req.GPU.Count), float64(len(cards))},
		{memPerCard, float64(req.GPU.MemoryMiB), float64(maxMem)},
		{coresPerCard, float64(req.GPU.Cores), float64(maxCores)},
		{float64(alloc.GetMilliCPU() - used.GetMilliCPU()), float64(req.MilliCPU), float64(alloc.GetMilliCPU())},
		{float64(alloc.GetMemory() - used.GetMemory()), float64(req.Memory), float64(alloc.GetMemory())},
	}
	var waste float64
	var n int
	for _, d := range dims {
		if d.c <= 0 {
			continue
		}
		waste += math.Max(0, d.n-d.r) / d.c
		n++
	}
	if n == 0 {
		return 0
	}
	return math.Max(0, 1-waste/float64(n))
}
