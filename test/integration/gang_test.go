package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/jobqueue"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/scheduler"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// tfJob returns a TFJob: 1 parameter server and 4 workers of 2
// GPUs, in group "tf" with min-available 5 when gang is set.
func tfJob(ns string, gang bool) []*corev1.Pod {
	var pods []*corev1.Pod
	add := func(w *utiltesting.PodWrapper) {
		w.SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "1").Req(corev1.ResourceMemory, "1Gi")
		if gang {
			w.Label(podgroup.NameLabel, "tf").Label(podgroup.MinAvailableLabel, "5")
		}
		pods = append(pods, w.Obj())
	}
	add(utiltesting.MakePod("tf-ps-0", ns))
	for i := range 4 {
		add(utiltesting.MakePod(fmt.Sprintf("tf-worker-%d", i), ns).GPU(2))
	}
	return pods
}

// waitPodGroup waits until the PodGroup ns/name exists and ok holds, and
// returns it.
func waitPodGroup(t *testing.T, c *local.Cluster, ns, name, what string, ok func(*schedulingv1alpha1.PodGroup) bool) *schedulingv1alpha1.PodGroup {
	t.Helper()
	client, err := versioned.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	var pg *schedulingv1alpha1.PodGroup
	localtest.Eventually(t, time.Minute, fmt.Sprintf("PodGroup %s/%s %s", ns, name, what), func(ctx context.Context) (bool, error) {
		pg, err = client.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && ok(pg), err
	})
	return pg
}

// waitPodsRunning waits until want pods of the namespace are Running.
func waitPodsRunning(t *testing.T, c *local.Cluster, ns string, want int) {
	t.Helper()
	localtest.Eventually(t, time.Minute, fmt.Sprintf("%d pods of %s running", want, ns), func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == want, nil
	})
}

// gpusHeld sums the GPUs requested by the pods bound to a node.
func gpusHeld(pods []corev1.Pod) int64 {
	var n int64
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		q := p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]
		n += q.Value()
	}
	return n
}

