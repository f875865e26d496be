package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/utils/clock"
)

// maxMessage bounds the message written on a pod: a group's message names
// pods and quotas, all of them bounded, but the condition must stay small
// whatever they hold.
const maxMessage = 1024

// eventInterval is how often a held pod gets an event while the reason it
// waits stays the same; a new reason gets one at once.
const eventInterval = time.Minute

// podWriter tells each pod the queue holds back why it waits, where
// on-call engineers look first (kubectl describe pod): the condition
// PodScheduled=False with the group's reason (QuotaExceeded,
// WaitingForCapacity, ...) and, in the same words as the PodGroup's
// Admitted condition, its message; and an event, rate-limited. The reason
// is never Unschedulable, which the scheduler writes after a failed
// attempt and which cluster autoscalers read as a request for nodes.
type podWriter struct {
	client   kubernetes.Interface
	recorder events.EventRecorder
	pods     cache.Indexer
	clock    clock.PassiveClock
	queue    workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// want is what each held pod should say, by namespace/name.
	want map[string]podWant
	// told is the last event of each held pod.
	told map[string]podEvent
}

type podWant struct {
	reason Reason
	// message is the condition's message.
	message string
}

type podEvent struct {
	reason Reason
	at     time.Time
}

func newPodWriter(client kubernetes.Interface, recorder events.EventRecorder, pods cache.Indexer, clk clock.PassiveClock) *podWriter {
	return &podWriter{
		client:   client,
		recorder: recorder,
		pods:     pods,
		clock:    clk,
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		want:     map[string]podWant{},
		told:     map[string]podEvent{},
	}
}

// heldMessage is what a member of the group with key says while the
// queue holds it: the PodGroup's words, with the queue position.
func heldMessage(key string, d Decision) string {
	msg := fmt.Sprintf("held by aisched's job queue: %s is %s", workName(key), d.Reason)
	if d.Position > 0 {
		msg += fmt.Sprintf(" (position %d)", d.Position)
	}
	if d.Message != "" {
		msg += ": " + d.Message
	}
	msg = truncate(msg, maxMessage)
	return msg
}

// publish records what the pending members of every group not admitted
// should say, and queues the pods whose words changed. Pods no longer
// held are forgotten: the scheduler speaks for them from now on.
func (w *podWriter) publish(plan Plan, groups map[string]*Group) {
	w.mu.Lock()
	defer w.mu.Unlock()
	held := map[string]bool{}
	for key, d := range plan.Decisions {
		g := groups[key]
		if g == nil || d.Admitted {
			continue
		}
		next := podWant{reason: d.Reason, message: heldMessage(key, d)}
		for _, p := range g.Pending {
			podKey := p.Namespace + "/" + p.Name
			held[podKey] = true
			if w.want[podKey] != next {
				w.want[podKey] = next
				w.queue.Add(podKey)
			}
		}
	}
	for podKey := range w.want {
		if !held[podKey] {
			delete(w.want, podKey)
			delete(w.told, podKey)
		}
	}
}

func (w *podWriter) run(ctx context.Context) {
	runWriters(ctx, w.queue, "Telling a held pod why it waits", w.write)
}

// write brings one held pod's condition to what was published last and
// records an event when the reason is new or the last one is old. The
// patch carries the resourceVersion the pod was read at, so that it never
// lands on a pod bound meanwhile (whose PodScheduled is True).
func (w *podWriter) write(ctx context.Context, key string) error {
	w.mu.Lock()
	want, ok := w.want[key]
	w.mu.Unlock()
	if !ok {
		return nil
	}
	obj, exists, err := w.pods.GetByKey(key)
	if err != nil || !exists {
		return err
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
		return nil
	}
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: string(want.reason), Message: want.message}
	status := pod.Status.DeepCopy()
	if podutil.UpdatePodCondition(status, &cond) {
		_, c := podutil.GetPodCondition(status, corev1.PodScheduled)
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": pod.ResourceVersion},
			"status":   map[string]any{"conditions": []corev1.PodCondition{*c}},
		})
		if err != nil {
			return err
		}
		_, err = w.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err // a conflict: read again once the informer has the pod
		}
	}
	w.mu.Lock()
	last, told := w.told[key]
	now := w.clock.Now()
	tell := !told || last.reason != want.reason || now.Sub(last.at) >= eventInterval
	if tell {
		w.told[key] = podEvent{reason: want.reason, at: now}
	}
	w.mu.Unlock()
	if tell && w.recorder != nil {
		eventType := corev1.EventTypeNormal
		if want.reason == ReasonUnplaceable || want.reason == ReasonQuotaExceeded {
			eventType = corev1.EventTypeWarning
		}
		w.recorder.Eventf(pod, nil, eventType, string(want.reason), "Queueing", "%s", want.message)
	}
	return nil
}

// truncate cuts msg to at most n bytes, ending it with "..." when cut.
func truncate(msg string, n int) string {
	if len(msg) <= n {
		return msg
	}
	return msg[:n-3] + "..."
}

// workName names the work of a key in messages: "pod group ns/name", or
// "pod ns/name" for a pod in no group that a team queue holds.
func workName(key string) string {
	if strings.HasPrefix(key, "pod ") {
		return key
	}
	return "pod group " + key
}
