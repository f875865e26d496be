package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/podload"
	"github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/sim/metrics"
	"github.com/aisched/aisched/pkg/sim/report"
	"github.com/aisched/aisched/pkg/sim/scenario"
	"github.com/aisched/aisched/pkg/sim/trace"
	"github.com/aisched/aisched/pkg/simcluster"
)

// Options configure Run.
type Options struct {
	// Engine runs each policy and seed: simcluster.Fast (default) or
	// apiserver.Engine.
	Engine simcluster.Engine
	// Settle overrides the scenario's settle when positive.
	Settle time.Duration
	// Timeout bounds one run (one policy, one seed); default 10m.
	Timeout time.Duration
	// Parallel is how many runs go at once; default one per core on the
	// fast engine, one on the apiserver simcluster.
	Parallel int
	// Progress receives one line as each run starts and ends; nil
	// discards them.
	Progress io.Writer
	// Tick, when set, is called after each arrival with the pods created
	// by all runs and the size of all their workloads, for a progress bar.
	Tick func(done, total int)
	// TraceDir holds the files of trace scenarios (Scenario.Trace).
	TraceDir string
	// SchedulerConfig replaces `aisched up`'s configuration for the
	// policies that name no file of their own (a variant profile to try on
	// every scenario at once); nil: the built-in one.
	SchedulerConfig *config.KubeSchedulerConfiguration
}

// ErrNoTraceDir is returned for a trace scenario run without a trace
// directory.
var ErrNoTraceDir = errors.New("a trace scenario: give the directory of the trace's files (--trace-dir)")

