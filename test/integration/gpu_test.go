package integration

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/local/nodesim"
	"github.com/aisched/aisched/pkg/scheduler"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// startCluster starts a local cluster of the given node pools (cluster
// file YAML under nodePools:).
func startCluster(t *testing.T, pools string) *local.Cluster {
	t.Helper()
	c, err := clusterfile.Parse(t.Name(), []byte("apiVersion: aisched.io/v1alpha1\nkind: Cluster\nnodePools:\n"+pools))
	if err != nil {
		t.Fatal(err)
	}
	return localtest.Start(t, local.Options{Cluster: c})
}

// deletePods deletes the namespace and waits until its pods are gone, so
// that the next run in the same cluster starts from free nodes.
func deletePods(t *testing.T, c *local.Cluster, ns string) {
	t.Helper()
	if err := c.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	localtest.Eventually(t, time.Minute, "pods of "+ns+" gone", func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, err
	})
}

func createPods(t *testing.T, c *local.Cluster, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		p.UID = ""
		if _, err := c.Client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// createPriorityClasses creates the classes and waits until the apiserver's
// Priority admission plugin, which reads them from its own informer, admits
// a pod of each (a dry run), so that pods created next are not refused.
func createPriorityClasses(t *testing.T, c *local.Cluster, classes map[string]int32) {
	t.Helper()
	ctx := context.Background()
	for name, value := range classes {
		if _, err := c.Client.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		probe := utiltesting.MakePod("priority-probe", "default").Obj()
		probe.Spec.PriorityClassName = name
		localtest.Eventually(t, 30*time.Second, "PriorityClass "+name+" known to admission", func(ctx context.Context) (bool, error) {
			_, err := c.Client.CoreV1().Pods("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err == nil, nil
		})
	}
}

// settle waits until every pod of the namespace is Running, marked
// unschedulable by the scheduler, or Failed (which fails the test), and
// returns the first two.
func settle(t *testing.T, c *local.Cluster, ns string, want int) (running, unschedulable []corev1.Pod) {
	t.Helper()
	var failed []corev1.Pod
	localtest.Eventually(t, 2*time.Minute, fmt.Sprintf("%d pods in %s running or unschedulable", want, ns), func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running, unschedulable, failed = nil, nil, nil
		for _, p := range pods.Items {
			switch {
			case p.Status.Phase == corev1.PodRunning:
				running = append(running, p)
			case p.Status.Phase == corev1.PodFailed:
				failed = append(failed, p)
			case unschedulableCondition(&p) != nil:
				unschedulable = append(unschedulable, p)
			}
		}
		return len(running)+len(unschedulable)+len(failed) == want, nil
	})
	for _, p := range failed {
		t.Errorf("pod %s failed: %s: %s", p.Name, p.Status.Reason, p.Status.Message)
	}
	return running, unschedulable
}

// triedByScheduler reports whether the scheduler attempted the pod and
// failed (reason Unschedulable); the job queue's holds have its own reasons.
func triedByScheduler(p *corev1.Pod) bool {
	c := unschedulableCondition(p)
	return c != nil && c.Reason == corev1.PodReasonUnschedulable
}

func unschedulableCondition(p *corev1.Pod) *corev1.PodCondition {
	for i, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// TestMixedDeployment: two
// CPU and two GPU nodes that each fit 5 test pods; 16 CPU pods, then 4 GPU
// pods. default-scheduler spreads the CPU pods and strands GPU pods without
// CPU; aisched fills the CPU nodes first and runs every GPU pod.
func TestMixedDeployment(t *testing.T) {
	t.Parallel()
	const pools = `  - {name: cpu, count: 2, cpu: "5", memory: 20Gi}
  - name: gpu
    count: 2
    cpu: "5"
    memory: 20Gi
    gpus: {count: 4, model: Tesla-T4, memoryMiB: 15360, cudaCores: 2560, computeCapability: "7.5"}
`
	pending := map[string]int{}
	var mu sync.Mutex
	t.Run("profiles", func(t *testing.T) {
		for _, profile := range []string{"default-scheduler", scheduler.AischedProfile} {
			t.Run(profile, func(t *testing.T) {
				t.Parallel()
				c := startCluster(t, pools)
				ns := createNamespace(t, c.Client)
				for i := range 16 {
					createPods(t, c, utiltesting.MakePod(fmt.Sprintf("cpu-%02d", i), ns).SchedulerName(profile).
						Req(corev1.ResourceCPU, "1").Req(corev1.ResourceMemory, "1Gi").Obj())
				}
				settle(t, c, ns, 16)
				for i := range 4 {
					createPods(t, c, utiltesting.MakePod(fmt.Sprintf("gpu-%d", i), ns).SchedulerName(profile).
						Req(corev1.ResourceCPU, "1").Req(corev1.ResourceMemory, "1Gi").GPU(1).Obj())
				}
				running, unschedulable := settle(t, c, ns, 20)
				perNode := map[string]int{}
				for _, p := range running {
					perNode[p.Spec.NodeName]++
				}
				t.Logf("%s: pods per node %v, %d unschedulable", profile, perNode, len(unschedulable))
				mu.Lock()
				pending[profile] = len(unschedulable)
				mu.Unlock()
			})
		}
	})
	if pending["default-scheduler"] == 0 {
		t.Errorf("default-scheduler left no GPU pod pending; the contrast needs it to strand some")
	}
	if pending[scheduler.AischedProfile] != 0 {
		t.Errorf("aisched left %d pods pending, want 0", pending[scheduler.AischedProfile])
	}
}

// TestFineGrained: fine-grained GPU requests:
// pods that need 32000 MB per card land only on 32 GB cards under aisched,
// while default-scheduler, which counts cards, puts some on 16 GB cards.
func TestFineGrained(t *testing.T) {
	t.Parallel()
	const pools = `  - name: small
    count: 1
    cpu: "32"
    memory: 128Gi
    gpus: {count: 4, model: Tesla-V100-16GB, memoryMiB: 16384, cudaCores: 5120, computeCapability: "7.0"}
  - name: large
    count: 1
    cpu: "32"
    memory: 128Gi
    gpus: {count: 4, model: Tesla-V100-32GB, memoryMiB: 32768, cudaCores: 5120, computeCapability: "7.0"}
`
	onSmall := map[string]int{}
	var mu sync.Mutex
	t.Run("profiles", func(t *testing.T) {
		for _, profile := range []string{"default-scheduler", scheduler.AischedProfile} {
			t.Run(profile, func(t *testing.T) {
				t.Parallel()
				c := startCluster(t, pools)
				ns := createNamespace(t, c.Client)
				for i := 1; i <= 4; i++ {
					createPods(t, c, utiltesting.MakePod(fmt.Sprintf("test%d", i), ns).SchedulerName(profile).
						Req(corev1.ResourceCPU, "1").GPU(1).
						Annotation(gpu.OKSCountAnnotation, "1").Annotation(gpu.OKSMemoryAnnotation, "32000").Obj())
				}
				running, unschedulable := settle(t, c, ns, 4)
				if len(unschedulable) > 0 {
					t.Errorf("%d pods unschedulable, want all 4 running", len(unschedulable))
				}
				small := 0
				for _, p := range running {
					if p.Spec.NodeName == "small-0" {
						small++
					}
					if profile == scheduler.AischedProfile && p.Annotations[gpu.AssignedAnnotation] == "" {
						t.Errorf("pod %s has no %s annotation", p.Name, gpu.AssignedAnnotation)
					}
				}
				mu.Lock()
				onSmall[profile] = small
				mu.Unlock()
			})
		}
	})
	if onSmall["default-scheduler"] == 0 {
		t.Errorf("default-scheduler put no pod on the 16 GB cards; the contrast needs at least one")
	}
	if onSmall[scheduler.AischedProfile] != 0 {
		t.Errorf("aisched put %d pods on 16 GB cards, want 0", onSmall[scheduler.AischedProfile])
	}
}

// TestGPURestartNoDoubleAssignment schedules 200 GPU pods onto exactly 200
// cards while the scheduler restarts twice: the restarted scheduler must
// rebuild its card map from the bound pods, or it gives a card twice, which
// the simulated device plugin refuses (the pod fails).
func TestGPURestartNoDoubleAssignment(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - name: gpu
    count: 25
    cpu: "64"
    memory: 256Gi
    gpus: {count: 8, model: NVIDIA-A100-SXM4-40GB, memoryMiB: 40960}
`)
	ctx := context.Background()
	ns := createNamespace(t, c.Client)
	const total = 200
	go func() {
		for i := range total {
			p := utiltesting.MakePod(fmt.Sprintf("p-%03d", i), ns).SchedulerName(scheduler.AischedProfile).
				Req(corev1.ResourceCPU, "100m").GPU(1).Obj()
			p.UID = ""
			if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Errorf("create %s: %v", p.Name, err)
			}
		}
	}()
	bound := func(ctx context.Context) (int, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermNotEqualSelector("spec.nodeName", "").String()})
		if err != nil {
			return 0, err
		}
		return len(pods.Items), nil
	}
	for _, after := range []int{50, 120} {
		localtest.Eventually(t, 2*time.Minute, fmt.Sprintf("%d pods bound", after), func(ctx context.Context) (bool, error) {
			n, err := bound(ctx)
			return n >= after, err
		})
		if err := c.RestartScheduler(ctx); err != nil {
			t.Fatal(err)
		}
	}
	running, unschedulable := settle(t, c, ns, total)
	if len(running) != total {
		t.Errorf("%d of %d pods running, %d unschedulable", len(running), total, len(unschedulable))
	}
	for _, p := range running {
		if cards, ok := gpu.ParseIndices(p.Annotations[gpu.AssignedAnnotation]); !ok || len(cards) != 1 {
			t.Errorf("pod %s: %s=%q, want one card", p.Name, gpu.AssignedAnnotation, p.Annotations[gpu.AssignedAnnotation])
		}
	}
	checkCardsOnce(t, c, ns)
}

// TestInvalidGPURequest: a malformed annotation makes the pod
// unschedulable with a condition and an event that name the annotation and
// its value; other pods keep scheduling, and fixing the annotation
// requeues the pod at once.
func TestInvalidGPURequest(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - name: gpu
    count: 1
    cpu: "16"
    memory: 64Gi
    gpus: {count: 2, model: Tesla-T4, memoryMiB: 15360}
`)
	ctx := context.Background()
	ns := createNamespace(t, c.Client)
	bad := utiltesting.MakePod("bad", ns).SchedulerName(scheduler.AischedProfile).GPU(1).Annotation(gpu.OKSMemoryAnnotation, "16GB").Obj()
	createPods(t, c, bad)
	const want = `oks/gpu-memory="16GB"`
	localtest.Eventually(t, time.Minute, "condition names the annotation", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "bad", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := unschedulableCondition(p)
		return cond != nil && cond.Reason == corev1.PodReasonUnschedulable && strings.Contains(cond.Message, want), nil
	})
	localtest.Eventually(t, time.Minute, "FailedScheduling event names the annotation", func(ctx context.Context) (bool, error) {
		events, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("regarding.name", "bad").String()})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == "FailedScheduling" && strings.Contains(e.Note, want) {
				return true, nil
			}
		}
		return false, nil
	})

	createPods(t, c, utiltesting.MakePod("good", ns).SchedulerName(scheduler.AischedProfile).GPU(1).Obj())
	waitRunning(t, c, ns, "good")

	p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "bad", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Annotations[gpu.OKSMemoryAnnotation] = "15000"
	if _, err := c.Client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, c, ns, "bad")
}

