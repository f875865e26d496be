package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	resourcev1client "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/scheduler/plugins/gpufit"
	"github.com/aisched/aisched/pkg/sim/metrics"
	"github.com/aisched/aisched/pkg/sim/report"
	"github.com/aisched/aisched/pkg/sim/trace"
	"github.com/aisched/aisched/pkg/simcluster"
)

// ReplayOptions configure Replay.
type ReplayOptions struct {
	// Engine runs each policy and seed: simcluster.Fast (default) or
	// apiserver.Engine.
	Engine simcluster.Engine
	// Name names the report, usually the pod list's file name.
	Name string
	// Nodes and Pods are the trace.
	Nodes []trace.Node
	Pods  []trace.Pod
	// Policies are the policies of the report: a profile of SchedulerConfig
	// by name, or of a configuration of their own.
	Policies []ReplayPolicy
	// SchedulerConfig holds the profiles; default scheduler.LocalConfig().
	SchedulerConfig *config.KubeSchedulerConfiguration
	// Seeds shuffle and inflate the pod list (trace.Workload), one run each.
	Seeds []int64
	// Inflate is the GPU request of the sequence in multiples of the
	// cluster's capacity; the FGD protocol uses 1.3.
	Inflate float64
	// TypicalPodsFromTrace gives FGD the pod list's shapes (trace.TypicalPods)
	// as its typicalPods argument, as the FGD paper's simulator does,
	// instead of letting it learn them online.
	TypicalPodsFromTrace bool
	// DRA requests GPUs through ResourceClaims of NVIDIA's DRA driver
	// (dra.go): the nodes publish their cards with DRAShares consumable
	// shares each, and every GPU pod claims its cards or its share.
	DRA bool
	// Percents are the arrived percentages of the curve; default
	// ReplayPercents. 100 is always read: it is the headline number.
	Percents []int
	// Timeout bounds one run; default 30m.
	Timeout time.Duration
	// Parallel is how many runs go at once; default one per core on the
	// fast engine, one on the apiserver simcluster.
	Parallel int
	// Progress receives one line as each run starts and ends; nil
	// discards them.
	Progress io.Writer
	// Tick, when set, is called after each pod with the pods done by all
	// runs and the length of all their sequences, for a progress bar.
	Tick func(done, total int)
}

// ReplayPolicy is a policy of a replay.
type ReplayPolicy struct {
	// Name names the policy in the report.
	Name string
	// Profile is the profile the pods use; default Name.
	Profile string
	// SchedulerConfig holds the profile; default ReplayOptions.SchedulerConfig.
	SchedulerConfig *config.KubeSchedulerConfiguration
}

// ProfilePolicies are policies named by the profiles of one configuration.
func ProfilePolicies(names ...string) []ReplayPolicy {
	out := make([]ReplayPolicy, len(names))
	for i, n := range names {
		out[i] = ReplayPolicy{Name: n}
	}
	return out
}

// ReplayPercents are the arrived percentages the FGD paper plots.
var ReplayPercents = []int{80, 85, 90, 95, 100, 105, 110, 115, 120, 125, 130}

// ReplayMetrics are the metrics a replay reports, in order.
var ReplayMetrics = []string{
	"unallocated_gpu_pct", "unallocated_gpu_pct_curve", "gpu_allocation_rate",
	"pending_pods", "inexpressible_pods", "pods_per_second",
}

