package loadaware

import (
	"context"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/podload"
	"github.com/aisched/aisched/pkg/scheduler/podkind"
)

// The load terms, in the order of the weights.
const (
	resCPU = iota
	resMemory
	resNetwork
	resDisk
	numResources
)

var resourceNames = [numResources]string{"cpu", "memory", "network", "disk"}

// The performance terms of S.
const (
	perfCPU = iota // cores x max frequency
	perfMemory
	perfNetwork
	perfDisk
	numPerf
)

// load is a node's load per resource, each in [0, 1]; known says which
// resources could be estimated at all (network and disk only from a sample).
type load struct {
	value [numResources]float64
	known [numResources]bool
}

// capacityOf is what a node's load is measured against: the sample's
// performance where it says, the node's allocatable otherwise.
func capacityOf(ni fwk.NodeInfo, s *aischedv1alpha1.NodeMetricsStatus) (milliCPU, memory, networkBitsPerSecond float64) {
	alloc := ni.GetAllocatable()
	milliCPU, memory = float64(alloc.GetMilliCPU()), float64(alloc.GetMemory())
	if s != nil {
		if s.Performance.Cores > 0 {
			milliCPU = float64(s.Performance.Cores) * 1000
		}
		if m := s.Performance.Memory; m != nil && m.Value() > 0 {
			memory = float64(m.Value())
		}
		networkBitsPerSecond = float64(s.Performance.NetworkMbps) * 1e6
	}
	return milliCPU, memory, networkBitsPerSecond
}

// boundSince reports whether the pod was bound to its node at or after t:
// the apiserver stamps the PodScheduled condition when it binds, and the
// kubelet when a pod came with spec.nodeName. A pod with neither the
// condition nor a start time is assumed by this scheduler and not bound yet,
// so it is as recent as can be.
func boundSince(pod *corev1.Pod, t time.Time) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return !c.LastTransitionTime.Time.Before(t)
		}
	}
	if start := pod.Status.StartTime; start != nil {
		return !start.Time.Before(t)
	}
	return true
}

// fraction returns part/whole clamped to [0, 1]; 0 when whole is unknown.
func fraction(part, whole float64) float64 {
	if whole <= 0 {
		return 0
	}
	return min(max(part/whole, 0), 1)
}

// nodeLoad estimates a node's load. With a fresh sample s, a resource's load
// is what the sample measured plus, for each pod bound since the sample's
// window began, its expected load (podload.Of): the window's average holds
// at most part of such a pod. Without a sample, or for a resource the
// sample lacks, CPU and memory load are the pods' requests over the
// allocatable, and network and disk are unknown.
func nodeLoad(ni fwk.NodeInfo, s *aischedv1alpha1.NodeMetricsStatus) load {
	var l load
	alloc, requested := ni.GetAllocatable(), ni.GetRequested()
	fromRequests := func(r int) {
		switch r {
		case resCPU:
			l.value[r], l.known[r] = fraction(float64(requested.GetMilliCPU()), float64(alloc.GetMilliCPU())), true
		case resMemory:
			l.value[r], l.known[r] = fraction(float64(requested.GetMemory()), float64(alloc.GetMemory())), true
		}
	}
	if s == nil {
		fromRequests(resCPU)
		fromRequests(resMemory)
		return l
	}
	u := s.Utilization
	measured := [numResources]*int32{u.CPU, u.Memory, u.Network, u.Disk}
	var recent podload.Load
	since := s.SampleTime.Add(-s.Window.Duration)
	for _, pi := range ni.GetPods() {
		pod := pi.GetPod()
		if !boundSince(pod, since) {
			continue
		}
		// PreFilter rejected pods with a bad annotation; one bound some
		// other way counts with its requests.
		recent = recent.Add(podload.Estimate(pod))
	}
	cpu, memory, network := capacityOf(ni, s)
	add := [numResources]float64{
		fraction(float64(recent.MilliCPU), cpu),
		fraction(float64(recent.Memory), memory),
		fraction(float64(recent.NetworkBytesPerSecond)*8, network),
		float64(recent.DiskPercent) / 100,
	}
	for r := range numResources {
		if measured[r] == nil {
			fromRequests(r)
			continue
		}
		l.value[r], l.known[r] = min(float64(*measured[r])/100+add[r], 1), true
	}
	return l
}

// weighted returns L = sum(w_r * L_r) / sum(w_r) over the known resources;
// 0 when none is known.
func (l load) weighted(w [numResources]float64) float64 {
	var sum, weights float64
	for r := range numResources {
		if l.known[r] {
			sum += w[r] * l.value[r]
			weights += w[r]
		}
	}
	if weights == 0 {
		return 0
	}
	return sum / weights
}

// performance returns a node's performance terms: cores x max frequency,
// memory, network Mb/s, disk MB/s; 0 where unknown. Without a sample,
// cores and memory are the allocatable and the frequency unknown.
func performance(ni fwk.NodeInfo, s *aischedv1alpha1.NodeMetricsStatus) (p [numPerf]float64, freqKnown bool) {
	alloc := ni.GetAllocatable()
	cores, memory := float64(alloc.GetMilliCPU())/1000, float64(alloc.GetMemory())
	var freq float64
	if s != nil {
		if s.Performance.Cores > 0 {
			cores = float64(s.Performance.Cores)
		}
		if m := s.Performance.Memory; m != nil && m.Value() > 0 {
			memory = float64(m.Value())
		}
		freq = float64(s.Performance.MaxFrequencyMHz)
		p[perfNetwork], p[perfDisk] = float64(s.Performance.NetworkMbps), float64(s.Performance.DiskMBps)
	}
	p[perfCPU], p[perfMemory] = cores, memory
	if freq > 0 {
		p[perfCPU] *= freq
	}
	return p, freq > 0
}

