package sim

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/podload"
	"github.com/aisched/aisched/pkg/scheduler"
	"github.com/aisched/aisched/pkg/sim/metrics"
	"github.com/aisched/aisched/pkg/sim/report"
	"github.com/aisched/aisched/pkg/sim/scenario"
)

// Options configure Run.
type Options struct {
	// Settle overrides the scenario's settle when positive.
	Settle time.Duration
	// Timeout bounds one run (one policy, one seed); default 10m.
	Timeout time.Duration
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// Tick, when set, is called after each arrival with the pods created
	// and the workload's size, for a progress bar.
	Tick func(done, total int)
}

// Run runs every policy of s with every seed, each on a fresh cluster, and
// reports the metrics the scenario asks for.
func Run(ctx context.Context, s *scenario.Scenario, opts Options) (*report.Report, error) {
	if opts.Settle <= 0 {
		opts.Settle = s.Settle.Duration
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Minute
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	rep := &report.Report{Scenario: s.Name, Metrics: s.Metrics}
	for _, p := range s.Policies {
		cfg, err := policyConfig(p)
		if err != nil {
			return nil, err
		}
		pr := report.Policy{Name: p.Name}
		for _, seed := range s.Seeds {
			fmt.Fprintf(opts.Progress, "%s, seed %d: starting\n", p.Name, seed)
			begin := time.Now()
			res, err := runOne(ctx, s, p, cfg, seed, opts)
			if err != nil {
				return nil, fmt.Errorf("policy %s, seed %d: %w", p.Name, seed, err)
			}
			fmt.Fprintf(opts.Progress, "%s, seed %d: done in %.1fs\n", p.Name, seed, time.Since(begin).Seconds())
			pr.Runs = append(pr.Runs, report.Run{Seed: seed, Result: res})
		}
		rep.Policies = append(rep.Policies, pr)
	}
	return rep, nil
}

// policyConfig is the scheduler configuration of a policy, with its
// profile checked.
func policyConfig(p scenario.Policy) (*config.KubeSchedulerConfiguration, error) {
	var cfg *config.KubeSchedulerConfiguration
	var err error
	if p.SchedulerConfig == "" {
		cfg, err = scheduler.LocalConfig()
	} else {
		var data []byte
		if data, err = os.ReadFile(p.SchedulerConfig); err == nil {
			cfg, err = scheduler.DecodeConfig(data)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", p.Name, err)
	}
	if findProfile(cfg, p.Profile) == nil {
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
			out = append(out, arrival{at: it.Arrival.Duration + time.Duration(k)*it.Interval.Duration, pod: buildPod(it, k, profile)})
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
	if g := it.Group; g != nil {
		pod.Labels[podgroup.NameLabel] = g.Name
		pod.Labels[podgroup.MinAvailableLabel] = strconv.Itoa(g.MinAvailable)
	}
	return pod
}

// itemLabel names the workload item of a pod.
const itemLabel = "sim.aisched.io/item"

func priorityClassName(v int32) string { return "sim-priority-" + strconv.Itoa(int(v)) }

// watcher records what happens to the workload's pods.
type watcher struct {
	mu     sync.Mutex
	bound  map[string]time.Time // pod key -> first seen bound
	ended  map[string]bool      // pod keys seen Succeeded or Failed
	groups *metrics.GroupTracker
	group  map[string]string // pod key -> group key
	last   time.Time         // last binding or end of a pod
}

func (w *watcher) observe(obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	key := pod.Namespace + "/" + pod.Name
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		// A pod that ends frees room: what waits may bind now.
		if !w.ended[key] {
			w.ended[key] = true
			w.last = now
		}
	}
	if _, seen := w.bound[key]; seen {
		return
	}
	w.bound[key] = now
	w.last = now
	if g, ok := w.group[key]; ok {
		w.groups.Bound(g, now)
	}
}

// partialAfter is how long a group must stay partially bound to count as
// partial (metrics.GroupTracker): a gang's members bind milliseconds apart,
// a group stuck half bound stays so.
const partialAfter = time.Second

func runOne(ctx context.Context, s *scenario.Scenario, p scenario.Policy, cfg *config.KubeSchedulerConfiguration, seed int64, opts Options) (_ metrics.Result, err error) {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "aisched-sim-")
	if err != nil {
		return metrics.Result{}, err
	}
	defer os.RemoveAll(dir)
	cluster := &clusterfile.Cluster{APIVersion: clusterfile.APIVersion, Kind: clusterfile.Kind, NodePools: s.Cluster.NodePools}
	c, err := local.Start(ctx, local.Options{
		DataDir: dir, Cluster: cluster, SchedulerConfig: cfg,
		Nodes: nodesim.Options{MetricsInterval: time.Second},
	})
	if err != nil {
		return metrics.Result{}, err
	}
	defer func() {
		if stopErr := c.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	if err := prepare(ctx, c, s); err != nil {
		return metrics.Result{}, err
	}

	w := &watcher{bound: map[string]time.Time{}, ended: map[string]bool{}, groups: metrics.NewGroupTracker(partialAfter), group: map[string]string{}}
	stopWatching, err := watchPods(ctx, c, w.observe)
	if err != nil {
		return metrics.Result{}, err
	}
	defer stopWatching()

	arrivals := pods(s, p.Profile, seed)
	start := time.Now()
	rejected := 0
	for i, a := range arrivals {
		if opts.Tick != nil {
			opts.Tick(i, len(arrivals))
		}
		if d := time.Until(start.Add(a.at)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return metrics.Result{}, ctx.Err()
			}
		}
		key := a.pod.Namespace + "/" + a.pod.Name
		if g, ok := a.pod.Labels[podgroup.NameLabel]; ok {
			min, _ := strconv.Atoi(a.pod.Labels[podgroup.MinAvailableLabel])
			w.mu.Lock()
			w.group[key] = a.pod.Namespace + "/" + g
			w.groups.Created(w.group[key], min, time.Now())
			w.mu.Unlock()
		}
		if _, err := c.Client.CoreV1().Pods(a.pod.Namespace).Create(ctx, a.pod, metav1.CreateOptions{}); err != nil {
			// A pod the apiserver refuses (a quota) never runs: it counts
			// as pending.
			if ctx.Err() != nil {
				return metrics.Result{}, ctx.Err()
			}
			rejected++
		}
	}
	if opts.Tick != nil {
		opts.Tick(len(arrivals), len(arrivals))
	}
	created := time.Now()
	w.mu.Lock()
	w.last = created
	w.mu.Unlock()
	// Settle: wait until no pod is bound or ends for opts.Settle.
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, false, func(context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.bound) == len(arrivals) || time.Since(w.last) >= opts.Settle, nil
	})
	if err != nil {
		return metrics.Result{}, err
	}
	// One more sample of the simulated nodes' metrics.
	time.Sleep(1500 * time.Millisecond)
	if err := checkCards(ctx, c, s.Cluster.NodePools); err != nil {
		return metrics.Result{}, err
	}
	return measure(ctx, c, s, w, rejected, start.Add(arrivals[0].at))
}