// Replay runs the FGD evaluation protocol (trace package doc) for every
// policy and seed, each on a fresh local cluster with the trace's nodes:
// the pods of the sequence are created one at a time, each waits for the
// scheduler to bind it or to find it unschedulable, and a pod that does
// not fit is deleted at once, so that it is never retried. Pods the
// cluster cannot express (see tracePod) are not created; they count as
// arrived and not allocated, and their number is reported.
func Replay(ctx context.Context, opts ReplayOptions) (*report.Report, error) {
	if err := trace.CheckInflate(opts.Inflate); err != nil {
		return nil, fmt.Errorf("inflate %w", err)
	}
	if opts.SchedulerConfig == nil {
		cfg, err := scheduler.LocalConfig()
		if err != nil {
			return nil, err
		}
		opts.SchedulerConfig = cfg
	}
	if len(opts.Percents) == 0 {
		opts.Percents = ReplayPercents
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Minute
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.Engine.Start == nil {
		opts.Engine = simcluster.Fast
	}
	policies := slices.Clone(opts.Policies)
	for i := range policies {
		p := &policies[i]
		if p.Profile == "" {
			p.Profile = p.Name
		}
		if p.SchedulerConfig == nil {
			p.SchedulerConfig = opts.SchedulerConfig
		}
		if scheduler.FindProfile(p.SchedulerConfig, p.Profile) == nil {
			return nil, fmt.Errorf("policy %s: no profile %s in its scheduler configuration", p.Name, p.Profile)
		}
		if opts.TypicalPodsFromTrace {
			cfg, err := trace.WithTypicalPods(p.SchedulerConfig, trace.TypicalPods(opts.Pods))
			if err != nil {
				return nil, err
			}
			p.SchedulerConfig = cfg
		}
	}
	pools := trace.NodePools(opts.Nodes)
	if opts.DRA {
		draPools(pools)
	}
	if errs := clusterfile.ValidateNodePools(pools, nil); len(errs) > 0 {
		return nil, fmt.Errorf("nodes: %w", errs.ToAggregate())
	}
	capacity := trace.CapacityMilli(opts.Nodes)
	if capacity == 0 {
		return nil, errors.New("nodes: the cluster has no GPUs")
	}
	if opts.Parallel <= 0 {
		opts.Parallel = opts.Engine.Parallel
	}
	var jobs []job
	for _, p := range policies {
		for _, seed := range opts.Seeds {
			seq := trace.Workload(opts.Pods, seed, opts.Inflate, capacity)
			jobs = append(jobs, job{
				label: fmt.Sprintf("%s, seed %d (%d pods)", p.Name, seed, len(seq)), size: len(seq),
				run: func(ctx context.Context, step func(int)) (metrics.Result, error) {
					return replayOne(ctx, opts, pools, p, seq, capacity, step)
				},
				done: func(res metrics.Result) string {
					return fmt.Sprintf("unallocated GPU at 100%%: %.2f%%", *res.UnallocatedGPUPct)
				},
			})
		}
	}
	results, err := runJobs(ctx, jobs, opts.Parallel, opts.Progress, opts.Tick)
	if err != nil {
		return nil, err
	}
	rep := &report.Report{Scenario: opts.Name, Metrics: ReplayMetrics}
	for i, p := range policies {
		pr := report.Policy{Name: p.Name}
		for k, seed := range opts.Seeds {
			pr.Runs = append(pr.Runs, report.Run{Seed: seed, Result: results[i*len(opts.Seeds)+k]})
		}
		rep.Policies = append(rep.Policies, pr)
	}
	return rep, nil
}

// replayOne replays seq under one profile on a fresh cluster.
func replayOne(ctx context.Context, opts ReplayOptions, pools []clusterfile.NodePool, p ReplayPolicy, seq []trace.Pod, capacity int64, step func(int)) (_ metrics.Result, err error) {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	c, err := opts.Engine.Start(ctx, simcluster.Options{
		NodePools:       pools,
		SchedulerConfig: p.SchedulerConfig,
		// Nobody reads the scheduler's events of a replay.
		DiscardSchedulerEvents: true,
		// Pods never run in the protocol: no kubelet traffic, no samples.
		NodesOnly: true, MetricsInterval: -1,
	})
	if err != nil {
		return metrics.Result{}, err
	}
	defer func() {
		if stopErr := c.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	if err := c.WaitAdmissible(ctx, []string{metav1.NamespaceDefault}); err != nil {
		return metrics.Result{}, err
	}

	observer, err := simcluster.ObservePods(ctx, c, nil)
	if err != nil {
		return metrics.Result{}, err
	}
	defer observer.Stop()

	pods := c.Client().CoreV1().Pods(metav1.NamespaceDefault)
	// A pod that shares a card is placed only by a profile that runs
	// GPUFit's Filter.
	plugins, ok := c.SchedulerPlugins(p.Profile)
	if !ok {
		return metrics.Result{}, fmt.Errorf("the scheduler has no profile %s", p.Profile)
	}
	shares := scheduler.RunsPlugin(plugins, scheduler.Filter, gpufit.Name)
	claims := c.Client().ResourceV1().ResourceClaims(metav1.NamespaceDefault)
	if !opts.DRA {
		claims = nil
	}
	// After pod i: the GPU milli requested by seq[:i+1] and allocated.
	requested, allocated := make([]int64, len(seq)), make([]int64, len(seq))
	var sumRequested, sumAllocated int64
	res := metrics.Result{InexpressiblePods: new(int)}
	start := time.Now()
	var elapsed time.Duration
	for i, tp := range seq {
		sumRequested += tp.TotalGPUMilli()
		requested[i] = sumRequested
		step(i)
		placed, err := replayPod(ctx, pods, claims, observer, tp, p.Profile, shares)
		switch {
		case err != nil:
			return metrics.Result{}, fmt.Errorf("pod %s: %w", tp.Name, err)
		case placed == inexpressible:
			*res.InexpressiblePods++
		case placed == failed:
			res.PendingPods++
		default:
			sumAllocated += tp.TotalGPUMilli()
			elapsed = time.Since(start)
		}
		allocated[i] = sumAllocated
	}
	step(len(seq))
	if err := checkPlacement(ctx, pods, claims, cardsOf(pools), sumAllocated); err != nil {
		return metrics.Result{}, err
	}
	res.PodsPerSecond = metrics.PodsPerSecond(len(seq)-res.PendingPods-*res.InexpressiblePods, elapsed)
	rate := float64(sumAllocated) / float64(capacity)
	res.GPUAllocationRate = &rate
	percents := append([]int{100}, opts.Percents...)
	for j, p := range metrics.UnallocatedCurve(requested, allocated, capacity, percents) {
		if j == 0 && p.ArrivedPct == 100 {
			res.UnallocatedGPUPct = &p.UnallocatedGPUPct
			continue
		}
		res.UnallocatedGPUPctCurve = append(res.UnallocatedGPUPctCurve, p)
	}
	if res.UnallocatedGPUPct == nil {
		return metrics.Result{}, fmt.Errorf("the sequence requests less GPU than the cluster has (inflate %g): nothing to read at 100%% arrived", opts.Inflate)
	}
	return res, nil
}

// What became of a pod of the sequence.
const (
	bound = iota
	failed
	inexpressible
)

// replayPod creates the pod of tp, with its claim when claims are given
// (DRA), waits for the scheduler, and deletes it at once if it does not
// fit, so that it is never retried.
func replayPod(ctx context.Context, pods corev1client.PodInterface, claims resourcev1client.ResourceClaimInterface, observer *simcluster.PodObserver, tp trace.Pod, profile string, shares bool) (int, error) {
	var pod *corev1.Pod
	var err error
	if claims != nil {
		pod, err = draPod(ctx, claims, tp, profile)
		if err != nil {
			return 0, err
		}
	} else if pod, err = tracePod(tp, profile, shares); err != nil {
		return inexpressible, nil
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	// The scheduler binds the pod, or says why not.
	seen, err := observer.Wait(ctx, pod.Namespace+"/"+pod.Name, func(s simcluster.PodState) bool {
		return !s.Bound.IsZero() || s.NotScheduled() != nil
	})
	if err != nil {
		return 0, fmt.Errorf("waiting for the scheduler: %w", err)
	}
	if !seen.Bound.IsZero() {
		return bound, nil
	}
	if why := seen.NotScheduled(); why.Reason == corev1.PodReasonSchedulerError {
		return 0, fmt.Errorf("the scheduler failed: %s", why.Message)
	}
	zero := int64(0)
	if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
		return 0, err
	}
	if claims != nil && len(pod.Spec.ResourceClaims) > 0 {
		if err := claims.Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return 0, err
		}
	}
	return failed, nil
}

// checkPlacement compares the replay's count with what the cluster holds:
// the GPU of the bound pods must add up to allocated, and the GPU ledger's
// audit must find no card overcommitted. A mismatch means the protocol was
// broken (a failed pod retried and bound) or the scheduler overcommitted a
// card; either makes the numbers worthless.
func checkPlacement(ctx context.Context, pods corev1client.PodInterface, claims resourcev1client.ResourceClaimInterface, cards func(string) *gpu.Set, allocated int64) error {
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var sum int64
	if claims != nil {
		if sum, err = claimedMilli(ctx, claims, list.Items); err != nil {
			return err
		}
	}
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.Spec.NodeName == "" {
			continue
		}
		if r, err := gpu.ParseRequest(pod); err == nil {
			sum += r.TotalMilli()
		}
	}
	if err := auditCards(list.Items, cards); err != nil {
		return err
	}
	if sum != allocated {
		return fmt.Errorf("the bound pods hold %d thousandths of a card, the replay counted %d", sum, allocated)
	}
	return nil
}

