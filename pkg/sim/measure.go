package sim

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/sim/engine"
	"github.com/aisched/aisched/pkg/sim/metrics"
	"github.com/aisched/aisched/pkg/sim/scenario"
)

// measure reads the cluster at the end of a run into the metrics.
func measure(ctx context.Context, c engine.Cluster, s *scenario.Scenario, w *watcher, rejected int, firstArrival time.Time) (metrics.Result, error) {
	nodes, err := c.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return metrics.Result{}, err
	}
	podList, err := c.Client().CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: itemLabel})
	if err != nil {
		return metrics.Result{}, err
	}
	samples, err := c.Aisched().AischedV1alpha1().NodeMetrics().List(ctx, metav1.ListOptions{})
	if err != nil {
		return metrics.Result{}, err
	}
	byNode := map[string]*aischedv1alpha1.NodeMetricsStatus{}
	for i := range samples.Items {
		byNode[samples.Items[i].Name] = &samples.Items[i].Status
	}
	cards := cardsByNode(s)

	w.mu.Lock()
	defer w.mu.Unlock()
	res := metrics.Result{PendingPods: rejected}
	var simNodes []metrics.Node
	index := map[string]int{}
	for _, n := range nodes.Items {
		alloc := n.Status.Allocatable
		index[n.Name] = len(simNodes)
		simNodes = append(simNodes, metrics.Node{
			Name: n.Name, MilliCPU: quantity(alloc, corev1.ResourceCPU, true), Memory: quantity(alloc, corev1.ResourceMemory, false),
			GPUs: int(quantity(alloc, gpu.ResourceName, false)),
		})
	}
	var lastBind time.Time
	scheduled := 0
	for i := range podList.Items {
		pod := &podList.Items[i]
		if pod.Spec.NodeName == "" {
			res.PendingPods++
			continue
		}
		// Pods of items bound to a node directly never met the scheduler.
		if t, ok := w.bound[pod.Namespace+"/"+pod.Name]; ok && !directlyBound(s, pod) {
			scheduled++
			if t.After(lastBind) {
				lastBind = t
			}
		}
		r, gpuErr := gpu.ParseRequest(pod)
		isGPU := gpuErr == nil && r.Count > 0
		if isGPU && metrics.Misplaced(r.MemoryMiB, r.Cores, cards[poolOf(s, pod.Spec.NodeName)]) {
			res.MisplacedGPUPods++
		}
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		j, ok := index[pod.Spec.NodeName]
		if !ok {
			continue
		}
		req := pod.Spec.Containers[0].Resources.Requests
		simNodes[j].UsedMilliCPU += quantity(req, corev1.ResourceCPU, true)
		simNodes[j].UsedMemory += quantity(req, corev1.ResourceMemory, false)
		if isGPU {
			simNodes[j].UsedGPUMilli += r.TotalMilli()
		}
	}
	loadAndPerformance(simNodes, byNode)
	res.MeanNodeVariance = metrics.MeanNodeVariance(simNodes)
	res.BalanceEfficiencyH = metrics.BalanceEfficiencyH(simNodes)
	res.GPUAllocationRate = metrics.GPUAllocationRate(simNodes)
	res.UnallocatedGPUPct = metrics.UnallocatedGPUPct(simNodes)
	w.groups.Settle(c.Now())
	res.PartialGroups = w.groups.Partial()
	res.GroupWaitSeconds = metrics.PercentilesOf(w.groups.Waits())
	if !lastBind.IsZero() {
		res.PodsPerSecond = metrics.PodsPerSecond(scheduled, lastBind.Sub(firstArrival))
	}
	makespan := max(w.last.Sub(firstArrival), 0)
	if slices.Contains(s.Metrics, "makespan_seconds") {
		res.MakespanSeconds = ptr.To(makespan.Seconds())
	}
	if slices.Contains(s.Metrics, "gpu_busy_pct") {
		res.GPUBusyPct = gpuBusyPct(podList.Items, simNodes, makespan, c.Now())
	}
	measureTopology(s, podList.Items, nodes.Items, &res)
	if w.teams != nil {
		w.teams.Finish(c.Now())
		w.teams.Fill(&res)
	}
	return res, nil
}

