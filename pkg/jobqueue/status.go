package jobqueue

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	listers "github.com/aisched/aisched/pkg/generated/listers/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/podgroup"
)

// statusWriters is how many PodGroup writes run at once.
const statusWriters = 2

// statusDelay coalesces the changes of a group's status within it into
// one write (a group admitted and bound in a moment is written once).
const statusDelay = 500 * time.Millisecond

// statusWriter keeps each group's PodGroup status in line with the queue:
// phase, member counts, queue position and the Admitted condition. For a
// group declared by the pod-group labels it creates the PodGroup, owned by the
// members' controllers (or the members), so kubectl get podgroups lists
// every group.
type statusWriter struct {
	lister listers.PodGroupLister
	client versioned.Interface
	queue  workqueue.TypedRateLimitingInterface[string]

	mu   sync.Mutex
	want map[string]desired
}

type desired struct {
	namespace, name string
	minMember       int32
	owners          []metav1.OwnerReference
	fromLabels      bool
	// gone: the group has no members left.
	gone   bool
	status schedulingv1alpha1.PodGroupStatus
}

func newStatusWriter(lister listers.PodGroupLister, client versioned.Interface) *statusWriter {
	return &statusWriter{
		lister: lister,
		client: client,
		queue:  workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		want:   map[string]desired{},
	}
}

// publish records the status each group should have and queues the
// changed ones for writing.
func (w *statusWriter) publish(plan Plan, groups map[string]*Group, ended func(key string) terminalCounts) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, d := range plan.Decisions {
		g := groups[key]
		if g == nil || g.Single || len(g.Pending)+len(g.Bound) == 0 {
			continue
		}
		t := ended(key)
		next := desired{namespace: g.Namespace, name: key[len(g.Namespace)+1:], minMember: int32(g.MinAvailable), status: statusOf(d, g, t)}
		if p := plan.Placements[key]; p != nil {
			next.status.Domain = p.Selector
		}
		first := g.Pending
		if len(first) == 0 {
			first = g.Bound
		}
		if _, ok, _ := podgroup.FromPod(first[0]); ok {
			next.fromLabels = true
			next.owners = ownersOf(append(append([]*corev1.Pod{}, g.Pending...), g.Bound...))
		}
		w.set(key, next)
	}
	// Groups with no members left end Finished or Failed, or, when their
	// members were deleted, Pending with nothing counted; their PodGroup
	// is written once more if it exists, never created again.
	for key, prev := range w.want {
		if _, ok := groups[key]; ok {
			continue
		}
		t := ended(key)
		next := prev
		next.gone = true
		next.status.Running, next.status.Scheduled, next.status.QueuePosition, next.status.Domain = 0, 0, 0, ""
		next.status.Succeeded, next.status.Failed = t.succeeded, t.failed
		switch {
		case t.succeeded >= prev.minMember:
			next.status.Phase = schedulingv1alpha1.PodGroupFinished
		case t.failed > 0:
			next.status.Phase = schedulingv1alpha1.PodGroupFailed
		default:
			next.status.Phase = schedulingv1alpha1.PodGroupPending
		}
		w.set(key, next)
	}
}

func (w *statusWriter) set(key string, next desired) {
	if prev, ok := w.want[key]; ok && prev.gone == next.gone && equality.Semantic.DeepEqual(prev.status, next.status) {
		return
	}
	w.want[key] = next
	w.queue.AddAfter(key, statusDelay)
}

// statusOf is the status a group should have.
func statusOf(d Decision, g *Group, t terminalCounts) schedulingv1alpha1.PodGroupStatus {
	s := schedulingv1alpha1.PodGroupStatus{Succeeded: t.succeeded, Failed: t.failed, Scheduled: int32(len(g.Bound)), QueuePosition: int32(d.Position)}
	for _, p := range g.Bound {
		if p.Status.Phase == corev1.PodRunning {
			s.Running++
		}
	}
	minMember := int32(g.MinAvailable)
	switch {
	case s.Running+s.Succeeded >= minMember:
		s.Phase = schedulingv1alpha1.PodGroupRunning
	case s.Scheduled+s.Succeeded >= minMember:
		s.Phase = schedulingv1alpha1.PodGroupScheduled
	case d.Admitted:
		s.Phase = schedulingv1alpha1.PodGroupScheduling
	case d.Reason == ReasonWaitingForMembers:
		s.Phase = schedulingv1alpha1.PodGroupPending
	case d.Reason == ReasonUnplaceable:
		s.Phase = schedulingv1alpha1.PodGroupUnplaceable
	default:
		s.Phase = schedulingv1alpha1.PodGroupQueued
	}
	cond := metav1.Condition{Type: schedulingv1alpha1.ConditionAdmitted, Status: metav1.ConditionFalse, Reason: string(d.Reason), Message: d.Message}
	if d.Admitted {
		cond.Status = metav1.ConditionTrue
	}
	s.Conditions = []metav1.Condition{cond}
	return s
}

