// Package throughput measures the scheduler's throughput against
// upstream's default in the same run on the same machine, so that only the
// difference is compared: the same pods on the same cluster of the
// embedded control plane, one profile after the other (`aisched bench
// throughput`).
package throughput

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/simcluster"
)

// ThroughputOptions configure a throughput run.
type ThroughputOptions struct {
	// Nodes is the number of simulated nodes (32 CPU, 128Gi, 110 pods; 8
	// A100 GPUs each with GPU).
	Nodes int
	// Pods is the number of pods scheduled per profile (100m CPU, 256Mi;
	// one whole GPU each with GPU).
	Pods int
	// GPU makes nodes GPU nodes and pods whole-GPU pods.
	GPU bool
	// Shared makes nodes GPU nodes and pods that share a card: a quarter
	// of one each (gpu.aisched.io/milli: 250). A profile without GPUFit
	// schedules them as CPU pods.
	Shared bool
	// Fill is the share of every node's cards held before the pods come,
	// by pods bound past the scheduler (0 to 0.9): a busy cluster, where
	// more nodes are full.
	Fill float64
	// Profiles are the cases compared, each a profile name, optionally
	// with a pod group size: "aisched@4" puts every 4 consecutive pods in a
	// pod group with min-available 4 (the pod-group labels); profiles without
	// Coscheduling schedule them as plain pods. "native@4" is upstream gang
	// scheduling (NativeCase). Ratios are against the first case.
	Profiles []string
	// Rounds is how often each profile is measured, in alternating order
	// (A B, B A, A B, ...) so that what one measurement leaves behind in the
	// process does not favour one profile; the median counts. Default 1.
	Rounds int
	// SchedulerConfig holds the profiles measured, but default-scheduler
	// (always upstream's); nil: the built-in one of aisched up.
	SchedulerConfig *config.KubeSchedulerConfiguration
	// Timeout bounds the scheduling of one profile's pods.
	Timeout time.Duration
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// Measure measures one profile; default Measure in this process. The
	// command runs each measurement in a child process instead, so that
	// none inherits the heap a previous control plane left behind (upstream
	// components keep process-wide references to their caches).
	Measure func(ctx context.Context, opts ThroughputOptions, profile string) (ProfileResult, error)
}

// ProfileResult is the measurement of one profile.
type ProfileResult struct {
	Name string `json:"name"`
	// PodsPerSecond is pods bound per second between the first and the last
	// binding; with several rounds, the median.
	PodsPerSecond float64 `json:"pods_per_second"`
	// Rounds lists pods/s of every round.
	Rounds []float64 `json:"rounds,omitempty"`
	// Seconds is the time from the first to the last binding.
	Seconds   float64 `json:"seconds"`
	Scheduled int     `json:"scheduled"`
	// Batching counts the scheduler's opportunistic-batching outcomes
	// (scheduler_batch_attempts_total and scheduler_batch_cache_flushed_total
	// by result or reason) during this profile's run.
	Batching map[string]float64 `json:"batching,omitempty"`
}

// ThroughputResult is the outcome of a run.
type ThroughputResult struct {
	Nodes    int             `json:"nodes"`
	Pods     int             `json:"pods"`
	GPU      bool            `json:"gpu"`
	Shared   bool            `json:"shared"`
	Fill     float64         `json:"fill"`
	CPUs     int             `json:"cpus"`
	Profiles []ProfileResult `json:"profiles"`
	// Ratios are each case's pods/s over the first case's, by name.
	Ratios map[string]float64 `json:"ratios"`
}

// NativeCase is the case name of upstream gang scheduling: kube-scheduler's
// default profile with the GenericWorkload gate on, every N pods of
// "native@N" in a native PodGroup (scheduling.k8s.io/v1beta1, gang policy,
// minCount N) that the upstream GangScheduling plugin gangs.
const NativeCase = "native"

// benchCase is one case of a run: "profile" or "profile@N".
type benchCase struct {
	name    string
	profile string
	// groupSize is the pod group size; 0 for plain pods.
	groupSize int
	// native puts the groups in native PodGroups instead of the pod-group labels.
	native bool
}