// TestTFJobGang: a TFJob of 1 PS and 4 workers
// of 2 GPUs on a cluster with 4 GPUs. Without a group, the PS and 2 workers
// run and hold all 4 GPUs waiting for the others; as a group with
// min-available 5, all 5 stay Pending and hold nothing, and they all run
// once nodes with 4 more GPUs join.
func TestTFJobGang(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - {name: cpu, count: 1, cpu: "8", memory: 32Gi}
  - {name: gpu, count: 1, cpu: "16", memory: 64Gi, gpus: {count: 4, model: Tesla-T4, memoryMiB: 15360}}
`)
	ctx := context.Background()

	t.Run("without a group", func(t *testing.T) {
		ns := createNamespace(t, c.Client)
		createPods(t, c, tfJob(ns, false)...)
		running, unschedulable := settle(t, c, ns, 5)
		if len(running) != 3 || len(unschedulable) != 2 || gpusHeld(running) != 4 {
			t.Fatalf("want PS and 2 workers running on all 4 GPUs, 2 workers pending; got %d running holding %d GPUs, %d pending",
				len(running), gpusHeld(running), len(unschedulable))
		}
		deletePods(t, c, ns)
	})

	t.Run("gang", func(t *testing.T) {
		ns := createNamespace(t, c.Client)
		createPods(t, c, tfJob(ns, true)...)
		// The job queue holds the group back, and its PodGroup says why:
		// the group does not fit the cluster as it is.
		waitPodGroup(t, c, ns, "tf", "Unplaceable, too big for the cluster, in no place in the queue", func(pg *schedulingv1alpha1.PodGroup) bool {
			cond := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1alpha1.ConditionAdmitted)
			return pg.Status.Phase == schedulingv1alpha1.PodGroupUnplaceable && pg.Status.QueuePosition == 0 &&
				cond != nil && cond.Reason == string(jobqueue.ReasonUnplaceable) &&
				strings.Contains(cond.Message, "it never fits: with every node empty, 3 of the 5 members it needs at once fit")
		})
		// Its pods say the same, and the queue's events are its own, not
		// those of a scheduler profile.
		localtest.Eventually(t, 30*time.Second, "the members' Unplaceable reason and the queue's events", func(ctx context.Context) (bool, error) {
			pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, p := range pods.Items {
				if cond := unschedulableCondition(&p); cond == nil || cond.Reason != string(jobqueue.ReasonUnplaceable) {
					return false, nil
				}
			}
			evs, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			held := 0
			for _, e := range evs.Items {
				if e.Reason == string(jobqueue.ReasonUnplaceable) {
					if e.ReportingController != jobqueue.ReportingController {
						return false, fmt.Errorf("event %s reported by %q, want %q", e.Name, e.ReportingController, jobqueue.ReportingController)
					}
					held++
				}
			}
			return len(pods.Items) == 5 && held > 0, nil
		})
		// No member is bound or tried (so none waits in Permit holding GPUs):
		// the scheduler never attempted them.
		time.Sleep(2 * time.Second)
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" || triedByScheduler(&p) {
				t.Errorf("pod %s bound to %q or tried; want every member held in the queue", p.Name, p.Spec.NodeName)
			}
		}

		more, err := clusterfile.Parse("more", []byte(`apiVersion: aisched.io/v1alpha1
kind: Cluster
nodePools:
  - {name: gpu-more, count: 1, cpu: "16", memory: 64Gi, gpus: {count: 4, model: Tesla-T4, memoryMiB: 15360}}
`))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddNodes(ctx, more); err != nil {
			t.Fatal(err)
		}
		waitPodsRunning(t, c, ns, 5)
		waitPodGroup(t, c, ns, "tf", "Running", func(pg *schedulingv1alpha1.PodGroup) bool {
			return pg.Status.Phase == schedulingv1alpha1.PodGroupRunning && pg.Status.Running == 5
		})
	})
}

// TestGangDeadlock runs two 4-pod groups on nodes that hold 6 such pods.
// default-scheduler, which ignores groups, places part of each and both
// wait forever; aisched runs one group whole, then the other when the
// first completes.
func TestGangDeadlock(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - {name: n, count: 3, cpu: "2", memory: 8Gi}
`)
	ctx := context.Background()
	groups := func(ns, profile string, runFor time.Duration) {
		var pods []*corev1.Pod
		for i := range 4 {
			for _, g := range []string{"a", "b"} {
				w := utiltesting.MakePod(fmt.Sprintf("%s-%d", g, i), ns).SchedulerName(profile).
					Req(corev1.ResourceCPU, "1").Req(corev1.ResourceMemory, "1Gi").
					Label(podgroup.NameLabel, g).Label(podgroup.MinAvailableLabel, "4").
					RestartPolicy(corev1.RestartPolicyNever)
				if runFor > 0 {
					w.Annotation(nodesim.RunDurationAnnotation, runFor.String())
				}
				pods = append(pods, w.Obj())
			}
		}
		createPods(t, c, pods...)
	}
	boundPerGroup := func(ns string) (map[string]int, map[string]int) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bound, done := map[string]int{}, map[string]int{}
		for _, p := range pods.Items {
			g := p.Labels[podgroup.NameLabel]
			if p.Spec.NodeName != "" {
				bound[g]++
			}
			if p.Status.Phase == corev1.PodSucceeded {
				done[g]++
			}
		}
		return bound, done
	}

	t.Run("default-scheduler", func(t *testing.T) {
		ns := createNamespace(t, c.Client)
		groups(ns, "default-scheduler", 0)
		settle(t, c, ns, 8)
		bound, _ := boundPerGroup(ns)
		if bound["a"] == 0 || bound["a"] == 4 || bound["b"] == 0 || bound["b"] == 4 {
			t.Errorf("bound members per group %v; want both groups partly placed", bound)
		}
		deletePods(t, c, ns)
	})

	t.Run("aisched", func(t *testing.T) {
		ns := createNamespace(t, c.Client)
		groups(ns, scheduler.AischedProfile, 5*time.Second)
		// 4 + 4 pods do not fit in 6 slots: the deadlock is both groups
		// partly bound at once, as the default scheduler leaves them. A
		// group bound whole stays so (its members keep their node when they
		// complete), and once members of the first completed, the second
		// may run beside its last ones. In the end both completed.
		deadlocked := false
		begin := time.Now()
		last := ""
		localtest.Eventually(t, 2*time.Minute, "both groups completed", func(context.Context) (bool, error) {
			bound, done := boundPerGroup(ns)
			if now := fmt.Sprint(bound, done); now != last {
				t.Logf("%5.1fs: bound %v, completed %v", time.Since(begin).Seconds(), bound, done)
				last = now
			}
			partly := func(g string) bool { return bound[g] > 0 && bound[g] < 4 }
			if partly("a") && partly("b") && !deadlocked {
				deadlocked = true
				t.Errorf("both groups partly bound at once: bound %v, completed %v", bound, done)
			}
			return done["a"] == 4 && done["b"] == 4, nil
		})
	})
}

