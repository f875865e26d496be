package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/jobqueue"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/scheduler"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// gpuQueue is an aischedqueue that accounts GPUs: guaranteed cards, and
// its parent and weight.
func gpuQueue(name, parent string, guaranteed int64, weight int32) *aischedv1alpha1.Queue {
	return &aischedv1alpha1.Queue{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: aischedv1alpha1.QueueSpec{Parent: parent, Resources: []aischedv1alpha1.QueueResource{{
			Name: aischedv1alpha1.QueueGPU, Guaranteed: ptr.To(*resource.NewQuantity(guaranteed, resource.DecimalSI)), Weight: ptr.To(weight),
		}}},
	}
}

func createQueues(t *testing.T, c *local.Cluster, queues ...*aischedv1alpha1.Queue) versioned.Interface {
	t.Helper()
	client, err := versioned.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		if _, err := client.AischedV1alpha1().AischedQueues().Create(context.Background(), q, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return client
}

// queueNamespace creates a namespace whose work goes to queue.
func queueNamespace(t *testing.T, c *local.Cluster, queue string) string {
	t.Helper()
	ns := createNamespace(t, c.Client)
	n, err := c.Client.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[aischedv1alpha1.QueueLabel] = queue
	if _, err := c.Client.CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// gang returns the members of a gang of size pods of cards GPUs each.
func gang(ns, name string, size int, cards int64) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range size {
		p := utiltesting.MakePod(fmt.Sprintf("%s-%d", name, i), ns).SchedulerName(scheduler.AischedProfile).
			Req(corev1.ResourceCPU, "100m").GPU(cards).
			Label(podgroup.NameLabel, name).Label(podgroup.MinAvailableLabel, strconv.Itoa(size)).Obj()
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](3)
		out = append(out, p)
	}
	return out
}

