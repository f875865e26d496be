package integration

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/scheduler"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// TestGangSchedulerCrash kills `aisched scheduler` (SIGKILL) between the
// first and the last binding of a 48-member gang, twice. First with the
// capacity for the rest still free: the restarted scheduler completes the
// gang, and no card is given twice. Then with that capacity taken while
// the scheduler is down: the gang cannot complete, and after
// partialGroupSeconds the job queue deletes its bound members, so that no
// card stays held by a gang that cannot run, saying why on each.
func TestGangSchedulerCrash(t *testing.T) {
	t.Parallel()
	c := startWithoutAisched(t, `  - {name: gpu, count: 6, cpu: "64", memory: 256Gi, maxPods: 200, gpus: {count: 8, model: NVIDIA-A100-SXM4-40GB, memoryMiB: 40960}}
`)
	ctx := context.Background()
	start := leadingScheduler(t, c)
	const size = 48
	gang := func(ns, name string) {
		t.Helper()
		var pods []*corev1.Pod
		for i := range size {
			pods = append(pods, utiltesting.MakePod(fmt.Sprintf("%s-%d", name, i), ns).SchedulerName(scheduler.AischedProfile).
				Req(corev1.ResourceCPU, "100m").GPU(1).Label(podgroup.NameLabel, name).Label(podgroup.MinAvailableLabel, fmt.Sprint(size)).Obj())
		}
		createPods(t, c, pods...)
	}
	// killMidway kills the scheduler as soon as a member of the group is
	// bound, and returns how many were bound once the bindings in flight
	// at the kill have settled.
	killMidway := func(s *command, ns, name string) int {
		t.Helper()
		return killOnFirst(t, s, "a member of "+name+" bound",
			func(ctx context.Context) (watch.Interface, error) {
				return c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: podgroup.NameLabel + "=" + name})
			},
			func(obj runtime.Object) bool { p, ok := obj.(*corev1.Pod); return ok && p.Spec.NodeName != "" },
			func() int { return boundMembers(t, c, ns, name) })
	}

	// The capacity stays free: the restarted scheduler completes the gang.
	ns := createNamespace(t, c.Client)
	s := start()
	gang(ns, "a")
	bound := killMidway(s, ns, "a")
	t.Logf("gang a: %d of %d members bound at the kill", bound, size)
	if bound == size {
		t.Fatalf("gang a was bound whole before the kill landed; the test needs a kill between its bindings")
	}
	s = start()
	localtest.Eventually(t, 2*time.Minute, "gang a complete after the restart", func(context.Context) (bool, error) {
		return boundMembers(t, c, ns, "a") == size, nil
	})
	waitPodsRunning(t, c, ns, size)
	checkCardsOnce(t, c, ns)
	deletePods(t, c, ns)

	// The capacity is taken while the scheduler is down: the gang is
	// released after partialGroupSeconds.
	ns = createNamespace(t, c.Client)
	gang(ns, "b")
	bound = killMidway(s, ns, "b")
	t.Logf("gang b: %d of %d members bound at the kill", bound, size)
	if bound == size {
		t.Fatalf("gang b was bound whole before the kill landed; the test needs a kill between its bindings")
	}
	// Pods bound past the scheduler take every card the gang did not.
	other := createNamespace(t, c.Client)
	free := map[string]int64{}
	for _, n := range nodesOf(t, c) {
		free[n] = 8
	}
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			free[p.Spec.NodeName]--
		}
	}
	for node, cards := range free {
		if cards > 0 {
			createPods(t, c, utiltesting.MakePod("taker-"+node, other).Node(node).Req(corev1.ResourceCPU, "100m").GPU(cards).Obj())
		}
	}
	released := time.Now()
	start()
	localtest.Eventually(t, 2*time.Minute, "gang b's bound members released", func(context.Context) (bool, error) {
		n := boundMembers(t, c, ns, "b")
		return n == 0, fmt.Errorf("%d members of b still bound", n)
	})
	if waited := time.Since(released); waited < 10*time.Second {
		t.Errorf("gang b released after %s, before partialGroupSeconds (10s)", waited)
	}
	events, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	said := 0
	for _, e := range events.Items {
		if e.Reason == "Preempted" && strings.Contains(e.Message, "released by aisched's job queue: its pod group "+ns+"/b held fewer than min-available members bound") {
			said++
		}
	}
	if said != bound {
		t.Errorf("%d members say why they were released, want the %d bound", said, bound)
	}
}

// leadingScheduler installs the chart's scheduler with one replica and
// partialGroupSeconds=10, and returns what starts an `aisched scheduler`
// process and waits until it leads.
func leadingScheduler(t *testing.T, c *local.Cluster) func() *command {
	t.Helper()
	startScheduler := externalScheduler(t, c, "--set", "scheduler.shared.jobQueue.partialGroupSeconds=10", "--set", "scheduler.replicas=1")
	return func() *command {
		s := startScheduler()
		waitOutput(t, s, acquired)
		return s
	}
}

// killOnFirst kills the scheduler s (SIGKILL) as soon as the watch that
// start opens sends an object for which hit holds (a watch tells sooner
// than listing), waits for it to exit, and returns the state once it holds
// for a second: a write the apiserver received before the kill may still
// land. It fails the test when no such object comes within two minutes.
func killOnFirst[T comparable](t *testing.T, s *command, what string, start func(context.Context) (watch.Interface, error), hit func(runtime.Object) bool, state func() T) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, err := start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if !hit(ev.Object) {
			continue
		}
		if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = s.wait(context.Background())
		last := state()
		for {
			time.Sleep(time.Second)
			now := state()
			if now == last {
				return now
			}
			last = now
		}
	}
	t.Fatalf("the scheduler was to be killed on %s, which did not happen within two minutes", what)
	var zero T
	return zero
}

// nodesOf lists the names of the cluster's nodes.
func nodesOf(t *testing.T, c *local.Cluster) []string {
	t.Helper()
	list, err := c.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	return names
}