// Run runs every policy of s with every seed, each on a fresh cluster, and
// reports the metrics the scenario asks for; a trace scenario is replayed
// (Replay).
func Run(ctx context.Context, s *scenario.Scenario, opts Options) (*report.Report, error) {
	if s.Trace != nil {
		return runTrace(ctx, s, opts)
	}
	if opts.Settle <= 0 {
		opts.Settle = s.Settle.Duration
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Minute
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.Engine.Start == nil {
		opts.Engine = simcluster.Fast
	}
	if opts.Parallel <= 0 {
		opts.Parallel = opts.Engine.Parallel
	}
	var jobs []job
	for _, p := range s.Policies {
		cfg, err := policyConfig(p, opts.SchedulerConfig)
		if err != nil {
			return nil, err
		}
		for _, seed := range s.Seeds {
			arrivals := pods(s, p.Profile, seed)
			if p.IgnoreTopology {
				withoutTopology(arrivals)
			}
			jobs = append(jobs, job{
				label: fmt.Sprintf("%s, seed %d", p.Name, seed), size: len(arrivals),
				run: func(ctx context.Context, step func(int)) (metrics.Result, error) {
					return runOne(ctx, s, cfg, p.Admission, arrivals, opts, step)
				},
			})
		}
	}
	results, err := runJobs(ctx, jobs, opts.Parallel, opts.Progress, opts.Tick)
	if err != nil {
		return nil, err
	}
	rep := &report.Report{Scenario: s.Name, Metrics: s.Metrics}
	for i, p := range s.Policies {
		pr := report.Policy{Name: p.Name}
		for k, seed := range s.Seeds {
			pr.Runs = append(pr.Runs, report.Run{Seed: seed, Result: results[i*len(s.Seeds)+k]})
		}
		rep.Policies = append(rep.Policies, pr)
	}
	return rep, nil
}

// runTrace replays a trace scenario (Replay).
func runTrace(ctx context.Context, s *scenario.Scenario, opts Options) (*report.Report, error) {
	if opts.TraceDir == "" {
		return nil, ErrNoTraceDir
	}
	nodes, pods, err := trace.ReadFiles(filepath.Join(opts.TraceDir, s.Trace.Nodes), filepath.Join(opts.TraceDir, s.Trace.Pods))
	if err != nil {
		return nil, err
	}
	var policies []ReplayPolicy
	for _, p := range s.Policies {
		cfg, err := policyConfig(p, opts.SchedulerConfig)
		if err != nil {
			return nil, err
		}
		policies = append(policies, ReplayPolicy{Name: p.Name, Profile: p.Profile, SchedulerConfig: cfg})
	}
	rep, err := Replay(ctx, ReplayOptions{
		Engine: opts.Engine, Parallel: opts.Parallel, Name: s.Name, Nodes: nodes, Pods: pods, Policies: policies,
		Seeds: s.Seeds, Inflate: s.Trace.Inflate, TypicalPodsFromTrace: s.Trace.TypicalPodsFromTrace, DRA: s.Trace.DRA,
		Timeout: opts.Timeout, Progress: opts.Progress, Tick: opts.Tick,
	})
	if err != nil {
		return nil, err
	}
	rep.Metrics = s.Metrics
	return rep, nil
}

// policyConfig is the scheduler configuration of a policy, with its
// profile checked: the file the policy names, else builtIn, else `aisched
// up`'s.
func policyConfig(p scenario.Policy, builtIn *config.KubeSchedulerConfiguration) (*config.KubeSchedulerConfiguration, error) {
	cfg := builtIn
	if p.SchedulerConfig != "" || cfg == nil {
		var err error
		if cfg, err = scheduler.ReadConfig(p.SchedulerConfig); err != nil {
			return nil, fmt.Errorf("policy %s: %w", p.Name, err)
		}
	}
	if scheduler.FindProfile(cfg, p.Profile) == nil {
		return nil, fmt.Errorf("policy %s: no profile %q in its scheduler configuration", p.Name, p.Profile)
	}
	return cfg, nil
}

// arrival is one pod to create and when.
type arrival struct {
	at  time.Duration
	pod *corev1.Pod
}

// pods builds the workload's pods in arrival order; pods that arrive at
// the same time are shuffled with the seed.
func pods(s *scenario.Scenario, profile string, seed int64) []arrival {
	var out []arrival
	for _, it := range s.Workload {
		for k := range it.Count {
			out = append(out, arrival{at: it.ArrivalOf(k), pod: buildPod(it, k, profile)})
		}
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	slices.SortStableFunc(out, func(a, b arrival) int { return int(a.at - b.at) })
	return out
}

func buildPod(it scenario.Item, k int, profile string) *corev1.Pod {
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	for name, q := range it.Requests {
		requests[corev1.ResourceName(name)] = q.DeepCopy()
		if name != string(corev1.ResourceCPU) && name != string(corev1.ResourceMemory) && name != string(corev1.ResourceEphemeralStorage) {
			// Extended resources must have equal limits.
			limits[corev1.ResourceName(name)] = q.DeepCopy()
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", it.Name, k), Namespace: it.Namespace,
			Labels:      map[string]string{itemLabel: it.Name},
			Annotations: map[string]string{},
		},
		Spec: corev1.PodSpec{
			SchedulerName: profile,
			NodeName:      it.Node,
			Containers: []corev1.Container{{
				Name: "main", Image: "sim",
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits},
			}},
		},
	}
	for k, v := range it.Annotations {
		pod.Annotations[k] = v
	}
	if it.Load != "" {
		pod.Annotations[podload.ExpectedLoadAnnotation] = it.Load
	}
	if it.Duration.Duration > 0 {
		pod.Annotations[nodesim.RunDurationAnnotation] = it.Duration.String()
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	if it.Priority != 0 {
		pod.Spec.PriorityClassName = priorityClassName(it.Priority)
	}
	if name, minAvailable, ok := it.GangOf(k); ok {
		pod.Labels[podgroup.NameLabel] = name
		pod.Labels[podgroup.MinAvailableLabel] = strconv.Itoa(minAvailable)
	}
	return pod
}

func priorityClassName(v int32) string { return "sim-priority-" + strconv.Itoa(int(v)) }

// runOne runs the arrivals on a fresh cluster under cfg and admission
// (of a scenario with queues), calling step after each arrival.
func runOne(ctx context.Context, s *scenario.Scenario, cfg *config.KubeSchedulerConfiguration, admission string, arrivals []arrival, opts Options, step func(int)) (_ metrics.Result, err error) {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	slow := newSlowdown(s)
	c, err := opts.Engine.Start(ctx, simcluster.Options{NodePools: s.Cluster.NodePools, SchedulerConfig: cfg, MetricsInterval: metricsInterval(s),
		ResourceQuotas: true, Slowdown: slow.kubelet()})
	if err != nil {
		return metrics.Result{}, err
	}
	defer func() {
		if stopErr := c.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	if err := prepare(ctx, c, s, admission); err != nil {
		return metrics.Result{}, err
	}
	if err := slow.started(ctx, c); err != nil {
		return metrics.Result{}, err
	}

	start := c.Now()
	rec := &record{scenario: s, slowdown: slow, groups: map[string]groupArrival{}, groupOf: map[string]string{}, teams: newTeams(s, start, arrivals)}
	// A pod the apiserver refuses for a quota is created again later, and
	// one evicted is replaced, as the Job controller does; one refused
	// for another reason (or still refused at the end) never runs: it
	// counts as pending.
	sub := newSubmitter(c, func(p *corev1.Pod) { rec.arrived(p, c.Now()) })
	rec.evicted = func(p *corev1.Pod) { _ = sub.replace(ctx, p) }
	pods, err := simcluster.ObservePods(ctx, c, rec.observe)
	if err != nil {
		return metrics.Result{}, err
	}
	defer pods.Stop()
	rec.pods = pods

	for i, a := range arrivals {
		step(i)
		if err := sub.runUntil(ctx, start.Add(a.at)); err != nil {
			return metrics.Result{}, err
		}
		if err := sub.submit(ctx, a.pod); err != nil {
			return metrics.Result{}, err
		}
	}
	step(len(arrivals))
	// Settle: run until no pod is bound or ends for opts.Settle, looking
	// every 200ms of the cluster's time. (Not as soon as every pod is
	// bound: what is measured then would depend on how fast the engine
	// got there, and the pods still running with it.)
	lastArrival := c.Now()
	for {
		last := metrics.Later(lastArrival, pods.LastChange())
		if c.Now().Sub(last) >= opts.Settle {
			break
		}
		if err := sub.runUntil(ctx, metrics.Earlier(last.Add(opts.Settle), c.Now().Add(200*time.Millisecond))); err != nil {
			return metrics.Result{}, err
		}
	}
	// One more sample of the simulated nodes' metrics.
	if err := c.RunUntil(ctx, c.Now().Add(1500*time.Millisecond)); err != nil {
		return metrics.Result{}, err
	}
	if err := checkCards(ctx, c, s.Cluster.NodePools); err != nil {
		return metrics.Result{}, err
	}
	rec.rejected = sub.left()
	return rec.measure(ctx, c, start.Add(arrivals[0].at))
}

// prepare creates the namespaces, their quotas, the team queues (or the
// quotas that stand for them) under admission, and the priority classes,
// and waits until pods can be created.
func prepare(ctx context.Context, c simcluster.Cluster, s *scenario.Scenario, admission string) error {
	client := c.Client()
	for _, ns := range s.Namespaces {
		if _, err := client.CoreV1().Namespaces().Create(ctx, namespaceOf(ns, admission), metav1.CreateOptions{}); err != nil {
			return err
		}
		if len(ns.Quota) > 0 {
			hard := corev1.ResourceList{}
			for r, q := range ns.Quota {
				hard[corev1.ResourceName(r)] = q.DeepCopy()
			}
			quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "sim", Namespace: ns.Name}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
			if _, err := client.CoreV1().ResourceQuotas(ns.Name).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("namespace %s: quota: %w", ns.Name, err)
			}
		}
	}
	if err := prepareQueues(ctx, c, s, admission); err != nil {
		return err
	}
	for value := range priorities(s) {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: priorityClassName(value)}, Value: value}
		if _, err := client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if err := createTopologies(ctx, c, s); err != nil {
		return err
	}
	namespaces := []string{metav1.NamespaceDefault}
	for _, ns := range s.Namespaces {
		namespaces = append(namespaces, ns.Name)
	}
	return c.WaitAdmissible(ctx, namespaces)
}

// priorities are the workload's priority values other than 0.
func priorities(s *scenario.Scenario) map[int32]bool {
	out := map[int32]bool{}
	for _, it := range s.Workload {
		if it.Priority != 0 {
			out[it.Priority] = true
		}
	}
	return out
}