// TestGangSchedulerRestart restarts the scheduler while members of a group
// wait in Permit for a member held back by a scheduling gate: no member is
// bound alone, before or after the restart, and the group completes once
// the gate is lifted.
func TestGangSchedulerRestart(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - {name: n, count: 2, cpu: "4", memory: 16Gi}
`)
	ctx := context.Background()
	ns := createNamespace(t, c.Client)
	const gate = "aisched.io/test-hold"
	for i := range 4 {
		w := utiltesting.MakePod(fmt.Sprintf("m-%d", i), ns).SchedulerName(scheduler.AischedProfile).
			Req(corev1.ResourceCPU, "1").Req(corev1.ResourceMemory, "1Gi").
			Label(podgroup.NameLabel, "g").Label(podgroup.MinAvailableLabel, "4")
		if i == 3 {
			w.SchedulingGate(gate)
		}
		createPods(t, c, w.Obj())
	}
	bound := func() int { return boundMembers(t, c, ns, "g") }
	// The three ungated members are assumed and wait in Permit (60 s);
	// give them time to get there, then restart the scheduler.
	time.Sleep(3 * time.Second)
	if n := bound(); n != 0 {
		t.Fatalf("%d members bound while the group is incomplete", n)
	}
	if err := c.RestartScheduler(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if n := bound(); n != 0 {
		t.Fatalf("after the restart, %d members bound while the group is incomplete", n)
	}
	pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, "m-3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Spec.SchedulingGates = nil
	if _, err := c.Client.CoreV1().Pods(ns).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	localtest.Eventually(t, time.Minute, "the whole group bound", func(context.Context) (bool, error) {
		return bound() == 4, nil
	})
}

// TestPodGroupCRD runs a gang declared the scheduler-plugins way: pods
// labelled scheduling.x-k8s.io/pod-group and a PodGroup with minMember.
// Pods wait for their PodGroup, run once it exists, and a PodGroup with
// a negative minMember is refused by the apiserver naming the field (an
// absent or zero one, omitted on the wire, is refused on the pods instead).
func TestPodGroupCRD(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - {name: n, count: 2, cpu: "4", memory: 16Gi}
`)
	ctx := context.Background()
	ns := createNamespace(t, c.Client)
	client, err := versioned.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		createPods(t, c, utiltesting.MakePod(fmt.Sprintf("w-%d", i), ns).SchedulerName(scheduler.AischedProfile).
			Req(corev1.ResourceCPU, "1").Req(corev1.ResourceMemory, "1Gi").
			Label(schedulingv1alpha1.PodGroupLabel, "train").Obj())
	}
	_, unschedulable := settle(t, c, ns, 3)
	if len(unschedulable) != 3 {
		t.Fatalf("%d of 3 pods pending before their PodGroup exists, want 3", len(unschedulable))
	}
	if msg := unschedulableCondition(&unschedulable[0]).Message; !strings.Contains(msg, "waiting for PodGroup "+ns+"/train") {
		t.Errorf("condition %q does not say the PodGroup is missing", msg)
	}

	_, err = client.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: -1},
	}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.minMember") {
		t.Errorf("PodGroup with minMember -1: error %v, want one naming spec.minMember", err)
	}

	if _, err := client.SchedulingV1alpha1().PodGroups(ns).Create(ctx, &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "train"},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: 3},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodsRunning(t, c, ns, 3)
}