// directlyBound reports whether the pod comes from an item bound to a
// node past the scheduler.
func directlyBound(s *scenario.Scenario, pod *corev1.Pod) bool {
	for _, it := range s.Workload {
		if it.Name == pod.Labels[itemLabel] {
			return it.Node != ""
		}
	}
	return false
}

// cardsByNode gives, for each pool name, the cards of one of its nodes:
// every node of a pool has the same cards.
func cardsByNode(s *scenario.Scenario) map[string][]metrics.Card {
	out := map[string][]metrics.Card{}
	for _, p := range s.Cluster.NodePools {
		if p.GPUs == nil {
			continue
		}
		for range p.GPUs.Count {
			out[p.Name] = append(out[p.Name], metrics.Card{MemoryMiB: p.GPUs.MemoryMiB, Cores: p.GPUs.CUDACores})
		}
	}
	return out
}

// poolOf returns the pool a node of the scenario's cluster belongs to.
func poolOf(s *scenario.Scenario, node string) string {
	for _, p := range s.Cluster.NodePools {
		for i := range p.Count {
			if p.NodeName(i) == node {
				return p.Name
			}
		}
	}
	return ""
}

// loadAndPerformance sets each node's L, the mean of its measured
// utilisations, and S, the mean of its performance terms each over the
// cluster's largest (seed 004; LoadAware's README), from the nodes' last samples.
func loadAndPerformance(nodes []metrics.Node, samples map[string]*aischedv1alpha1.NodeMetricsStatus) {
	terms := func(s *aischedv1alpha1.NodeMetricsStatus) [4]float64 {
		p := s.Performance
		mem := 0.0
		if p.Memory != nil {
			mem = float64(p.Memory.Value())
		}
		return [4]float64{float64(p.Cores) * float64(p.MaxFrequencyMHz), mem, float64(p.NetworkMbps), float64(p.DiskMBps)}
	}
	var best [4]float64
	for _, s := range samples {
		for j, v := range terms(s) {
			best[j] = max(best[j], v)
		}
	}
	for i := range nodes {
		s, ok := samples[nodes[i].Name]
		if !ok {
			continue
		}
		var load, n float64
		for _, u := range []*int32{s.Utilization.CPU, s.Utilization.Memory, s.Utilization.Network, s.Utilization.Disk} {
			if u != nil {
				load += float64(*u) / 100
				n++
			}
		}
		if n > 0 {
			nodes[i].Load = load / n
		}
		var perf, m float64
		for j, v := range terms(s) {
			if best[j] > 0 {
				perf += v / best[j]
				m++
			}
		}
		if m > 0 {
			nodes[i].Performance = perf / m
		}
	}
}

// gpuBusyPct is 100 x the GPU-seconds the bound pods ran (their cards
// times their run: a pod's duration once it ended, else since it started)
// over the cluster's cards times the makespan; nil without cards or time.
func gpuBusyPct(pods []corev1.Pod, nodes []metrics.Node, makespan time.Duration, now time.Time) *float64 {
	cards := 0
	for _, n := range nodes {
		cards += n.GPUs
	}
	if cards == 0 || makespan <= 0 {
		return nil
	}
	var busy float64
	for i := range pods {
		p := &pods[i]
		r, err := gpu.ParseRequest(p)
		if err != nil || r.Count == 0 || p.Spec.NodeName == "" || p.Status.StartTime == nil {
			continue
		}
		ran := now.Sub(p.Status.StartTime.Time)
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			if d, err := time.ParseDuration(p.Annotations[nodesim.RunDurationAnnotation]); err == nil {
				ran = d
			}
		}
		busy += float64(r.TotalMilli()) / 1000 * max(ran, 0).Seconds()
	}
	return ptr.To(100 * busy / (float64(cards) * makespan.Seconds()))
}
