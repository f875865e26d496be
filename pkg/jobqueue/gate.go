package jobqueue

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/aisched/aisched/pkg/gpuledger/dra"
	"github.com/aisched/aisched/pkg/queuetree"
)

// Gate reports whether the members of the group with key may be
// scheduled, and if not, why. The pod's profile joins the queue.
func (q *Queue) Gate(pod *corev1.Pod, key string) (bool, string) {
	q.mu.Lock()
	if !q.profiles[pod.Spec.SchedulerName] {
		q.profiles[pod.Spec.SchedulerName] = true
		q.mu.Unlock()
		q.Kick()
		return false, "waiting for the job queue"
	}
	admitted := q.admitted[key]
	q.mu.Unlock()
	if admitted {
		return true, ""
	}
	what := workName(key)
	if p := q.plan.Load(); p != nil {
		if d, ok := p.Decisions[key]; ok {
			return false, fmt.Sprintf("%s is %s: %s", what, d.Reason, d.Message)
		}
	}
	q.Kick()
	return false, what + " is waiting for the job queue"
}

// Single returns the key under which a pod in no pod group is queued, and
// whether it is: only while team queues exist, and only when one accounts
// the pod (it names one, or there is a default queue) or the queue it
// names cannot hold it (it waits saying why). The pod is then a group of
// one: Gate it with the key, and report a failed attempt with Failed.
func (q *Queue) Single(pod *corev1.Pod) (string, bool) {
	if q.source == nil || !q.source.active() {
		return "", false
	}
	name, problem := q.source.queueOf(pod)
	if name == "" && problem == "" {
		return "", false
	}
	return singleKey(pod), true
}

// singleKey is the key of a pod the queue admits alone.
func singleKey(pod *corev1.Pod) string {
	return "pod " + pod.Namespace + "/" + pod.Name
}

// QueueOf names the team queue a pod's work goes to, "" for none, and
// why, naming the key, when the queue it names cannot hold it (aisched
// whatif tells a job's queue with it).
func (q *Queue) QueueOf(pod *corev1.Pod) (name, problem string) {
	if q.source == nil {
		return "", ""
	}
	return q.source.queueOf(pod)
}

// Queues returns the team queues as the last pass counted them, nil when
// there are none; the tree must not be changed.
func (q *Queue) Queues() *queuetree.Tree {
	return q.tree.Load()
}

// Failed revokes the admission of a group whose attempt failed and holds
// it back for a backoff that doubles with each failure in a row.
func (q *Queue) Failed(key string) {
	q.mu.Lock()
	if !q.admitted[key] {
		q.mu.Unlock()
		return
	}
	delete(q.admitted, key)
	delete(q.admittedAt, key)
	q.metrics.failedAttempts.Inc()
	q.failures[key]++
	wait := q.opts.Backoff << min(q.failures[key]-1, 20)
	wait = min(wait, q.opts.MaxBackoff)
	q.backoff[key] = q.opts.Clock.Now().Add(wait)
	q.mu.Unlock()
	q.opts.Clock.AfterFunc(wait, q.Kick)
	q.Kick()
}

// Decision returns the last plan's decision for the group with key; ok is
// false when the plan has none (the group is unknown, or in no gang).
func (q *Queue) Decision(key string) (d Decision, ok bool) {
	if p := q.plan.Load(); p != nil {
		d, ok = p.Decisions[key]
	}
	return d, ok
}

// Binding returns what the current plan's reservations hold for a pod of
// group key ("" for none) with priority (Plan.Binding), or nil.
func (q *Queue) Binding(key string, priority int32) *Reservation {
	if p := q.plan.Load(); p != nil {
		return p.Binding(key, priority)
	}
	return nil
}

// ClaimPlan returns the node and devices the last plan's solution of its
// group's DRA claims gives the pod (claims.go); ok is false when it has
// none.
func (q *Queue) ClaimPlan(pod *corev1.Pod) (dra.ClaimPlan, bool) {
	if p := q.plan.Load(); p != nil {
		plan, ok := p.Claims[pod.UID]
		return plan, ok
	}
	return dra.ClaimPlan{}, false
}

// Placed returns the topology domain the current plan placed the admitted
// group with key in (Plan.Placements), nil when it asks for none; it must
// not be changed.
func (q *Queue) Placed(key string) *Placed {
	if p := q.plan.Load(); p != nil {
		return p.Placements[key]
	}
	return nil
}
