package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/scheduler"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// acquired is what client-go's leader election logs when it leads.
const acquired = "Successfully acquired lease"

// TestSchedulerFailover runs two `aisched scheduler` processes with the
// chart's configuration (leader election on its lease, 15 s) against a
// cluster of 4 nodes x 4 GPUs, and kills the leader (SIGKILL) while a gang
// waits for its last member, two pods that share a card wait and a gang
// of two whole nodes holds the job queue's reservation. The standby takes over within
// the lease duration plus a retry; no card is given twice (the simulated
// kubelets fail a pod given a held card); every gang ends whole; and the
// new leader keeps the reservation: the waiting gang, which the free cards
// would hold, is not placed on the reserved capacity until it frees.
func TestSchedulerFailover(t *testing.T) {
	t.Parallel()
	c := startWithoutAisched(t, `  - {name: gpu, count: 4, cpu: "32", memory: 128Gi, gpus: {count: 4, model: NVIDIA-A100-SXM4-40GB, memoryMiB: 40960}}
`)
	ctx := context.Background()
	start := externalScheduler(t, c)
	leader, standby := waitLeader(t, start(), start())
	waitOutput(t, standby, "Attempting to acquire leader lease")

	ns := createNamespace(t, c.Client)
	pod := func(name string, cards int64) *corev1.Pod {
		return utiltesting.MakePod(name, ns).SchedulerName(scheduler.BinpackProfile).Req(corev1.ResourceCPU, "100m").GPU(cards).Obj()
	}
	member := func(group string, size int, i int, cards int64) *corev1.Pod {
		p := pod(fmt.Sprintf("%s-%d", group, i), cards)
		p.Labels = map[string]string{podgroup.NameLabel: group, podgroup.MinAvailableLabel: strconv.Itoa(size)}
		return p
	}
	// The leader places 10 single-card pods (10 of 16 cards).
	for i := range 10 {
		createPods(t, c, pod(fmt.Sprintf("w-%d", i), 1))
	}
	waitPodsRunning(t, c, ns, 10)
	// A gang of two whole nodes cannot fit until pods finish: the queue
	// reserves capacity for it.
	createPods(t, c, member("r", 2, 0, 4), member("r", 2, 1, 4))
	pgs := versioned.NewForConfigOrDie(c.Config).SchedulingV1alpha1().PodGroups(ns)
	reserved := func(ctx context.Context, group string) (bool, error) {
		pg, err := pgs.Get(ctx, group, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.ConditionAdmitted)
		if cond == nil {
			return false, fmt.Errorf("PodGroup %s has no Admitted condition", group)
		}
		return cond.Status == metav1.ConditionFalse && strings.Contains(cond.Message, "reserved"), fmt.Errorf("PodGroup %s: %s: %s", group, cond.Reason, cond.Message)
	}
	localtest.Eventually(t, time.Minute, "gang r holds a reservation", func(ctx context.Context) (bool, error) { return reserved(ctx, "r") })
	// In flight at the kill: three of the four members of gang g and two
	// pods sharing a card.
	for i := range 3 {
		createPods(t, c, member("g", 4, i, 1))
	}
	createPods(t, c, sharePod(ns, "s-0", gpu.MilliAnnotation, "500"), sharePod(ns, "s-1", gpu.MilliAnnotation, "500"))
	for _, name := range []string{"s-0", "s-1"} {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.SchedulerName != scheduler.AischedProfile {
			t.Fatalf("pod %s names scheduler %q, want %s", name, p.Spec.SchedulerName, scheduler.AischedProfile)
		}
	}

	lease, err := c.Client.CoordinationV1().Leases(systemNamespace).Get(ctx, "aisched-scheduler", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		t.Fatalf("lease: %v", err)
	}
	was := *lease.Spec.HolderIdentity
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	createPods(t, c, member("g", 4, 3, 1))
	var takeover time.Duration
	localtest.Eventually(t, time.Minute, "the standby holds the lease", func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoordinationV1().Leases(systemNamespace).Get(ctx, "aisched-scheduler", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == was {
			return false, err
		}
		takeover = time.Since(killed)
		return true, nil
	})
	waitOutput(t, standby, acquired)
	// The standby sees the last renewal up to a retry period late, and
	// tries again a retry period after the lease expired.
	if limit := (15 + 2*2 + 6) * time.Second; takeover > limit {
		t.Errorf("the standby took over %s after the leader died, want within %s (lease duration, two retry periods and 6 s for a loaded machine)", takeover, limit)
	}
	t.Logf("takeover: %s after SIGKILL of the leader", takeover.Round(100*time.Millisecond))

	// The new leader schedules, and keeps r's reservation: six cards
	// are free, enough for g, but at most two of them lie outside the
	// nodes reserved for r.
	probe := utiltesting.MakePod("probe", ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "100m").Obj()
	createPods(t, c, probe)
	waitRunning(t, c, ns, "probe")
	time.Sleep(3 * time.Second)
	if ok, err := reserved(ctx, "r"); !ok {
		t.Errorf("after the failover, r lost its reservation: %v", err)
	}
	if bound := boundMembers(t, c, ns, "g"); bound != 0 {
		t.Errorf("after the failover, %d members of g bound on capacity reserved for r", bound)
	}
	checkCardsOnce(t, c, ns)

	// The reserved capacity frees one pod at a time: r, then g, run whole.
	// The pods that share a card go last: a node freed outside r's
	// reservation stays fenced from them until the queue's next pass has
	// moved the reservation there (jobqueue.Fence).
	for _, name := range []string{"w-0", "w-1", "w-2", "w-3", "w-4", "w-5", "w-6", "w-7", "w-8", "w-9", "s-0", "s-1"} {
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	localtest.Eventually(t, 2*time.Minute, "gangs r and g running whole", func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running := 0
		var waiting, placed []string
		for _, p := range pods.Items {
			switch p.Status.Phase {
			case corev1.PodFailed:
				return false, fmt.Errorf("pod %s failed: %s", p.Name, p.Status.Message)
			case corev1.PodRunning:
				running++
				placed = append(placed, fmt.Sprintf("%s@%s[%s]", p.Name, p.Spec.NodeName, p.Annotations[gpu.AssignedAnnotation]))
			default:
				why := ""
				if cond := unschedulableCondition(&p); cond != nil {
					why = cond.Message
				}
				waiting = append(waiting, fmt.Sprintf("%s (%s)", p.Name, why))
			}
		}
		return running == 2+4+1, fmt.Errorf("%d of 7 pods running %v; waiting: %v", running, placed, waiting)
	})
	checkCardsOnce(t, c, ns)
}