// tracePod returns the pod of a trace row for a profile, or why it cannot
// be expressed (a gpu_spec of a pod without GPUs is moot and dropped): a pod that shares a card (gpu_milli below 1000) asks for
// its share with gpu.MilliAnnotation, which only profiles with GPUFit
// (shares) place.
func tracePod(p trace.Pod, profile string, shares bool) (*corev1.Pod, error) {
	if p.Shared() && !shares {
		return nil, fmt.Errorf("pod %s asks for %d milli of one card: profile %s does not share cards", p.Name, p.GPUMilli, profile)
	}
	requests := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(p.MilliCPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(p.MemoryMiB<<20, resource.BinarySI),
	}
	limits := corev1.ResourceList{}
	annotations := map[string]string{}
	if p.Shared() {
		annotations[gpu.MilliAnnotation] = strconv.FormatInt(p.GPUMilli, 10)
	} else if p.NumGPU > 0 {
		n := *resource.NewQuantity(int64(p.NumGPU), resource.DecimalSI)
		requests[gpu.ResourceName], limits[gpu.ResourceName] = n, n
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(p.Name), Namespace: metav1.NamespaceDefault, Annotations: annotations},
		Spec: corev1.PodSpec{
			SchedulerName: profile,
			Containers: []corev1.Container{{
				Name: "main", Image: "trace",
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits},
			}},
		},
	}
	if len(p.GPUSpec) > 0 && p.NumGPU > 0 {
		models := make([]string, len(p.GPUSpec))
		for i, m := range p.GPUSpec {
			models[i] = trace.NodeModel(m)
		}
		annotations[gpu.ModelsAnnotation] = strings.Join(models, ",")
	}
	return pod, nil
}