// TestTeamQueueReclaim: a department x (8 GPUs guaranteed) with teams x1
// (4) and x2 (none), and a department y (none) with team y1 (none), share
// 12 GPUs. x2 and y1 fill the cluster, x1 idle: both borrow. A gang of x1
// within its guarantee takes back capacity: from its sibling x2 first,
// whole, with the DisruptionTarget condition, the victims' grace period
// and an event naming the queue; y1's work is left. The queues' status
// shows the use, and whom y borrows from.
func TestTeamQueueReclaim(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - {name: gpu, count: 3, cpu: "16", memory: 64Gi, gpus: {count: 4, model: NVIDIA-A100-SXM4-40GB, memoryMiB: 40960}}
`)
	ctx := context.Background()
	client := createQueues(t, c, gpuQueue("x", "", 8, 1), gpuQueue("y", "", 0, 1),
		gpuQueue("x1", "x", 4, 1), gpuQueue("x2", "x", 0, 1), gpuQueue("y1", "y", 0, 1))
	nsX1, nsX2, nsY1 := queueNamespace(t, c, "x1"), queueNamespace(t, c, "x2"), queueNamespace(t, c, "y1")
	createPods(t, c, gang(nsX2, "sib", 1, 4)...)
	createPods(t, c, gang(nsY1, "cousin", 2, 4)...)
	waitPodsRunning(t, c, nsX2, 1)
	waitPodsRunning(t, c, nsY1, 2)

	// The grace period the victim is deleted with, seen by a watch.
	w, err := c.Client.CoreV1().Pods(nsX2).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	grace := make(chan int64, 1)
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && p.DeletionGracePeriodSeconds != nil {
				grace <- *p.DeletionGracePeriodSeconds
				return
			}
		}
	}()
	createPods(t, c, gang(nsX1, "mine", 1, 4)...)
	localtest.Eventually(t, time.Minute, "x1's gang running", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(nsX1).Get(ctx, "mine-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.Phase == corev1.PodRunning, fmt.Errorf("phase %s, condition %+v", p.Status.Phase, unschedulableCondition(p))
	})
	// The sibling's gang was taken back, the cousin's left.
	pods, err := c.Client.CoreV1().Pods(nsY1).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			t.Errorf("y1's pod %s was touched: phase %s, deleted %v", p.Name, p.Status.Phase, p.DeletionTimestamp)
		}
	}
	events, err := c.Client.EventsV1().Events(nsX2).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reclaimed := false
	for _, e := range events.Items {
		if e.Reason == "Reclaimed" && e.Regarding.Name == "sib-0" && strings.Contains(e.Note, "aischedqueue x1") && strings.Contains(e.Note, "aischedqueue x2") {
			reclaimed = true
		}
	}
	if !reclaimed {
		t.Errorf("no Reclaimed event on sib-0 naming x1 and x2: %d events", len(events.Items))
	}
	select {
	case g := <-grace:
		if g != 3 {
			t.Errorf("the victim was deleted with grace period %ds, want its own 3s", g)
		}
	case <-time.After(30 * time.Second):
		t.Error("the victim's deletion was not seen")
	}
	localtest.Eventually(t, 30*time.Second, "x2's pod gone after its grace period", func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(nsX2).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, err
	})
	localtest.Eventually(t, 30*time.Second, "the queues' status", func(ctx context.Context) (bool, error) {
		x1, err := client.AischedV1alpha1().AischedQueues().Get(ctx, "x1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		y, err := client.AischedV1alpha1().AischedQueues().Get(ctx, "y", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ok := x1.Status.GPU != nil && x1.Status.GPU.Used.Cmp(resource.MustParse("4")) == 0 &&
			y.Status.GPU != nil && y.Status.GPU.Used.Cmp(resource.MustParse("8")) == 0 && y.Status.GPU.Borrowed.Cmp(resource.MustParse("8")) == 0 &&
			len(y.Status.BorrowsFrom) == 1 && y.Status.BorrowsFrom[0] == "x: 4" &&
			meta.IsStatusConditionTrue(x1.Status.Conditions, aischedv1alpha1.ConditionQueueValid)
		return ok, fmt.Errorf("x1 %+v; y %+v", x1.Status, y.Status)
	})
}

// TestTeamQueueWeights: queues a and b, of weight 1 and 2 and nothing
// guaranteed, share 12 GPUs: a and b each submit 12 single-GPU pods (pods
// in no group, queued one by one), and a gets 4 and b 8, within one
// pod's size.
func TestTeamQueueWeights(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - {name: gpu, count: 3, cpu: "16", memory: 64Gi, gpus: {count: 4, model: Tesla-T4, memoryMiB: 15360}}
`)
	createQueues(t, c, gpuQueue("a", "", 0, 1), gpuQueue("b", "", 0, 2))
	nsA, nsB := queueNamespace(t, c, "a"), queueNamespace(t, c, "b")
	for i := range 12 {
		for _, ns := range []string{nsA, nsB} {
			createPods(t, c, utiltesting.MakePod(fmt.Sprintf("p-%02d", i), ns).SchedulerName(scheduler.AischedProfile).
				Req(corev1.ResourceCPU, "100m").GPU(1).Obj())
		}
	}
	// bound counts the bound pods of ns, and says why the first that
	// waits waits (what a failure reports).
	bound := func(ctx context.Context, ns string) (int, string, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, "", err
		}
		n, why := 0, ""
		for _, p := range pods.Items {
			switch {
			case p.Spec.NodeName != "":
				n++
			case why == "":
				why = p.Name + " waits"
				if cond := unschedulableCondition(&p); cond != nil {
					why += ": " + cond.Reason + ": " + cond.Message
				}
			}
		}
		return n, why, nil
	}
	localtest.Eventually(t, time.Minute, "12 GPUs shared 1:2", func(ctx context.Context) (bool, error) {
		a, whyA, err := bound(ctx, nsA)
		if err != nil {
			return false, err
		}
		b, whyB, err := bound(ctx, nsB)
		if err != nil {
			return false, err
		}
		return a+b == 12 && a >= 3 && a <= 5, fmt.Errorf("a %d, b %d bound; %s; %s", a, b, whyA, whyB)
	})
	// The pods that wait say so, naming their queue, and are not marked
	// Unschedulable (a cluster autoscaler would add nodes for them). The
	// queue writes their condition a moment after its pass.
	localtest.Eventually(t, 30*time.Second, "waiting pods say why, naming their queue", func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(nsA).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				continue
			}
			cond := unschedulableCondition(&p)
			if cond == nil || cond.Reason == corev1.PodReasonUnschedulable || !strings.Contains(cond.Message, "aischedqueue a") {
				return false, fmt.Errorf("waiting pod %s: condition %+v, want the queue's reason naming aischedqueue a", p.Name, cond)
			}
		}
		return true, nil
	})
}