// startWithoutAisched starts a local cluster of the given node pools
// (cluster file YAML under nodePools:, "" for the default cluster) whose
// in-process scheduler serves only default-scheduler, for tests that run
// `aisched scheduler` as a process of its own.
func startWithoutAisched(t *testing.T, pools string) *local.Cluster {
	t.Helper()
	cfg, err := scheduler.DecodeConfig([]byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection: {leaderElect: false}\nprofiles: [{schedulerName: default-scheduler}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	opts := local.Options{SchedulerConfig: cfg}
	if pools != "" {
		if opts.Cluster, err = clusterfile.Parse(t.Name(), []byte("apiVersion: aisched.io/v1alpha1\nkind: Cluster\nnodePools:\n"+pools)); err != nil {
			t.Fatal(err)
		}
	}
	return localtest.Start(t, opts)
}

// externalScheduler installs the chart's scheduler objects (chartArgs
// added to the rendering) and returns what starts one `aisched scheduler`
// process with the chart's configuration and only the permissions of its
// ServiceAccount. It serves nothing: a free port found now may be
// another's later.
func externalScheduler(t *testing.T, c *local.Cluster, chartArgs ...string) func() *command {
	t.Helper()
	manifests := renderChart(t, append(onlyComponents("scheduler"), chartArgs...)...)
	installChart(t, c, manifests)
	config := configMapFiles(t, manifests, "aisched-scheduler-config")
	kubeconfig := serviceAccountKubeconfig(t, c, systemNamespace, "aisched-scheduler")
	return func() *command {
		return startCommand(t, nil, "scheduler", "--kubeconfig", kubeconfig,
			"--config", config+"/scheduler-config.yaml", "--shared-config", config+"/shared-config.yaml", "--secure-port", "0")
	}
}

// waitLeader returns which of two replicas took the leader lease first,
// and the other.
func waitLeader(t *testing.T, a, b *command) (leader, standby *command) {
	t.Helper()
	localtest.Eventually(t, time.Minute, "one replica leads", func(context.Context) (bool, error) {
		switch {
		case strings.Contains(a.Output(), acquired):
			leader, standby = a, b
		case strings.Contains(b.Output(), acquired):
			leader, standby = b, a
		}
		return leader != nil, nil
	})
	return leader, standby
}

// waitOutput waits until the process has printed substr.
func waitOutput(t *testing.T, c *command, substr string) {
	t.Helper()
	localtest.Eventually(t, time.Minute, fmt.Sprintf("aisched printed %q", substr), func(context.Context) (bool, error) {
		select {
		case <-c.done:
			return false, fmt.Errorf("aisched exited: %w", c.err)
		default:
		}
		return strings.Contains(c.Output(), substr), nil
	})
}

// boundMembers counts the members of the group bound to a node.
func boundMembers(t *testing.T, c *local.Cluster, ns, group string) int {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: podgroup.NameLabel + "=" + group})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

// checkCardsOnce fails the test when a card of a node is given to a
// whole-card pod and another pod, or shared beyond itself, among the pods
// of the namespace that hold cards.
func checkCardsOnce(t *testing.T, c *local.Cluster, ns string) {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// milli of each node's card held; a whole card counts 1000.
	held := map[string]int{}
	holders := map[string][]string{}
	for _, p := range pods.Items {
		assigned, gpuPod := p.Annotations[gpu.AssignedAnnotation]
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning || !gpuPod {
			continue
		}
		cards, ok := gpu.ParseIndices(assigned)
		if !ok {
			t.Errorf("pod %s: %s=%q", p.Name, gpu.AssignedAnnotation, assigned)
			continue
		}
		share := 1000
		if v, ok := p.Annotations[gpu.MilliAnnotation]; ok {
			if share, err = strconv.Atoi(v); err != nil {
				t.Fatal(err)
			}
		}
		for _, card := range cards {
			key := fmt.Sprintf("%s/%d", p.Spec.NodeName, card)
			held[key] += share
			holders[key] = append(holders[key], p.Name)
		}
	}
	for key, milli := range held {
		if milli > 1000 {
			t.Errorf("card %s given %d/1000 times: %v", key, milli, holders[key])
		}
	}
}

// TestControllerFailover runs two `aisched controller` processes with the
// chart's permissions against a cluster without a platform of its own,
// kills the leader (SIGKILL) and shows that the standby takes over within
// controller-runtime's lease (15 s, retried every 2 s): an instance
// created after the kill gets its Deployment, and the one reconciled
// before keeps its single Deployment.
func TestControllerFailover(t *testing.T) {
	t.Parallel()
	c := localtest.Start(t, local.Options{})
	ctx := context.Background()
	installChart(t, c, renderChart(t, append(onlyComponents("controller"), "--set", "controller.webhook.enabled=false")...))
	kubeconfig := serviceAccountKubeconfig(t, c, systemNamespace, "aisched-controller")
	start := func() *command {
		return startCommand(t, nil, "controller", "--kubeconfig", kubeconfig, "--namespace", systemNamespace,
			"--webhook-port", "0", "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	}
	leader, standby := waitLeader(t, start(), start())
	ns := createNamespace(t, c.Client)
	api := versioned.NewForConfigOrDie(c.Config).PlatformV1alpha1()
	if _, err := api.Operators(ns).Create(ctx, utiltesting.MakeOperator("demo", ns).Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.OperatorInstances(ns).Create(ctx, utiltesting.MakeInstance("before", ns, "demo").Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDeploymentAvailable(t, c.Client, ns, "before", 1)

	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if _, err := api.OperatorInstances(ns).Create(ctx, utiltesting.MakeInstance("after", ns, "demo").Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	localtest.Eventually(t, time.Minute, "the instance created after the kill reconciled", func(ctx context.Context) (bool, error) {
		_, err := c.Client.AppsV1().Deployments(ns).Get(ctx, "after", metav1.GetOptions{})
		return err == nil, nil
	})
	takeover := time.Since(killed)
	waitOutput(t, standby, acquired)
	if limit := (15 + 2*2 + 6) * time.Second; takeover > limit {
		t.Errorf("the standby reconciled %s after the leader died, want within %s", takeover, limit)
	}
	t.Logf("takeover: the first reconcile by the standby %s after SIGKILL of the leader", takeover.Round(100*time.Millisecond))
	deployments, err := c.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(deployments.Items) != 2 {
		t.Errorf("%d Deployments, want one per instance", len(deployments.Items))
	}
}