// TestGPURequeue: a pod that found no free card is scheduled as soon as a
// GPU pod leaves, not at the periodic flush of unschedulable pods (5 min).
func TestGPURequeue(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - name: gpu
    count: 1
    cpu: "16"
    memory: 64Gi
    gpus: {count: 2, model: Tesla-T4, memoryMiB: 15360}
`)
	ns := createNamespace(t, c.Client)
	for _, name := range []string{"a", "b"} {
		createPods(t, c, utiltesting.MakePod(name, ns).SchedulerName(scheduler.AischedProfile).GPU(1).Obj())
		waitRunning(t, c, ns, name)
	}
	createPods(t, c, utiltesting.MakePod("c", ns).SchedulerName(scheduler.AischedProfile).GPU(1).Obj())
	localtest.Eventually(t, time.Minute, "pod c unschedulable", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "c", metav1.GetOptions{})
		return err == nil && unschedulableCondition(p) != nil, err
	})
	if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	waitRunning(t, c, ns, "c")
	t.Logf("pod c running %.1fs after a GPU pod left", time.Since(begin).Seconds())
}

func waitRunning(t *testing.T, c *local.Cluster, ns, name string) {
	t.Helper()
	localtest.Eventually(t, 45*time.Second, "pod "+name+" running", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	})
}

// TestSharedGPU: pods that ask for a share of a card (gpu.aisched.io/milli)
// pack onto one card; a whole-card pod is refused the shared card; after a
// scheduler restart the shares are rebuilt from the bound pods, so a card
// that is full stays full; deleting a share lets waiting pods in.
func TestSharedGPU(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - name: t4
    count: 1
    cpu: "16"
    memory: 64Gi
    gpus: {count: 1, model: Tesla-T4, memoryMiB: 15360}
`)
	ctx := context.Background()
	ns := createNamespace(t, c.Client)
	shared := func(name, milli string) *corev1.Pod { return sharePod(ns, name, gpu.MilliAnnotation, milli) }
	whole := utiltesting.MakePod("whole", ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "100m").GPU(1).Obj()

	createPods(t, c, shared("a", "600"), shared("b", "400"))
	running, _ := settle(t, c, ns, 2)
	for _, p := range running {
		if got := p.Annotations[gpu.AssignedAnnotation]; got != "0" {
			t.Errorf("pod %s: %s=%q, want card 0", p.Name, gpu.AssignedAnnotation, got)
		}
	}
	// The card is full: neither a whole-card pod nor one more milli fits.
	createPods(t, c, whole, shared("c", "100"))
	running, unschedulable := settle(t, c, ns, 4)
	if len(running) != 2 || len(unschedulable) != 2 {
		t.Fatalf("%d running, %d unschedulable; want the two shares running, whole and c waiting", len(running), len(unschedulable))
	}
	if err := c.RestartScheduler(ctx); err != nil {
		t.Fatal(err)
	}
	createPods(t, c, shared("d", "100"))
	_, unschedulable = settle(t, c, ns, 5)
	if len(unschedulable) != 3 {
		t.Fatalf("after the restart %d pods unschedulable, want whole, c and d: the restarted scheduler forgot the shares", len(unschedulable))
	}
	// a's 600 milli free: c and d fit; whole still does not (b holds 400).
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	localtest.Eventually(t, time.Minute, "c and d running", func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		n := 0
		for _, p := range pods.Items {
			if (p.Name == "c" || p.Name == "d") && p.Status.Phase == corev1.PodRunning {
				n++
			}
			if p.Name == "whole" && p.Spec.NodeName != "" {
				return false, fmt.Errorf("the whole-card pod was bound to a shared card")
			}
		}
		return n == 2, nil
	})
}