// checkCards audits the cards the cluster's pods hold and compares the
// scheduler's record with the simulated kubelets' (ledger.go): a run
// whose cards are overcommitted, or whose kubelets hold other cards than
// the scheduler assigned, reports no number.
func checkCards(ctx context.Context, c *local.Cluster, pools []clusterfile.NodePool) error {
	list := func(ctx context.Context) ([]corev1.Pod, error) {
		l, err := c.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	}
	pods, err := list(ctx)
	if err != nil {
		return err
	}
	if err := auditCards(pods, cardsOf(pools)); err != nil {
		return err
	}
	return compareLedgers(ctx, list, c.KubeletHolders)
}

// watchPods calls observe with every pod the cluster has and each change
// of one, until stop, which waits for the informer to end.
func watchPods(ctx context.Context, c *local.Cluster, observe func(interface{})) (stop func(), err error) {
	factory := informers.NewSharedInformerFactory(c.Client, 0)
	informer := factory.Core().V1().Pods().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj interface{}) { observe(obj) },
	}); err != nil {
		return nil, err
	}
	stopInformers := make(chan struct{})
	factory.Start(stopInformers)
	cache.WaitForCacheSync(ctx.Done(), informer.HasSynced)
	// Shutdown waits for the informers, which stop with their channel.
	return func() { close(stopInformers); factory.Shutdown() }, nil
}

// prepare creates the namespaces, their quotas and the priority classes.
func prepare(ctx context.Context, c *local.Cluster, s *scenario.Scenario) error {
	for _, ns := range s.Namespaces {
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		if len(ns.Quota) > 0 {
			hard := corev1.ResourceList{}
			for r, q := range ns.Quota {
				hard[corev1.ResourceName(r)] = q.DeepCopy()
			}
			quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "sim", Namespace: ns.Name}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
			if _, err := c.Client.CoreV1().ResourceQuotas(ns.Name).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
	}
	priorities := map[int32]bool{}
	for _, it := range s.Workload {
		if it.Priority != 0 && !priorities[it.Priority] {
			priorities[it.Priority] = true
			pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: priorityClassName(it.Priority)}, Value: it.Priority}
			if _, err := c.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
	}
	namespaces := []string{metav1.NamespaceDefault}
	for _, ns := range s.Namespaces {
		namespaces = append(namespaces, ns.Name)
	}
	return waitAdmissible(ctx, c, namespaces)
}

// waitAdmissible waits until the apiserver admits pods in the namespaces:
// until each has its default service account and, with a quota, the
// quota's status.
func waitAdmissible(ctx context.Context, c *local.Cluster, namespaces []string) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, ns := range namespaces {
			if _, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
				return false, nil
			}
			quotas, err := c.Client.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, q := range quotas.Items {
				if len(q.Status.Hard) == 0 {
					return false, nil
				}
			}
		}
		return true, nil
	})
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