// parseCase parses a case, "profile" or "profile@N".
func parseCase(c string, pods int) (benchCase, error) {
	bc := benchCase{name: c}
	var size string
	var grouped bool
	bc.profile, size, grouped = strings.Cut(c, "@")
	if bc.profile == NativeCase {
		if !grouped {
			return benchCase{}, fmt.Errorf("case %q: give the group size, %s@N", c, NativeCase)
		}
		bc.profile, bc.native = "default-scheduler", true
	}
	if !grouped {
		return bc, nil
	}
	n, err := strconv.Atoi(size)
	switch {
	case err != nil || n < 2 || n > podgroup.MaxMinAvailable:
		return benchCase{}, fmt.Errorf("case %q: group size %q must be a whole number from 2 to %d", c, size, podgroup.MaxMinAvailable)
	case pods%n != 0:
		return benchCase{}, fmt.Errorf("case %q: --pods %d is not a multiple of the group size %d: the last group could never gather", c, pods, n)
	}
	bc.groupSize = n
	return bc, nil
}

// Throughput schedules opts.Pods pods with each profile, each on a fresh
// cluster of opts.Nodes nodes. Pods are created before the scheduler
// starts, and the simulated kubelets leave them alone, so the measure is
// the scheduler's alone (like upstream scheduler_perf).
func Throughput(ctx context.Context, opts ThroughputOptions) (*ThroughputResult, error) {
	if opts.Nodes < 1 || opts.Pods < 1 || len(opts.Profiles) < 1 {
		return nil, errors.New("need at least one node, one pod and one profile")
	}
	for _, c := range opts.Profiles {
		if _, err := parseCase(c, opts.Pods); err != nil {
			return nil, err
		}
	}
	if err := checkFill(opts); err != nil {
		return nil, err
	}
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Minute
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	if opts.Rounds < 1 {
		opts.Rounds = 1
	}
	if opts.Measure == nil {
		opts.Measure = Measure
	}
	res := &ThroughputResult{Nodes: opts.Nodes, Pods: opts.Pods, GPU: opts.GPU, Shared: opts.Shared, Fill: opts.Fill, CPUs: runtime.NumCPU(), Ratios: map[string]float64{}}
	samples := make([][]ProfileResult, len(opts.Profiles))
	for round := range opts.Rounds {
		order := make([]int, len(opts.Profiles))
		for i := range order {
			order[i] = i
			if round%2 == 1 {
				order[i] = len(order) - 1 - i
			}
		}
		for _, i := range order {
			profile := opts.Profiles[i]
			r, err := opts.Measure(ctx, opts, profile)
			if err != nil {
				return nil, fmt.Errorf("profile %s: %w", profile, err)
			}
			fmt.Fprintf(progress, "%s (round %d): %d pods in %.1fs, %.1f pods/s\n", profile, round+1, r.Scheduled, r.Seconds, r.PodsPerSecond)
			samples[i] = append(samples[i], r)
		}
	}
	for _, s := range samples {
		res.Profiles = append(res.Profiles, median(s))
	}
	if first := res.Profiles[0].PodsPerSecond; first > 0 {
		for _, p := range res.Profiles {
			res.Ratios[p.Name] = p.PodsPerSecond / first
		}
	}
	return res, nil
}

