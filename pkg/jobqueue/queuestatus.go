package jobqueue

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/queuetree"
)

// queueStatusDelay coalesces a queue's status changes within it into one
// write: its counts change with every group admitted.
const queueStatusDelay = time.Second

// maxBorrowsFrom bounds status.borrowsFrom.
const maxBorrowsFrom = 8

// queueStatusWriter keeps each aisched Queue's status in line with the
// job queue's last pass: guaranteed, used, borrowed and fair share per
// resource, the groups admitted and waiting, whom it borrows from, its
// usage history and whether it is valid. Peers' queues are theirs: their
// status is not written.
type queueStatusWriter struct {
	client versioned.Interface
	queue  workqueue.TypedRateLimitingInterface[string]

	mu   sync.Mutex
	want map[string]aischedv1alpha1.QueueStatus
}

func newQueueStatusWriter(client versioned.Interface) *queueStatusWriter {
	return &queueStatusWriter{client: client, want: map[string]aischedv1alpha1.QueueStatus{},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
}

// publish records the status of every aisched Queue of t, with the
// problems Build found, and queues the changed ones for writing.
func (w *queueStatusWriter) publish(t *queuetree.Tree, problems []queuetree.Problem, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range t.Queues() {
		if formPrefix(n.Name) != "" {
			continue
		}
		st := queueStatusOf(t, n, problems, now)
		if prev, ok := w.want[n.Name]; ok && equality.Semantic.DeepEqual(withoutTimes(prev), withoutTimes(st)) {
			continue
		}
		w.want[n.Name] = st
		w.queue.AddAfter(n.Name, queueStatusDelay)
	}
}

// withoutTimes is a status without its history's time, which moves every
// pass.
func withoutTimes(s aischedv1alpha1.QueueStatus) aischedv1alpha1.QueueStatus {
	s.HistoryTime = nil
	return s
}

// queueStatusOf is what n's status says after a pass over t.
func queueStatusOf(t *queuetree.Tree, n *queuetree.Node, problems []queuetree.Problem, now time.Time) aischedv1alpha1.QueueStatus {
	var st aischedv1alpha1.QueueStatus
	admitted, waiting := n.Work()
	st.AdmittedGroups, st.WaitingGroups = int32(admitted), int32(waiting)
	for i, name := range t.Names() {
		if !n.Listed(i) && n.Used()[i] == 0 {
			continue
		}
		rs := aischedv1alpha1.QueueResourceStatus{Name: name,
			Guaranteed: queuetree.Quantity(name, n.Guaranteed()[i]), Used: queuetree.Quantity(name, n.Used()[i]),
			Borrowed: queuetree.Quantity(name, n.Borrowed(i)), FairShare: queuetree.Quantity(name, n.FairShare()[i])}
		st.Resources = append(st.Resources, rs)
		if name == queuetree.GPU {
			gpuStatus := rs
			st.GPU = &gpuStatus
		}
		if n.HalfLife > 0 {
			st.UsageHistory = append(st.UsageHistory, aischedv1alpha1.QueueUsageHistory{Name: name, Average: queuetree.Quantity(name, n.History()[i])})
		}
	}
	if n.HalfLife > 0 {
		st.HistoryTime = &metav1.Time{Time: now}
	}
	if i := slices.Index(t.Names(), queuetree.GPU); i >= 0 {
		for _, l := range t.Lenders(n, i) {
			if len(st.BorrowsFrom) == maxBorrowsFrom {
				break
			}
			st.BorrowsFrom = append(st.BorrowsFrom, fmt.Sprintf("%s: %s", l.Queue.Name, queuetree.Format(queuetree.GPU, l.Amount)))
		}
	}
	valid := metav1.Condition{Type: aischedv1alpha1.ConditionQueueValid, Status: metav1.ConditionTrue, Reason: "Valid", Message: "the queue can hold work"}
	var msgs []string
	if n.Invalid() != "" {
		msgs = append(msgs, n.Invalid())
	}
	for _, p := range problems {
		if p.Queue == n.Object {
			msgs = append(msgs, p.Field+": "+p.Msg)
		}
	}
	if len(msgs) > 0 {
		valid.Status, valid.Reason, valid.Message = metav1.ConditionFalse, "Invalid", truncate(fmt.Sprint(msgs), maxMessage)
	}
	st.Conditions = []metav1.Condition{valid}
	return st
}

// run writes the statuses queued by publish until ctx ends.
func (w *queueStatusWriter) run(ctx context.Context) {
	defer w.queue.ShutDown()
	work := func(ctx context.Context) {
		for {
			name, quit := w.queue.Get()
			if quit {
				return
			}
			if err := w.write(ctx, name); err != nil {
				klog.FromContext(ctx).V(2).Info("Writing a queue's status", "queue", name, "err", err)
				w.queue.AddRateLimited(name)
			} else {
				w.queue.Forget(name)
			}
			w.queue.Done(name)
		}
	}
	go wait.UntilWithContext(ctx, work, time.Second)
	<-ctx.Done()
}

// write brings one Queue's status to what was published last.
func (w *queueStatusWriter) write(ctx context.Context, name string) error {
	w.mu.Lock()
	want, ok := w.want[name]
	w.mu.Unlock()
	if !ok {
		return nil
	}
	q, err := w.client.AischedV1alpha1().AischedQueues().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		w.mu.Lock()
		delete(w.want, name)
		w.mu.Unlock()
		return nil
	}
	if err != nil {
		return err
	}
	next := q.DeepCopy()
	conditions := next.Status.Conditions
	next.Status = want
	next.Status.Conditions = conditions
	for _, c := range want.Conditions {
		c.ObservedGeneration = q.Generation
		meta.SetStatusCondition(&next.Status.Conditions, c)
	}
	if equality.Semantic.DeepEqual(q.Status, next.Status) {
		return nil
	}
	_, err = w.client.AischedV1alpha1().AischedQueues().UpdateStatus(ctx, next, metav1.UpdateOptions{})
	return err
}
