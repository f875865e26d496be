package jobqueue

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	clocktesting "k8s.io/utils/clock/testing"
)

// heldPods is a podWriter on a fake clientset holding pods, with the
// informer's store fed from the same pods.
func heldPods(t *testing.T, pods ...*corev1.Pod) (*podWriter, *fake.Clientset, *events.FakeRecorder, *clocktesting.FakeClock) {
	t.Helper()
	client := fake.NewClientset()
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, p := range pods {
		if _, err := client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := store.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	recorder := events.NewFakeRecorder(10)
	clk := clocktesting.NewFakeClock(t0)
	return newPodWriter(client, recorder, store, clk), client, recorder, clk
}

// condition reads the pod's PodScheduled condition from the clientset.
func condition(t *testing.T, client *fake.Clientset, name string) *corev1.PodCondition {
	t.Helper()
	p, err := client.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, c := podutil.GetPodCondition(&p.Status, corev1.PodScheduled)
	return c
}

func drain(ch chan string) []string {
	var out []string
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return out
		}
	}
}

// writeAll writes what publish queued, as the workers would.
func writeAll(t *testing.T, w *podWriter) {
	t.Helper()
	for w.queue.Len() > 0 {
		key, _ := w.queue.Get()
		if err := w.write(context.Background(), key); err != nil {
			t.Fatalf("write %s: %v", key, err)
		}
		w.queue.Done(key)
	}
}

func TestHeldPodsSayWhy(t *testing.T) {
	g := group("train", 2, 1, 2, 0, 0)
	w, client, recorder, clk := heldPods(t, g.Pending...)
	quota := Decision{Reason: ReasonQuotaExceeded, Position: 2,
		Message: "ResourceQuota gpus: the group needs 4 of requests.nvidia.com/gpu, 2 is left of 4 (2 used by other pods)"}
	plan := Plan{Decisions: map[string]Decision{g.Key: quota}}
	groups := map[string]*Group{g.Key: &g}

	w.publish(plan, groups)
	writeAll(t, w)
	for _, p := range g.Pending {
		c := condition(t, client, p.Name)
		if c == nil || c.Status != corev1.ConditionFalse || c.Reason != string(ReasonQuotaExceeded) ||
			!strings.Contains(c.Message, "pod group ns/train is QuotaExceeded (position 2): ResourceQuota gpus: the group needs 4") {
			t.Errorf("pod %s: PodScheduled %+v, want False, QuotaExceeded and the group's words", p.Name, c)
		}
	}
	if got := drain(recorder.Events); len(got) != 2 || !strings.HasPrefix(got[0], "Warning QuotaExceeded held by aisched's job queue") {
		t.Errorf("events %q, want one Warning per pod in the group's words", got)
	}

	// The same words again: nothing is written or told.
	actions := len(client.Actions())
	w.publish(plan, groups)
	writeAll(t, w)
	if n := len(client.Actions()) - actions; n != 0 {
		t.Errorf("%d API calls for unchanged words, want 0", n)
	}

	// A new position within the minute: the condition follows, no event;
	// a new reason: an event at once.
	quota.Position = 1
	plan.Decisions[g.Key] = quota
	w.publish(plan, groups)
	writeAll(t, w)
	if c := condition(t, client, g.Pending[0].Name); !strings.Contains(c.Message, "(position 1)") {
		t.Errorf("condition %q after the group moved up, want position 1", c.Message)
	}
	if got := drain(recorder.Events); len(got) != 0 {
		t.Errorf("events %q within a minute for the same reason, want none", got)
	}
	clk.Step(time.Second)
	plan.Decisions[g.Key] = Decision{Reason: ReasonWaitingForCapacity, Message: "waits for 4 free GPUs"}
	w.publish(plan, groups)
	writeAll(t, w)
	if got := drain(recorder.Events); len(got) != 2 || !strings.HasPrefix(got[0], "Normal WaitingForCapacity") {
		t.Errorf("events %q after the reason changed, want one Normal per pod", got)
	}

	// Admitted: the pods are forgotten and nothing more is written.
	actions = len(client.Actions())
	plan.Decisions[g.Key] = Decision{Reason: ReasonAdmitted, Admitted: true}
	w.publish(plan, groups)
	writeAll(t, w)
	if n := len(client.Actions()) - actions; n != 0 || len(w.want) != 0 {
		t.Errorf("%d API calls and %d pods remembered after admission, want none", n, len(w.want))
	}
}

// A pod bound meanwhile (PodScheduled True) is left alone, and the words
// are bounded whatever the group's message holds.
func TestHeldPodsBoundAndBounded(t *testing.T) {
	g := group("big", 2, 1, 1, 0, 0)
	g.Pending[1].Spec.NodeName = "n1"
	w, client, _, _ := heldPods(t, g.Pending...)
	plan := Plan{Decisions: map[string]Decision{g.Key: {Reason: ReasonUnplaceable, Message: strings.Repeat("x", 20000)}}}
	w.publish(plan, map[string]*Group{g.Key: &g})
	writeAll(t, w)
	if c := condition(t, client, g.Pending[0].Name); c == nil || len(c.Message) > maxMessage || !strings.HasSuffix(c.Message, "...") {
		t.Errorf("condition %+v, want a message of at most %d bytes", c, maxMessage)
	}
	if c := condition(t, client, g.Pending[1].Name); c != nil {
		t.Errorf("bound pod got condition %+v, want none", c)
	}
}
