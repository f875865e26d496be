package heteropriority

import (
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/pkg/gpu"
)

const maxScore = float64(fwk.MaxScore)

// cpuPodScore is the CPU pods' PriorityScore: with a the share of
// GPU nodes and lr the least-requested score, a CPU node scores
// 100a + (1-a)lr and a GPU node a*lr. A CPU node never scores below 100a
// and a GPU node never above it.
func cpuPodScore(a float64, gpuNode bool, lr float64) int64 {
	if gpuNode {
		return int64(math.Round(a * lr))
	}
	return int64(math.Round(maxScore*a + (1-a)*lr))
}

// tierScore ranks a node for a CPU pod by its type alone (cpuPodScore:
// Tier): 100 for a CPU node, 0 for a GPU node, so that other plugins rank
// the nodes of one tier and the tier always wins at a weight above theirs
// together.
func tierScore(gpuNode bool) int64 {
	if gpuNode {
		return 0
	}
	return fwk.MaxScore
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
	set := pl.state.Cards(ni.Node())
	if set == nil {
		return 0
	}
	var chosen summary
	var freeCards int64
	if allocatable := ni.GetAllocatable().GetScalarResources()[gpu.ResourceName]; set.Interchangeable(allocatable, s.req.GPU) && !pl.state.HasShared(ni.Node().Name) {
		// Any card stands for the pick; no scan of the node's pods.
		if !set.First.Satisfies(s.req.GPU) {
			return 0
		}
		chosen = summaryOf(&set.First)
		freeCards = allocatable - ni.GetRequested().GetScalarResources()[gpu.ResourceName]
	} else {
		usage := pl.state.Usage(ni, pod.UID, s.req.GPU.WholeCards())
		var buf [64]int
		picked, ok := usage.Pick(set.Cards, s.req.GPU, buf[:0])
		if !ok || len(picked) == 0 {
			return 0
		}
		chosen = chosenSummary(set.Cards, picked)
		// Free cards the pod could use (healthy, meeting its constraints).
		_, freeCards = usage.Fit(set.Cards, s.req.GPU)
	}
	if freeCards < s.req.GPU.Count {
		return 0
	}
	sCard := pl.cardQuality(s, chosen)
	sSim := similarity(s.req, ni, set, chosen, freeCards)
	return int64(math.Round(maxScore * (sCard + sSim) / 2))
}

// summary holds the means over the cards a pod would get.
type summary struct {
	cc, bandwidth, clock, memoryMiB, cores float64
}

func summaryOf(c *gpu.Card) summary {
	return summary{c.ComputeCapability, float64(c.BandwidthGBps), float64(c.ClockMHz), float64(c.MemoryMiB), float64(c.Cores)}
}

func chosenSummary(cards []gpu.Card, picked []int) summary {
	var s summary
	for _, idx := range picked {
		if c := gpu.CardByIndex(cards, idx); c != nil {
			one := summaryOf(c)
			s.cc += one.cc
			s.bandwidth += one.bandwidth
			s.clock += one.clock
			s.memoryMiB += one.memoryMiB
			s.cores += one.cores
		}
	}
	n := float64(len(picked))
	return summary{s.cc / n, s.bandwidth / n, s.clock / n, s.memoryMiB / n, s.cores / n}
}

// cardQuality is S_card: the weighted mean of the chosen cards' compute
// capability, memory bandwidth and clock, each divided by the best in the
// cluster. A term that no card in the cluster reports is left out.
func (pl *HeteroPriority) cardQuality(s *preScoreState, chosen summary) float64 {
	w := pl.weights
	var sum, weights float64
	for _, t := range [...]struct {
		weight      int64
		best, value float64
	}{
		{w.ComputeCapability, s.maxCC, chosen.cc},
		{w.MemoryBandwidth, s.maxBandwidth, chosen.bandwidth},
		{w.MaxClock, s.maxClock, chosen.clock},
	} {
		if t.weight == 0 || t.best <= 0 {
			continue
		}
		sum += float64(t.weight) * t.value / t.best
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
func similarity(req podRequest, ni fwk.NodeInfo, set *gpu.Set, chosen summary, freeCards int64) float64 {
	alloc, used := ni.GetAllocatable(), ni.GetRequested()
	dims := [...]struct{ n, r, c float64 }{
		{float64(freeCards), float64(req.GPU.Count), float64(len(set.Cards))},
		{chosen.memoryMiB, float64(req.GPU.MemoryMiB), float64(set.MaxMemoryMiB)},
		{chosen.cores, float64(req.GPU.Cores), float64(set.MaxCores)},
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

// scoreKey is what a GPU pod's score depends on besides the node: its
// request and the cluster's best card values, as a comparable value.
type scoreKey struct {
	count, milli, gpuMemMiB, memoryMiB, cores  int64
	models, excludeModels, uuids, excludeUUIDs string
	milliCPU, memory                           int64
	maxCC, maxBandwidth, maxClock              float64
}

func keyOf(s *preScoreState) scoreKey {
	r := s.req.GPU
	return scoreKey{
		count: r.Count, milli: r.Milli, gpuMemMiB: r.GPUMemMiB, memoryMiB: r.MemoryMiB, cores: r.Cores,
		models: strings.Join(r.Models, ","), excludeModels: strings.Join(r.ExcludeModels, ","),
		uuids: strings.Join(r.UUIDs, ","), excludeUUIDs: strings.Join(r.ExcludeUUIDs, ","),
		milliCPU: s.req.MilliCPU, memory: s.req.Memory,
		maxCC: s.maxCC, maxBandwidth: s.maxBandwidth, maxClock: s.maxClock,
	}
}
