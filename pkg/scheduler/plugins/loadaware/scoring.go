package loadaware

import (
	"context"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/podload"
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

// preScoreState holds what S is relative to, read once per cycle.
type preScoreState struct {
	scale perfScale
	// yield: the pod is a CPU pod and GPU work arrives, so every GPU node
	// scores the same (cpuPodsOnGPUNodes: WithoutGPUWork).
	yield bool
}

// Clone implements fwk.StateData; the state is read-only after PreScore.
func (s *preScoreState) Clone() fwk.StateData { return s }

// perfScale is what a node's performance terms are divided by to give
// S(i): the largest of each among the candidates, which terms are used
// (a term unknown on any candidate, such as network and disk speed for a
// node without a sample, is left out for all, so that the nodes stay
// comparable), and whether every candidate reports its CPU frequency
// (else CPU counts cores alone).
type perfScale struct {
	best    [numPerf]float64
	use     [numPerf]bool
	allFreq bool
}

// unitScale is the scale of a cycle without PreScore: every node's S is 1.
var unitScale = perfScale{}

// scaleOf computes the scale of the candidates, each with its fresh sample
// (nil: none), without keeping anything per node.
func scaleOf(nodes []fwk.NodeInfo, sample func(fwk.NodeInfo) *aischedv1alpha1.NodeMetricsStatus) perfScale {
	sc := perfScale{use: [numPerf]bool{true, true, true, true}, allFreq: true}
	terms := make([][numPerf]float64, 0, len(nodes))
	cores := make([]float64, 0, len(nodes))
	for _, ni := range nodes {
		s := sample(ni)
		t, freqKnown := performance(ni, s)
		sc.allFreq = sc.allFreq && freqKnown
		terms = append(terms, t)
		cores = append(cores, coresOf(ni, s))
	}
	for i := range terms {
		if !sc.allFreq {
			terms[i][perfCPU] = cores[i]
		}
		for j := range numPerf {
			sc.use[j] = sc.use[j] && terms[i][j] > 0
			sc.best[j] = max(sc.best[j], terms[i][j])
		}
	}
	return sc
}

// relative is S(i) of a node with sample s (nil: none): the mean of its
// used terms, each over the best among the candidates, at most 1 (a sample
// newer than PreScore's may exceed the best); 1 when no term is used.
func (sc perfScale) relative(ni fwk.NodeInfo, s *aischedv1alpha1.NodeMetricsStatus) float64 {
	t, _ := performance(ni, s)
	if !sc.allFreq {
		t[perfCPU] = coresOf(ni, s)
	}
	var sum, n float64
	for j := range numPerf {
		if sc.use[j] && sc.best[j] > 0 {
			sum += min(t[j]/sc.best[j], 1)
			n++
		}
	}
	if n == 0 {
		return 1
	}
	return sum / n
}

// coresOf is the node's cores: the sample's where it says, the
// allocatable's otherwise.
func coresOf(ni fwk.NodeInfo, s *aischedv1alpha1.NodeMetricsStatus) float64 {
	if s != nil && s.Performance.Cores > 0 {
		return float64(s.Performance.Cores)
	}
	return float64(ni.GetAllocatable().GetMilliCPU()) / 1000
}

// PreScore computes the scale of the candidates' performance once per
// cycle; it skips the pods of kinds the plugin does not rank.
func (pl *LoadAware) PreScore(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	kind := pl.kinds.Of(pod)
	if !pl.kinds.Has(kind) {
		return fwk.NewStatus(fwk.Skip)
	}
	now := pl.clock.Now()
	st := &preScoreState{yield: pl.yields(kind), scale: unitScale}
	if pl.metrics != nil {
		st.scale = scaleOf(nodes, func(ni fwk.NodeInfo) *aischedv1alpha1.NodeMetricsStatus { return pl.sample(ctx, ni.Node().Name, now) })
	} else {
		st.scale = scaleOf(nodes, func(fwk.NodeInfo) *aischedv1alpha1.NodeMetricsStatus { return nil })
	}
	cs.Write(preScoreStateKey, st)
	pl.lastPreScore.Store(st)
	return nil
}

// Score implements fwk.ScorePlugin: 100 * S * (1 - L).
func (pl *LoadAware) Score(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	st, ok := pl.stateOf(cs)
	yield := st.yield
	if !ok {
		// Asked once per cycle in PreScore, not once per node: it parses
		// the pod's request.
		yield = pl.yields(pl.kinds.Of(pod))
	}
	if yield && pl.work.GPUNode(ni) {
		return 0, nil
	}
	sample := pl.sample(ctx, ni.Node().Name, pl.clock.Now())
	l := nodeLoad(ni, sample).weighted(pl.weights)
	return int64(math.Round(100 * st.scale.relative(ni, sample) * (1 - l))), nil
}

// stateOf returns the cycle's PreScore state; in a cycle without PreScore
// (batching re-scores the node it placed the last pod on), the last
// PreScore's scale holds, and ok is false.
func (pl *LoadAware) stateOf(cs fwk.CycleState) (st *preScoreState, ok bool) {
	if data, err := cs.Read(preScoreStateKey); err == nil {
		return data.(*preScoreState), true
	}
	if last := pl.lastPreScore.Load(); last != nil {
		return last, false
	}
	return &preScoreState{scale: unitScale}, false
}

// ScoreExtensions implements fwk.ScorePlugin: scores are already in [0, 100].
func (pl *LoadAware) ScoreExtensions() fwk.ScoreExtensions { return nil }

// yields reports whether a pod of the kind is a CPU pod that GPU nodes
// should all score the same for (cpuPodsOnGPUNodes: WithoutGPUWork, and
// GPU pods arrive).
func (pl *LoadAware) yields(kind config.PodKind) bool {
	return pl.yieldGPUNodes && pl.work != nil && kind == config.PodKindCPU && pl.work.GPUWork()
}