// TestNativeWorkload runs `aisched up --feature-gates GenericWorkload=true`
// and checks that a pod of Kubernetes' native Workload API is ganged by the
// upstream GangScheduling plugin alone, in the aisched profile next to a
// group of the pod-group labels. The native pods also carry those labels with
// min-available 4: were aisched's Coscheduling to read them, the three
// pods of the native minCount would never run, and the queue would make a
// PodGroup for them.
func TestNativeWorkload(t *testing.T) {
	t.Parallel()
	up := startUp(t, t.TempDir(), t.TempDir(), "--feature-gates", "GenericWorkload=true")
	ctx := context.Background()
	ns := createNamespace(t, up.client)

	native := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "native", Namespace: ns},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3},
		}},
	}
	if _, err := up.client.SchedulingV1beta1().PodGroups(ns).Create(ctx, native, metav1.CreateOptions{}); err != nil {
		t.Fatalf("native PodGroup (is scheduling.k8s.io/v1beta1 served?): %v", err)
	}
	nativePod := func(name string) *corev1.Pod {
		p := utiltesting.MakePod(name, ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "100m").
			Label(podgroup.NameLabel, "native").Label(podgroup.MinAvailableLabel, "4").Obj()
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("native")}
		return p
	}
	create := func(p *corev1.Pod) {
		t.Helper()
		if _, err := up.client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create(nativePod("native-0"))
	create(nativePod("native-1"))
	for i := range 2 {
		create(utiltesting.MakePod(fmt.Sprintf("labelled-%d", i), ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "100m").
			Label(podgroup.NameLabel, "labelled").Label(podgroup.MinAvailableLabel, "2").Obj())
	}
	bound := func(ctx context.Context) (map[string]bool, error) {
		pods, err := up.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		out := map[string]bool{}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				out[p.Name] = true
			}
		}
		return out, nil
	}
	localtest.Eventually(t, time.Minute, "the pod-group-label group bound", func(ctx context.Context) (bool, error) {
		b, err := bound(ctx)
		return b["labelled-0"] && b["labelled-1"], err
	})
	// The native pods were created first and had their chance; give the
	// scheduler a few more seconds anyway.
	time.Sleep(3 * time.Second)
	b, err := bound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b["native-0"] || b["native-1"] {
		t.Fatalf("native pods bound with 2 of minCount 3: %v (upstream GangScheduling not in the profile?)", b)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", up.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	groups := versioned.NewForConfigOrDie(cfg).SchedulingV1alpha1().PodGroups(ns)
	if _, err := groups.Get(ctx, "native", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("aisched's queue made a PodGroup for the native pods (err %v), want none", err)
	}
	if _, err := groups.Get(ctx, "labelled", metav1.GetOptions{}); err != nil {
		t.Errorf("PodGroup of the pod-group-label group: %v", err)
	}

	create(nativePod("native-2"))
	localtest.Eventually(t, time.Minute, "the native group bound once minCount pods exist", func(ctx context.Context) (bool, error) {
		b, err := bound(ctx)
		return b["native-0"] && b["native-1"] && b["native-2"], err
	})
}

