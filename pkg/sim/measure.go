package sim

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/sim/metrics"
	"github.com/aisched/aisched/pkg/sim/scenario"
	"github.com/aisched/aisched/pkg/simcluster"
)

// itemLabel names the workload item of a pod.
const itemLabel = "sim.aisched.io/item"

// record is what a scenario run knows of its workload as it goes, for the
// measurement at its end.
type record struct {
	scenario *scenario.Scenario
	pods     *simcluster.PodObserver
	// slowdown ran the gangs spread over domains longer; nil for none.
	slowdown *slowdown
	// rejected counts the pods the apiserver refused for good.
	rejected int
	// evicted is called with each pod deleted after an eviction (the
	// submitter replaces it).
	evicted func(*corev1.Pod)

	// mu guards what follows: pods arrive from the run's loop, and
	// replacements of evicted pods from the observer's goroutine.
	mu sync.Mutex
	// groups are the workload's pod groups by key, groupOf the group of
	// each pod of one.
	groups  map[string]groupArrival
	groupOf map[string]string
	// teams follows the teams of a scenario with queues; nil without.
	teams *metrics.Teams
}

// groupArrival is when a pod group's first member arrived and its
// min-available.
type groupArrival struct {
	at           time.Time
	minAvailable int
}

// arrived records the arrival of pod at at: in its group, and in its
// team.
func (r *record) arrived(pod *corev1.Pod, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.arriveInTeam(pod, at)
	g, ok := pod.Labels[podgroup.NameLabel]
	if !ok {
		return
	}
	key := pod.Namespace + "/" + g
	r.groupOf[pod.Namespace+"/"+pod.Name] = key
	if _, seen := r.groups[key]; !seen {
		min, _ := strconv.Atoi(pod.Labels[podgroup.MinAvailableLabel])
		r.groups[key] = groupArrival{at: at, minAvailable: min}
	}
}

// observe follows each change of a pod the observer sees: the teams are
// told, and a pod deleted after an eviction is replaced.
func (r *record) observe(ev simcluster.PodEvent) {
	r.mu.Lock()
	r.observeTeams(ev)
	r.mu.Unlock()
	if ev.Deleted && evicted(ev.Pod) && r.evicted != nil {
		r.evicted(ev.Pod)
	}
}

// measure reads the cluster at the end of a run into the metrics.
func (r *record) measure(ctx context.Context, c simcluster.Cluster, firstArrival time.Time) (metrics.Result, error) {
	s := r.scenario
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

	res := metrics.Result{PendingPods: r.rejected}
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
		if seen, ok := r.pods.Pod(pod.Namespace + "/" + pod.Name); ok && !seen.Bound.IsZero() && !directlyBound(s, pod) {
			scheduled++
			lastBind = metrics.Later(lastBind, seen.Bound)
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
	groups := r.trackGroups()
	groups.Settle(c.Now())
	res.PartialGroups = groups.Partial()
	res.GroupWaitSeconds = metrics.PercentilesOf(groups.Waits())
	if !lastBind.IsZero() {
		res.PodsPerSecond = metrics.PodsPerSecond(scheduled, lastBind.Sub(firstArrival))
	}
	makespan := max(r.pods.LastChange().Sub(firstArrival), 0)
	if slices.Contains(s.Metrics, "makespan_seconds") {
		res.MakespanSeconds = ptr.To(makespan.Seconds())
	}
	busy, work := gpuBusyPct(podList.Items, simNodes, makespan, c.Now(), r.slowdown.byPod(podList.Items))
	if slices.Contains(s.Metrics, "gpu_busy_pct") {
		res.GPUBusyPct = busy
	}
	if slices.Contains(s.Metrics, "gpu_work_pct") {
		res.GPUWorkPct = work
	}
	measureTopology(s, podList.Items, nodes.Items, &res)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.teams != nil {
		r.teams.Finish(c.Now())
		r.teams.Fill(&res)
	}
	return res, nil
}

// partialAfter is how long a group must stay partially bound to count as
// partial (metrics.GroupTracker): a gang's members bind milliseconds apart,
// a group stuck half bound stays so.
const partialAfter = time.Second

// trackGroups plays the run's pod groups through a GroupTracker: each
// created when its first member arrived, then its members' bindings, and
// the deletions of those bound and not ended (evicted), in the order the
// observer saw them.
func (r *record) trackGroups() *metrics.GroupTracker {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := metrics.NewGroupTracker(partialAfter)
	for key, g := range r.groups {
		t.Created(key, g.minAvailable, g.at)
	}
	type change struct {
		group   string
		at      time.Time
		unbound bool
	}
	var changes []change
	for pod, group := range r.groupOf {
		seen, ok := r.pods.Pod(pod)
		if !ok || seen.Bound.IsZero() {
			continue
		}
		changes = append(changes, change{group: group, at: seen.Bound})
		if !seen.Deleted.IsZero() && seen.Ended.IsZero() {
			changes = append(changes, change{group: group, at: seen.Deleted, unbound: true})
		}
	}
	// At the same time a binding comes first: a pod is bound before it
	// is deleted.
	slices.SortFunc(changes, func(a, b change) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		switch {
		case a.unbound == b.unbound:
			return 0
		case a.unbound:
			return 1
		}
		return -1
	})
	for _, c := range changes {
		if c.unbound {
			t.Unbound(c.group, c.at)
		} else {
			t.Bound(c.group, c.at)
		}
	}
	return t
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
// cluster's largest (LoadAware's README), from the nodes' last samples.
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

// quantity returns the value of r in l, 0 when absent.
func quantity(l corev1.ResourceList, r corev1.ResourceName, milli bool) int64 {
	q, ok := l[r]
	if !ok {
		return 0
	}
	if milli {
		return q.MilliValue()
	}
	return q.Value()
}

// gpuBusyPct is 100 x the GPU-seconds the bound pods ran (their cards
// times their run: a pod's duration, times its slowdown, once it ended,
// else since it started) over the cluster's cards times the makespan; and
// the same of the work they did: a run the scenario's topologySlowdown
// lengthened counts its length over the slowdown (slowed, by
// namespace/name). Both nil without cards or time.
func gpuBusyPct(pods []corev1.Pod, nodes []metrics.Node, makespan time.Duration, now time.Time, slowed map[string]float64) (busyPct, workPct *float64) {
	cards := 0
	for _, n := range nodes {
		cards += n.GPUs
	}
	if cards == 0 || makespan <= 0 {
		return nil, nil
	}
	var busy, work float64
	for i := range pods {
		p := &pods[i]
		r, err := gpu.ParseRequest(p)
		if err != nil || r.Count == 0 || p.Spec.NodeName == "" || p.Status.StartTime == nil {
			continue
		}
		slowdown := 1.0
		if f, ok := slowed[p.Namespace+"/"+p.Name]; ok {
			slowdown = f
		}
		ran := now.Sub(p.Status.StartTime.Time)
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			if d, err := time.ParseDuration(p.Annotations[nodesim.RunDurationAnnotation]); err == nil {
				ran = time.Duration(float64(d) * slowdown)
			}
		}
		held := float64(r.TotalMilli()) / 1000 * max(ran, 0).Seconds()
		busy += held
		work += held / slowdown
	}
	capacity := float64(cards) * makespan.Seconds()
	return ptr.To(100 * busy / capacity), ptr.To(100 * work / capacity)
}