// upstreamConfig is kube-scheduler's defaults: one default-scheduler profile.
const upstreamConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
`

// profileConfig returns a scheduler configuration with the one profile
// measured: default-scheduler exactly as upstream ships it (in aisched up
// it shares aisched's queue order, which every profile of one scheduler
// must), any other as in base, or in aisched up when base is nil.
func profileConfig(profile string, base *config.KubeSchedulerConfiguration) (*config.KubeSchedulerConfiguration, error) {
	if profile == "default-scheduler" {
		return scheduler.DecodeConfig([]byte(upstreamConfig))
	}
	if base == nil {
		var err error
		if base, err = scheduler.LocalConfig(); err != nil {
			return nil, err
		}
	}
	p := scheduler.FindProfile(base, profile)
	if p == nil {
		return nil, fmt.Errorf("no profile %q in the scheduler configuration", profile)
	}
	cfg := base.DeepCopy()
	cfg.Profiles = []config.KubeSchedulerProfile{*p.DeepCopy()}
	return cfg, nil
}

func benchCluster(opts ThroughputOptions) *clusterfile.Cluster {
	pool := clusterfile.NodePool{
		Name:             "node",
		Count:            opts.Nodes,
		CPU:              clusterfile.Quantity{Quantity: resource.MustParse("32")},
		Memory:           clusterfile.Quantity{Quantity: resource.MustParse("128Gi")},
		EphemeralStorage: clusterfile.Quantity{Quantity: clusterfile.DefaultEphemeralStorage},
		MaxPods:          clusterfile.DefaultMaxPods,
	}
	if opts.GPU || opts.Shared {
		pool.GPUs = &clusterfile.GPUs{Count: 8, Model: "NVIDIA-A100-SXM4-40GB", MemoryMiB: 40960, CUDACores: 6912,
			ComputeCapability: "8.0", MemoryBandwidthGBps: 1555, MaxClockMHz: 1410}
	}
	return &clusterfile.Cluster{APIVersion: clusterfile.APIVersion, Kind: clusterfile.Kind, NodePools: []clusterfile.NodePool{pool}}
}

// Measure schedules opts.Pods pods for one case ("profile" or
// "profile@N") on a fresh cluster of opts.Nodes nodes in this process and
// returns the throughput.
//
// The native case turns the GenericWorkload gate on in this process for
// its duration (the gates are process-wide): the command measures every
// case in a child process of its own.
func Measure(ctx context.Context, opts ThroughputOptions, name string) (_ ProfileResult, err error) {
	bc, err := parseCase(name, opts.Pods)
	if err != nil {
		return ProfileResult{}, err
	}
	var apiserverArgs []string
	if bc.native {
		was := utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload)
		if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{string(features.GenericWorkload): true}); err != nil {
			return ProfileResult{}, err
		}
		defer func() {
			if rerr := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{string(features.GenericWorkload): was}); rerr != nil && err == nil {
				err = rerr
			}
		}()
		apiserverArgs = []string{"--runtime-config=" + local.WorkloadAPI + "=true"}
	}
	profile := bc.profile
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	// Start from a collected heap.
	runtime.GC()
	dir, err := os.MkdirTemp("", "aisched-bench-")
	if err != nil {
		return ProfileResult{}, err
	}
	defer os.RemoveAll(dir)
	begin := time.Now()
	cfg, err := profileConfig(profile, opts.SchedulerConfig)
	if err != nil {
		return ProfileResult{}, err
	}
	c, err := local.Start(ctx, local.Options{
		DataDir:         dir,
		Cluster:         benchCluster(opts),
		SchedulerConfig: cfg,
		DeferScheduler:  true,
		APIServerArgs:   apiserverArgs,
		// Nodes only: no pod status traffic; few heartbeats.
		Nodes: nodesim.Options{NodesOnly: true, HeartbeatQPS: 20},
	})
	if err != nil {
		return ProfileResult{}, err
	}
	defer func() {
		if stopErr := c.Stop(); stopErr != nil && err == nil {
			err = fmt.Errorf("stopping the bench cluster: %w", stopErr)
		}
	}()
	fmt.Fprintf(progress, "%s: cluster of %d nodes ready in %.1fs\n", profile, opts.Nodes, time.Since(begin).Seconds())

	const ns = "bench"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return ProfileResult{}, err
	}
	// Pods are admitted once the namespace's default service account exists.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return ProfileResult{}, fmt.Errorf("no default service account: %w", err)
	}
	if err := fill(ctx, c, ns, opts); err != nil {
		return ProfileResult{}, err
	}
	begin = time.Now()
	if err := createPods(ctx, c, ns, bc, opts); err != nil {
		return ProfileResult{}, err
	}
	fmt.Fprintf(progress, "%s: %d pods created in %.1fs\n", profile, opts.Pods, time.Since(begin).Seconds())

	// Record when each pod is seen bound.
	pods, err := simcluster.ObserveClient(ctx, c.Client, time.Now)
	if err != nil {
		return ProfileResult{}, err
	}
	defer pods.Stop()
	if err := c.StartScheduler(ctx); err != nil {
		return ProfileResult{}, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	go func() {
		select {
		case <-c.Failed():
			cancel()
		case <-waitCtx.Done():
		}
	}()
	var first, last time.Time
	bound := 0
	for i := range opts.Pods {
		s, err := pods.Wait(waitCtx, ns+"/"+benchPodName(i), func(s simcluster.PodState) bool { return !s.Bound.IsZero() })
		if err != nil {
			select {
			case <-c.Failed():
				return ProfileResult{}, c.Err()
			default:
			}
			if ctx.Err() != nil {
				return ProfileResult{}, ctx.Err()
			}
			return ProfileResult{}, fmt.Errorf("%d of %d pods bound after %s", boundCount(pods, ns, opts.Pods), opts.Pods, opts.Timeout)
		}
		bound++
		if first.IsZero() || s.Bound.Before(first) {
			first = s.Bound
		}
		if s.Bound.After(last) {
			last = s.Bound
		}
	}
	r := ProfileResult{Name: name, Scheduled: bound, Seconds: last.Sub(first).Seconds(), Batching: batchingStats(profile)}
	if r.Seconds > 0 {
		r.PodsPerSecond = float64(r.Scheduled-1) / r.Seconds
	}
	return r, nil
}

// groupName is the pod group of pod i in groups of size.
func groupName(i, size int) string {
	return fmt.Sprintf("group-%05d", i/size)
}

// createGroups creates the native PodGroups of a native case.
func createGroups(ctx context.Context, c *local.Cluster, ns string, bc benchCase, pods int) error {
	for i := 0; i < pods; i += bc.groupSize {
		pg := &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: groupName(i, bc.groupSize), Namespace: ns},
			Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
				Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(bc.groupSize)},
			}},
		}
		if _, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("native PodGroup: %w", err)
		}
	}
	return nil
}

// fillCards is how many of a node's 8 cards fill holds.
func fillCards(fill float64) int { return int(math.Round(fill * 8)) }

// fillLabel marks the pods that fill holds cards with, which the
// measurement does not count.
const fillLabel = "bench.aisched.io/fill"

// checkFill bounds --fill and checks that the pods fit the cards it
// leaves: a bench whose pods cannot all be placed would only time out.
func checkFill(opts ThroughputOptions) error {
	switch {
	case math.IsNaN(opts.Fill) || opts.Fill < 0 || opts.Fill > 0.9:
		return fmt.Errorf("--fill %g: want a share of every node's cards from 0 to 0.9", opts.Fill)
	case opts.Fill > 0 && !opts.GPU && !opts.Shared:
		return fmt.Errorf("--fill %g holds cards: give --gpu or --shared", opts.Fill)
	}
	free := int64(opts.Nodes) * int64(8-fillCards(opts.Fill))
	need := int64(opts.Pods) // one card each
	if opts.Shared {
		need = (int64(opts.Pods) + 3) / 4 // a quarter of a card each
	}
	if (opts.GPU || opts.Shared) && need > free {
		return fmt.Errorf("--pods %d need %d cards, and --nodes %d with --fill %g leave %d free: lower --pods or --fill", opts.Pods, need, opts.Nodes, opts.Fill, free)
	}
	return nil
}

// fill binds, past the scheduler, a pod to every node that holds the
// first cards of it (their assignment in gpu.aisched.io/assigned, as
// GPUFit would write it), so that opts.Fill of every node's cards is held
// before the measured pods come.
func fill(ctx context.Context, c *local.Cluster, ns string, opts ThroughputOptions) error {
	n := fillCards(opts.Fill)
	if n == 0 {
		return nil
	}
	cards := make([]int, n)
	for i := range cards {
		cards[i] = i
	}
	q := *resource.NewQuantity(int64(n), resource.DecimalSI)
	for _, pool := range benchCluster(opts).NodePools {
		for i := range pool.Count {
			node := pool.NodeName(i)
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "fill-" + node, Namespace: ns, Labels: map[string]string{fillLabel: "true"},
					Annotations: map[string]string{gpu.AssignedAnnotation: gpu.FormatIndices(cards)}},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "bench",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gpu.ResourceName: q}, Limits: corev1.ResourceList{gpu.ResourceName: q}}}}},
			}
			if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("fill node %s: %w", node, err)
			}
		}
	}
	return nil
}

// benchPodName is the name of pod i of a case.
func benchPodName(i int) string { return fmt.Sprintf("pod-%05d", i) }

// boundCount is how many of the n pods of a case in ns pods saw bound.
func boundCount(pods *simcluster.PodObserver, ns string, n int) int {
	bound := 0
	for i := range n {
		if s, ok := pods.Pod(ns + "/" + benchPodName(i)); ok && !s.Bound.IsZero() {
			bound++
		}
	}
	return bound
}

// benchPod is pod i of a case: in its group's native PodGroup, or labelled
// with the pod-group labels, or plain.
func benchPod(i int, ns string, bc benchCase, requests, limits corev1.ResourceList) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: benchPodName(i), Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulerName: bc.profile,
			Containers: []corev1.Container{{
				Name: "c", Image: "bench",
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits},
			}},
		},
	}
	switch {
	case bc.groupSize == 0:
	case bc.native:
		pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(groupName(i, bc.groupSize))}
	default:
		pod.Labels = map[string]string{
			podgroup.NameLabel:         groupName(i, bc.groupSize),
			podgroup.MinAvailableLabel: strconv.Itoa(bc.groupSize),
		}
	}
	return pod
}

// createPods creates the pods (and native PodGroups) with 32 concurrent clients.
func createPods(ctx context.Context, c *local.Cluster, ns string, bc benchCase, opts ThroughputOptions) error {
	if bc.native {
		if err := createGroups(ctx, c, ns, bc, opts.Pods); err != nil {
			return err
		}
	}
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
	limits := corev1.ResourceList{}
	var annotations map[string]string
	switch {
	case opts.GPU:
		requests[gpu.ResourceName] = resource.MustParse("1")
		limits[gpu.ResourceName] = resource.MustParse("1")
	case opts.Shared:
		annotations = map[string]string{gpu.MilliAnnotation: "250"}
	}
	next := make(chan int)
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range next {
				pod := benchPod(i, ns, bc, requests, limits)
				pod.Annotations = annotations
				if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		})
	}
	var err error
	for i := range opts.Pods {
		select {
		case next <- i:
			continue
		case err = <-errs:
		}
		break
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

// batchingStats reads the scheduler's batching counters of a profile from
// the process's metrics registry; each run's cluster is fresh but the
// registry is not, so a profile measured twice adds up.
func batchingStats(profile string) map[string]float64 {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, f := range families {
		var key string
		switch f.GetName() {
		case "scheduler_batch_attempts_total":
			key = "result"
		case "scheduler_batch_cache_flushed_total":
			key = "reason"
		default:
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["profile"] == profile {
				out[strings.TrimPrefix(f.GetName(), "scheduler_")+"/"+labels[key]] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// median returns the round with the median pods/s, with every round's pods/s.
func median(rounds []ProfileResult) ProfileResult {
	sorted := slices.Clone(rounds)
	slices.SortFunc(sorted, func(a, b ProfileResult) int { return cmp.Compare(a.PodsPerSecond, b.PodsPerSecond) })
	m := sorted[len(sorted)/2]
	if len(rounds) > 1 {
		for _, r := range rounds {
			m.Rounds = append(m.Rounds, r.PodsPerSecond)
		}
	}
	return m
}