// sharePod is an aisched pod of 100m CPU that shares a card: key is the
// share's annotation.
func sharePod(ns, name, key, value string) *corev1.Pod {
	return utiltesting.MakePod(name, ns).SchedulerName(scheduler.AischedProfile).
		Req(corev1.ResourceCPU, "100m").Annotation(key, value).Obj()
}

// Shares of memory, with HAMi's annotation: two shares that fit one card's
// memory are packed onto it, the next goes to the other card, a whole-card
// pod finds no untouched card, and after a scheduler restart the memory
// held is rebuilt from the bound pods.
func TestSharedGPUMemory(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - name: t4
    count: 1
    cpu: "16"
    memory: 64Gi
    gpus: {count: 2, model: Tesla-T4, memoryMiB: 15360}
`)
	ctx := context.Background()
	ns := createNamespace(t, c.Client)
	shared := func(name, mib string) *corev1.Pod { return sharePod(ns, name, gpu.HAMiGPUMemAnnotation, mib) }
	cardOf := func(pods []corev1.Pod) map[string]string {
		out := map[string]string{}
		for _, p := range pods {
			out[p.Name] = p.Annotations[gpu.AssignedAnnotation]
		}
		return out
	}
	// 8000 + 7000 MiB fit card 0's 15360; 1000 more does not (360 left).
	for i, p := range []*corev1.Pod{shared("m1", "8000"), shared("m2", "7000"), shared("m3", "1000")} {
		createPods(t, c, p)
		settle(t, c, ns, i+1)
	}
	running, _ := settle(t, c, ns, 3)
	if got, want := cardOf(running), map[string]string{"m1": "0", "m2": "0", "m3": "1"}; !maps.Equal(got, want) {
		t.Fatalf("cards %v, want %v", got, want)
	}
	createPods(t, c, utiltesting.MakePod("whole", ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "100m").GPU(1).Obj())
	if _, unschedulable := settle(t, c, ns, 4); len(unschedulable) != 1 {
		t.Fatalf("%d pods unschedulable, want the whole-card pod: both cards hold shares", len(unschedulable))
	}
	if err := c.RestartScheduler(ctx); err != nil {
		t.Fatal(err)
	}
	// Card 1 has 14360 MiB left, card 0 360: 8000 fits card 1 only, and
	// then 7000 fits neither (6360 and 360 left). A restarted scheduler
	// that forgot the memory held would place m5 (or, taking the shares
	// for whole cards, not m4).
	createPods(t, c, shared("m4", "8000"))
	settle(t, c, ns, 5)
	createPods(t, c, shared("m5", "7000"))
	running, unschedulable := settle(t, c, ns, 6)
	if got := cardOf(running)["m4"]; got != "1" {
		t.Errorf("after the restart m4 is on card %q, want 1", got)
	}
	if len(unschedulable) != 2 {
		t.Errorf("after the restart %d pods unschedulable, want whole and m5", len(unschedulable))
	}
}

// On a busy GPU cluster GPUFit's PreFilter leaves the full nodes out of a
// GPU pod's cycle, and the scheduler then never tries preemption on them.
// 97 nodes of a pool are full, 3 of another have a free card; the pods
// ask for the full pool. A pod of the holders' priority is unschedulable
// with the full nodes left out ("didn't satisfy plugin GPUFit"): nothing
// could be preempted for it. A pod of a higher priority must still
// preempt a holder: for it no node is left out.
func TestGPUCandidatesKeepPreemption(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - name: full
    count: 97
    cpu: "4"
    memory: 8Gi
    gpus: {count: 1, model: Tesla-T4, memoryMiB: 15360}
  - name: free
    count: 3
    cpu: "4"
    memory: 8Gi
    gpus: {count: 1, model: Tesla-T4, memoryMiB: 15360}
`)
	ns := createNamespace(t, c.Client)
	createPriorityClasses(t, c, map[string]int32{ns + "-high": 1000})
	onFull := func(name string) *utiltesting.PodWrapper {
		p := utiltesting.MakePod(name, ns).SchedulerName(scheduler.AischedProfile).GPU(1)
		p.Spec.NodeSelector = map[string]string{nodesim.NodePoolLabel: "full"}
		return p
	}
	for i := range 97 {
		createPods(t, c, onFull(fmt.Sprintf("holder-%02d", i)).Obj())
	}
	if running, unschedulable := settle(t, c, ns, 97); len(running) != 97 {
		t.Fatalf("%d holders running, %d unschedulable; want all 97 running", len(running), len(unschedulable))
	}

	createPods(t, c, onFull("same").Obj())
	var msg string
	localtest.Eventually(t, time.Minute, "pod same unschedulable", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "same", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if cond := unschedulableCondition(p); cond != nil {
			msg = cond.Message
			return true, nil
		}
		return false, nil
	})
	if !strings.Contains(msg, "97 node(s) didn't satisfy plugin(s) [GPUFit]") {
		t.Errorf("pod of the holders' priority: %q, want the 97 full nodes left out by GPUFit", msg)
	}

	high := onFull("high").Obj()
	high.Spec.PriorityClassName = ns + "-high"
	createPods(t, c, high)
	waitRunning(t, c, ns, "high")
	p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "high", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pool := nodePool(t, c, p.Spec.NodeName); pool != "full" {
		t.Errorf("pod high runs on %s of pool %q, want a node of pool full, freed by preemption", p.Spec.NodeName, pool)
	}
}

// nodePool is the pool of a node.
func nodePool(t *testing.T, c *local.Cluster, node string) string {
	t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Labels[nodesim.NodePoolLabel]
}