// preScoreState holds, for each candidate node, S, its normalised
// performance, and its fresh sample (nil: none), read once per cycle.
type preScoreState struct {
	nodes map[string]nodeState
	// yield: the pod is a CPU pod and GPU work arrives, so every GPU node
	// scores the same (cpuPodsOnGPUNodes: WithoutGPUWork).
	yield bool
}

type nodeState struct {
	performance float64
	sample      *aischedv1alpha1.NodeMetricsStatus
}

// Clone implements fwk.StateData; the state is read-only after PreScore.
func (s *preScoreState) Clone() fwk.StateData { return s }

// relativePerformance computes S(i) for the candidates: the mean of their
// performance terms, each divided by the largest among them. A term
// unknown on any candidate (a node without a sample knows neither network
// nor disk speed) is left out for all, so that the nodes stay comparable;
// so is the CPU frequency, unless every candidate reports it.
func relativePerformance(nodes []fwk.NodeInfo, samples []*aischedv1alpha1.NodeMetricsStatus) map[string]nodeState {
	terms := make([][numPerf]float64, len(nodes))
	use := [numPerf]bool{true, true, true, true}
	allFreq := true
	var best [numPerf]float64
	cores := make([]float64, len(nodes))
	for i, ni := range nodes {
		var freqKnown bool
		terms[i], freqKnown = performance(ni, samples[i])
		allFreq = allFreq && freqKnown
		alloc := ni.GetAllocatable()
		cores[i] = float64(alloc.GetMilliCPU()) / 1000
		if s := samples[i]; s != nil && s.Performance.Cores > 0 {
			cores[i] = float64(s.Performance.Cores)
		}
	}
	for i := range terms {
		if !allFreq {
			terms[i][perfCPU] = cores[i]
		}
		for j := range numPerf {
			use[j] = use[j] && terms[i][j] > 0
			best[j] = max(best[j], terms[i][j])
		}
	}
	out := make(map[string]nodeState, len(nodes))
	for i, ni := range nodes {
		var sum, n float64
		for j := range numPerf {
			if use[j] {
				sum += terms[i][j] / best[j]
				n++
			}
		}
		s := 1.0
		if n > 0 {
			s = sum / n
		}
		out[ni.Node().Name] = nodeState{performance: s, sample: samples[i]}
	}
	return out
}

// PreScore reads the candidates' samples and computes their relative
// performance once per cycle; it skips the pods of kinds the plugin does
// not rank.
func (pl *LoadAware) PreScore(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	if !pl.kinds.Ranks(pod) {
		return fwk.NewStatus(fwk.Skip)
	}
	now := pl.clock.Now()
	samples := make([]*aischedv1alpha1.NodeMetricsStatus, len(nodes))
	for i, ni := range nodes {
		samples[i] = pl.sample(ctx, ni.Node().Name, now)
	}
	st := &preScoreState{nodes: relativePerformance(nodes, samples), yield: pl.yields(pod)}
	cs.Write(preScoreStateKey, st)
	pl.lastPreScore.Store(st)
	return nil
}

// Score implements fwk.ScorePlugin: 100 * S * (1 - L).
func (pl *LoadAware) Score(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	name := ni.Node().Name
	var ns nodeState
	var ok bool
	yield := false
	if data, err := cs.Read(preScoreStateKey); err == nil {
		st := data.(*preScoreState)
		ns, ok = st.nodes[name]
		yield = st.yield
	} else {
		yield = pl.yields(pod)
	}
	if yield && ni.GetAllocatable().GetScalarResources()[gpu.ResourceName] > 0 {
		return 0, nil
	}
	if !ok {
		// Batching re-scores the node it placed the last pod on in a cycle
		// without PreScore: the performance of the last PreScore holds,
		// the sample is read now.
		ns = nodeState{performance: 1, sample: pl.sample(ctx, name, pl.clock.Now())}
		if last := pl.lastPreScore.Load(); last != nil {
			if p, found := last.nodes[name]; found {
				ns.performance = p.performance
			}
		}
	}
	l := nodeLoad(ni, ns.sample).weighted(pl.weights)
	return int64(math.Round(100 * ns.performance * (1 - l))), nil
}

// ScoreExtensions implements fwk.ScorePlugin: scores are already in [0, 100].
func (pl *LoadAware) ScoreExtensions() fwk.ScoreExtensions { return nil }

// yields reports whether the pod is a CPU pod that GPU nodes should all
// score the same for (cpuPodsOnGPUNodes: WithoutGPUWork, and GPU pods
// arrive).
func (pl *LoadAware) yields(pod *corev1.Pod) bool {
	return pl.yieldGPUNodes && pl.work != nil && podkind.Of(pod) == config.PodKindCPU && pl.work.GPUWork()
}
