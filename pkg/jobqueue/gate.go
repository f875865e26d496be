package jobqueue

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
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
	if p := q.plan.Load(); p != nil {
		if d, ok := p.Decisions[key]; ok {
			return false, fmt.Sprintf("pod group %s is %s: %s", key, d.Reason, d.Message)
		}
	}
	q.Kick()
	return false, fmt.Sprintf("pod group %s is waiting for the job queue", key)
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