// TestPodGroupLifecycle follows groups of a Job, a Deployment and bare pods
// to their end: a Job's group reads Finished with its members counted once
// they complete; a deleted Deployment's group keeps no stale count and is
// not written back after the garbage collector takes it.
func TestPodGroupLifecycle(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - {name: n, count: 1, cpu: "16", memory: 64Gi}
`)
	ctx := context.Background()
	ns := createNamespace(t, c.Client)
	member := func(group string, size int) *utiltesting.PodWrapper {
		return utiltesting.MakePod("", ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "1").
			Label(podgroup.NameLabel, group).Label(podgroup.MinAvailableLabel, fmt.Sprint(size))
	}
	// A Job of 3 pods that run 2 s: Finished, 3 succeeded.
	job := utiltesting.MakeJob("train", ns, 3, member("train", 3).Annotation(nodesim.RunDurationAnnotation, "2s").RestartPolicy(corev1.RestartPolicyNever).Obj())
	job.Spec.Template.Labels = map[string]string{podgroup.NameLabel: "train", podgroup.MinAvailableLabel: "3"}
	if _, err := c.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodGroup(t, c, ns, "train", "Finished with 3 succeeded", func(pg *schedulingv1alpha1.PodGroup) bool {
		return pg.Status.Phase == schedulingv1alpha1.PodGroupFinished && pg.Status.Succeeded == 3 && pg.Status.Running == 0 && pg.Status.Scheduled == 0
	})
	// Bare pods of a group, one of which fails: Failed, with both counts.
	for i, exit := range []string{"0", "1"} {
		p := member("bare", 2).Annotation(nodesim.RunDurationAnnotation, "2s").Annotation(nodesim.ExitCodeAnnotation, exit).
			RestartPolicy(corev1.RestartPolicyNever).Obj()
		p.Name = fmt.Sprintf("bare-%d", i)
		createPods(t, c, p)
	}
	waitPodGroup(t, c, ns, "bare", "Failed with 1 succeeded and 1 failed", func(pg *schedulingv1alpha1.PodGroup) bool {
		return pg.Status.Phase == schedulingv1alpha1.PodGroupFailed && pg.Status.Succeeded == 1 && pg.Status.Failed == 1 && pg.Status.Running == 0
	})

	// A Deployment of 2: Running, then deleted with its pods.
	deploy := utiltesting.MakeDeployment("web", ns, 2, member("web", 2).Obj())
	deploy.Spec.Template.Labels[podgroup.NameLabel] = "web"
	deploy.Spec.Template.Labels[podgroup.MinAvailableLabel] = "2"
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodGroup(t, c, ns, "web", "Running with 2", func(pg *schedulingv1alpha1.PodGroup) bool {
		return pg.Status.Phase == schedulingv1alpha1.PodGroupRunning && pg.Status.Running == 2
	})
	if err := c.Client.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	client, err := versioned.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	stale := func(ctx context.Context) (bool, error) {
		pg, err := client.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "web", metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, err
		}
		if pg.Status.Running > 0 || pg.Status.Scheduled > 0 {
			return true, fmt.Errorf("PodGroup web: %d running, %d scheduled", pg.Status.Running, pg.Status.Scheduled)
		}
		return false, nil
	}
	localtest.Eventually(t, time.Minute, "the deleted Deployment's group without a stale count", func(ctx context.Context) (bool, error) {
		s, err := stale(ctx)
		return !s, err
	})
	// And it stays so: the queue does not write it back.
	time.Sleep(3 * time.Second)
	if s, err := stale(ctx); s {
		t.Errorf("after the Deployment was deleted: %v", err)
	}
}

// TestGangPreemption is scheduler-plugins' integration case "different
// priority, sequentially, pg1 meets min and pg2 meets min": a gang of low
// priority runs on both nodes; a gang of high priority that fits only
// where it runs preempts it, whole (its members on both nodes), and runs.
func TestGangPreemption(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - {name: n, count: 2, cpu: "4", memory: 16Gi}
`)
	ctx := context.Background()
	ns := createNamespace(t, c.Client)
	createPriorityClasses(t, c, map[string]int32{ns + "-low": 100, ns + "-high": 1000})
	gang := func(name, class string, size int, cpu string) {
		for i := range size {
			p := utiltesting.MakePod(fmt.Sprintf("%s-%d", name, i), ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, cpu).
				Label(podgroup.NameLabel, name).Label(podgroup.MinAvailableLabel, fmt.Sprint(size)).Obj()
			p.Spec.PriorityClassName = ns + "-" + class
			createPods(t, c, p)
		}
	}
	gang("pg1", "low", 4, "2")
	waitPodsRunning(t, c, ns, 4)
	gang("pg2", "high", 2, "4")
	localtest.Eventually(t, time.Minute, "pg2 running, pg1 preempted whole", func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pg1, pg2 := 0, 0
		for _, p := range pods.Items {
			switch {
			case strings.HasPrefix(p.Name, "pg1-"):
				pg1++
			case strings.HasPrefix(p.Name, "pg2-") && p.Status.Phase == corev1.PodRunning:
				pg2++
			}
		}
		return pg1 == 0 && pg2 == 2, fmt.Errorf("%d pg1 pods left, %d of pg2 running", pg1, pg2)
	})
	// The victims were told why.
	evs, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	preempted := map[string]bool{}
	for _, e := range evs.Items {
		if e.Reason == "Preempted" && strings.Contains(e.Note, "pod group "+ns+"/pg2") {
			preempted[e.Regarding.Name] = true
		}
	}
	if len(preempted) != 4 {
		t.Errorf("Preempted events for %v, want all 4 members of pg1", preempted)
	}

	// A pod in no group is preempted for by upstream's DefaultPreemption,
	// which takes one member of a gang; the queue takes the rest, so that
	// the gang goes whole.
	for i := range 2 {
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("pg2-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitPodsRunning(t, c, ns, 0)
	gang("pg3", "low", 2, "4")
	waitPodsRunning(t, c, ns, 2)
	vip := utiltesting.MakePod("vip", ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "4").Obj()
	vip.Spec.PriorityClassName = ns + "-high"
	createPods(t, c, vip)
	localtest.Eventually(t, time.Minute, "vip running, pg3 preempted whole", func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pg3, vipRunning := 0, false
		for _, p := range pods.Items {
			switch {
			case strings.HasPrefix(p.Name, "pg3-") && p.DeletionTimestamp == nil:
				pg3++
			case p.Name == "vip":
				vipRunning = p.Status.Phase == corev1.PodRunning
			}
		}
		return pg3 == 0 && vipRunning, fmt.Errorf("%d pg3 pods left, vip running %v", pg3, vipRunning)
	})
}