// ownersOf returns the members' controllers, or the members when they
// have none (at most 16 of them).
func ownersOf(pods []*corev1.Pod) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	seen := map[string]bool{}
	for _, p := range pods {
		if c := metav1.GetControllerOf(p); c != nil && !seen[string(c.UID)] {
			seen[string(c.UID)] = true
			out = append(out, metav1.OwnerReference{APIVersion: c.APIVersion, Kind: c.Kind, Name: c.Name, UID: c.UID})
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, p := range pods[:min(len(pods), 16)] {
		out = append(out, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID})
	}
	return out
}

func (w *statusWriter) run(ctx context.Context) {
	runWriters(ctx, w.queue, "Writing PodGroup status", w.write)
}

// runWriters runs statusWriters workers that write the keys of queue,
// retrying a failed write with backoff, until ctx ends; what names the
// work in logs.
func runWriters(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], what string, write func(context.Context, string) error) {
	defer queue.ShutDown()
	work := func(ctx context.Context) {
		for {
			key, quit := queue.Get()
			if quit {
				return
			}
			if err := write(ctx, key); err != nil {
				// A conflict or a retry is routine; a first failure of
				// another kind may be a lasting one (RBAC, a CRD missing).
				if logger := klog.FromContext(ctx); apierrors.IsConflict(err) || queue.NumRequeues(key) > 0 {
					logger.V(2).Info(what, "key", key, "err", err)
				} else {
					logger.Error(err, what, "key", key)
				}
				queue.AddRateLimited(key)
			} else {
				queue.Forget(key)
			}
			queue.Done(key)
		}
	}
	for range statusWriters {
		go wait.UntilWithContext(ctx, work, time.Second)
	}
	<-ctx.Done()
}

// write brings one PodGroup's status to what was published last.
func (w *statusWriter) write(ctx context.Context, key string) error {
	w.mu.Lock()
	want, ok := w.want[key]
	final := ok && want.gone
	w.mu.Unlock()
	if !ok {
		return nil
	}
	pg, err := w.lister.PodGroups(want.namespace).Get(want.name)
	switch {
	case apierrors.IsNotFound(err) && want.fromLabels && !final:
		pg, err = w.client.SchedulingV1alpha1().PodGroups(want.namespace).Create(ctx, &schedulingv1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: want.name, Namespace: want.namespace, OwnerReferences: want.owners,
				Annotations: map[string]string{podgroup.CreatedFromLabelsAnnotation: "true"}},
			Spec: schedulingv1alpha1.PodGroupSpec{MinMember: want.minMember},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return err // retried once the lister has it
		}
		if err != nil {
			return err
		}
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	next := pg.DeepCopy()
	next.Status.Phase = want.status.Phase
	next.Status.Running, next.Status.Succeeded, next.Status.Failed = want.status.Running, want.status.Succeeded, want.status.Failed
	next.Status.Scheduled, next.Status.QueuePosition = want.status.Scheduled, want.status.QueuePosition
	next.Status.Domain = want.status.Domain
	if waiting := []schedulingv1alpha1.PodGroupPhase{schedulingv1alpha1.PodGroupPending, schedulingv1alpha1.PodGroupQueued, schedulingv1alpha1.PodGroupUnplaceable}; next.Status.ScheduleStartTime.IsZero() && !slices.Contains(waiting, want.status.Phase) {
		next.Status.ScheduleStartTime = metav1.Now()
	}
	for _, c := range want.status.Conditions {
		c.ObservedGeneration = pg.Generation
		meta.SetStatusCondition(&next.Status.Conditions, c)
	}
	if !equality.Semantic.DeepEqual(pg.Status, next.Status) {
		_, err = w.client.SchedulingV1alpha1().PodGroups(pg.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	}
	if err == nil && final {
		w.mu.Lock()
		delete(w.want, key)
		w.mu.Unlock()
	}
	return err
}