// TestTeamQueueRefused: the apiserver refuses bad queues naming the field;
// a queue the apiserver cannot judge alone (a missing parent, a cycle, a
// parent guaranteed less than its children) says so in its status; a pod
// that names a queue that does not exist says so on itself.
func TestTeamQueueRefused(t *testing.T) {
	t.Parallel()
	c := startCluster(t, `  - {name: gpu, count: 1, cpu: "16", memory: 64Gi, gpus: {count: 4, model: Tesla-T4, memoryMiB: 15360}}
`)
	ctx := context.Background()
	client := createQueues(t, c)
	bad := func(mutate func(q *aischedv1alpha1.Queue)) *aischedv1alpha1.Queue {
		q := gpuQueue("bad", "", 4, 1)
		mutate(q)
		return q
	}
	for name, tc := range map[string]struct {
		q    *aischedv1alpha1.Queue
		want string
	}{
		"negative":         {bad(func(q *aischedv1alpha1.Queue) { q.Spec.Resources[0].Guaranteed = ptr.To(resource.MustParse("-1")) }), "guaranteed: Invalid value"},
		"huge":             {bad(func(q *aischedv1alpha1.Queue) { q.Spec.Resources[0].Guaranteed = ptr.To(resource.MustParse("2Ei")) }), "must be at most 1Pi"},
		"unknown resource": {bad(func(q *aischedv1alpha1.Queue) { q.Spec.Resources[0].Name = "nvidia.com/gpus" }), "spec.resources[0].name"},
		"weight":           {bad(func(q *aischedv1alpha1.Queue) { q.Spec.Resources[0].Weight = ptr.To[int32](0) }), "spec.resources[0].weight"},
		"own parent":       {bad(func(q *aischedv1alpha1.Queue) { q.Spec.Parent = "bad" }), "spec.parent: a queue cannot be its own parent"},
	} {
		_, err := client.AischedV1alpha1().AischedQueues().Create(ctx, tc.q, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
	low := gpuQueue("low", "", 4, 1)
	low.Spec.Resources[0].Limit = ptr.To(resource.MustParse("2"))
	createQueues(t, c, low, gpuQueue("p", "", 2, 1), gpuQueue("c1", "p", 2, 1), gpuQueue("c2", "p", 2, 1),
		gpuQueue("orphan", "none", 0, 1), gpuQueue("loop-a", "loop-b", 0, 1), gpuQueue("loop-b", "loop-a", 0, 1))
	for name, want := range map[string]string{
		"p":      "its children are guaranteed 4 of nvidia.com/gpu, more than its own 2",
		"orphan": `parent "none" does not exist`,
		"loop-a": "cycle",
		"low":    "spec.resources[nvidia.com/gpu].limit: 2 is below guaranteed 4",
	} {
		localtest.Eventually(t, 30*time.Second, "queue "+name+" invalid", func(ctx context.Context) (bool, error) {
			q, err := client.AischedV1alpha1().AischedQueues().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			cond := meta.FindStatusCondition(q.Status.Conditions, aischedv1alpha1.ConditionQueueValid)
			return cond != nil && cond.Status == metav1.ConditionFalse && strings.Contains(cond.Message, want), fmt.Errorf("conditions %+v", q.Status.Conditions)
		})
	}
	ns := createNamespace(t, c.Client)
	createPods(t, c, utiltesting.MakePod("lost", ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "100m").GPU(1).
		Label(aischedv1alpha1.QueueLabel, "nope").Obj(),
		utiltesting.MakePod("parent", ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "100m").GPU(1).
			Label(aischedv1alpha1.QueueLabel, "p").Obj())
	for name, want := range map[string]string{
		"lost":   `label scheduling.aisched.io/queue="nope": there is no aischedqueue "nope"`,
		"parent": "aischedqueue p has child queues; only leaf queues hold work",
	} {
		localtest.Eventually(t, 30*time.Second, "pod "+name+" says why it waits", func(ctx context.Context) (bool, error) {
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			cond := unschedulableCondition(p)
			return cond != nil && cond.Reason == string(jobqueue.ReasonQueueInvalid) && strings.Contains(cond.Message, want), fmt.Errorf("condition %+v", cond)
		})
	}
}

// Peers' queue CRDs and their pods' forms.
var (
	volcanoQueuesGVR = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "queues"}
	kaiQueuesGVR     = schema.GroupVersionResource{Group: "scheduling.run.ai", Version: "v2", Resource: "queues"}
)

// applyQueues creates the cluster-scoped objects of a YAML file of
// several documents through the dynamic client.
func applyQueues(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var obj map[string]interface{}
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		if len(obj) == 0 {
			continue
		}
		if _, err := dyn.Resource(gvr).Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}

// TestTeamQueuePeers: Volcano's and KAI-Scheduler's Queues, from their
// documentation (testdata/peer-queues), read with their meaning: pods
// naming Volcano's queue "capped" (capability 2 GPUs) and KAI's "team-a"
// (GPU limit 3) get that many cards and the rest wait over the queue's
// limit, naming it; a pod naming a KAI queue that does not exist says so.
func TestTeamQueuePeers(t *testing.T) {
	t.Parallel()
	cluster, err := clusterfile.Parse(t.Name(), []byte(`apiVersion: aisched.io/v1alpha1
kind: Cluster
nodePools:
  - {name: gpu, count: 2, cpu: "16", memory: 64Gi, gpus: {count: 4, model: Tesla-T4, memoryMiB: 15360}}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, local.Options{Cluster: cluster, DeferScheduler: true})
	installCRD(t, c, volcanoQueuesGVR, "Queue", apiextensionsv1.ClusterScoped)
	installCRD(t, c, kaiQueuesGVR, "Queue", apiextensionsv1.ClusterScoped)
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	applyQueues(t, dyn, volcanoQueuesGVR, "testdata/peer-queues/volcano.yaml")
	applyQueues(t, dyn, kaiQueuesGVR, "testdata/peer-queues/kai.yaml")
	if err := c.StartScheduler(context.Background()); err != nil {
		t.Fatal(err)
	}
	ns := createNamespace(t, c.Client)
	one := func(name string) *utiltesting.PodWrapper {
		return utiltesting.MakePod(name, ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "100m").GPU(1)
	}
	for i := range 3 {
		createPods(t, c, one(fmt.Sprintf("vc-%d", i)).Annotation("scheduling.volcano.sh/queue-name", "capped").Obj(),
			one(fmt.Sprintf("kai-%d", i)).Label("kai.scheduler/queue", "team-a").Obj())
	}
	createPods(t, c, one("kai-x").Label("kai.scheduler/queue", "team-x").Obj(), one("kai-3").Label("kai.scheduler/queue", "team-a").Obj())
	localtest.Eventually(t, time.Minute, "each peer's queue holds its limit", func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		bound := map[string]int{}
		var waiting []string
		ok := true
		for _, p := range pods.Items {
			prefix := strings.SplitN(p.Name, "-", 2)[0]
			if p.Spec.NodeName != "" {
				bound[prefix]++
				continue
			}
			cond := unschedulableCondition(&p)
			want := map[string]string{"vc": "Volcano Queue capped limits nvidia.com/gpu to 2", "kai": "KAI Queue team-a limits nvidia.com/gpu to 3"}[prefix]
			if p.Name == "kai-x" {
				want = `label kai.scheduler/queue="team-x": there is no KAI Queue "team-x"`
			}
			if cond == nil || !strings.Contains(cond.Message, want) {
				ok = false
			}
			waiting = append(waiting, fmt.Sprintf("%s: %v", p.Name, cond))
		}
		return ok && bound["vc"] == 2 && bound["kai"] == 3, fmt.Errorf("bound %v; waiting %v", bound, waiting)
	})
}

// TestTeamQueueFailover: a scheduler failover in the middle of a reclaim.
// Queue a (8 GPUs guaranteed) is idle and b borrows all 8 with a gang of
// two whose pods a finalizer keeps terminating. a's gang takes them back;
// once both victims are being deleted, the leader is killed. The standby
// takes over: it evicts nothing again (one Reclaimed event per victim),
// admits a's gang only whole, once the victims are gone.
func TestTeamQueueFailover(t *testing.T) {
	t.Parallel()
	c := startWithoutAisched(t, `  - {name: gpu, count: 2, cpu: "16", memory: 64Gi, gpus: {count: 4, model: NVIDIA-A100-SXM4-40GB, memoryMiB: 40960}}
`)
	ctx := context.Background()
	start := externalScheduler(t, c)
	leader, standby := waitLeader(t, start(), start())
	waitOutput(t, standby, "Attempting to acquire leader lease")
	createQueues(t, c, gpuQueue("a", "", 8, 1), gpuQueue("b", "", 0, 1))
	nsA, nsB := queueNamespace(t, c, "a"), queueNamespace(t, c, "b")
	const hold = "aisched.io/test-hold"
	victims := gang(nsB, "v", 2, 4)
	for _, p := range victims {
		p.Finalizers = []string{hold}
	}
	createPods(t, c, victims...)
	waitPodsRunning(t, c, nsB, 2)
	createPods(t, c, gang(nsA, "taker", 2, 4)...)
	localtest.Eventually(t, time.Minute, "both victims being deleted", func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(nsB).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		deleting := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				deleting++
			}
		}
		return deleting == 2, fmt.Errorf("%d of 2 being deleted", deleting)
	})
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, standby, acquired)
	// The new leader finds the reclaim half done: the taker waits, whole.
	time.Sleep(3 * time.Second)
	if n := boundMembers(t, c, nsA, "taker"); n != 0 {
		t.Errorf("%d members of the taker bound while the victims still hold the cards", n)
	}
	for _, p := range victims {
		got, err := c.Client.CoreV1().Pods(nsB).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got.Finalizers = nil
		if _, err := c.Client.CoreV1().Pods(nsB).Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitPodsRunning(t, c, nsA, 2)
	events, err := c.Client.EventsV1().Events(nsB).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reclaimed := map[string]int{}
	for _, e := range events.Items {
		if e.Reason == "Reclaimed" {
			reclaimed[e.Regarding.Name] += max(int(e.DeprecatedCount), 1)
		}
	}
	if reclaimed["v-0"] != 1 || reclaimed["v-1"] != 1 {
		t.Errorf("Reclaimed events by pod %v, want one for each of v-0 and v-1", reclaimed)
	}
	checkCardsOnce(t, c, nsA)
}

// TestTeamQueueWebhook: with the controller's webhook, the apiserver
// refuses what needs the other queues, naming the field: children
// guaranteed more than their parent, a cycle of parents, and a queue that
// holds work made a parent.
func TestTeamQueueWebhook(t *testing.T) {
	t.Parallel()
	cluster, err := clusterfile.Parse(t.Name(), []byte(`apiVersion: aisched.io/v1alpha1
kind: Cluster
nodePools:
  - {name: gpu, count: 1, cpu: "16", memory: 64Gi, gpus: {count: 4, model: Tesla-T4, memoryMiB: 15360}}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, local.Options{Cluster: cluster, Platform: &local.PlatformOptions{}})
	ctx := context.Background()
	client := createQueues(t, c, gpuQueue("dept", "", 4, 1), gpuQueue("team-a", "dept", 3, 1), gpuQueue("x", "y", 0, 1), gpuQueue("y", "", 0, 1),
		gpuQueue("busy", "", 2, 1))
	ns := createNamespace(t, c.Client)
	createPods(t, c, utiltesting.MakePod("work", ns).SchedulerName(scheduler.AischedProfile).Req(corev1.ResourceCPU, "100m").GPU(1).
		Label(aischedv1alpha1.QueueLabel, "busy").Obj())
	localtest.Eventually(t, 30*time.Second, "busy holds work", func(ctx context.Context) (bool, error) {
		q, err := client.AischedV1alpha1().AischedQueues().Get(ctx, "busy", metav1.GetOptions{})
		return err == nil && q.Status.AdmittedGroups > 0, err
	})
	for name, tc := range map[string]struct {
		q    *aischedv1alpha1.Queue
		want string
	}{
		"children over their parent": {gpuQueue("team-b", "dept", 2, 1), "spec.resources[nvidia.com/gpu].guaranteed: Invalid value: \"5\": the children of aischedqueue dept are guaranteed 5"},
		"a child of a child":         {gpuQueue("z", "x", 0, 1), ""},
		"a queue with work a parent": {gpuQueue("child", "busy", 0, 1), "spec.parent: Invalid value: \"busy\": aischedqueue busy holds work"},
	} {
		_, err := client.AischedV1alpha1().AischedQueues().Create(ctx, tc.q, metav1.CreateOptions{})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
	// y made a child of x, whose parent is y: a cycle.
	y, err := client.AischedV1alpha1().AischedQueues().Get(ctx, "y", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	y.Spec.Parent = "x"
	if _, err := client.AischedV1alpha1().AischedQueues().Update(ctx, y, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "cycle of parents: y -> x -> y") {
		t.Errorf("a cycle: %v, want it refused naming the cycle", err)
	}
}
