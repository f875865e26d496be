package jobqueue

import (
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"

	"github.com/aisched/aisched/pkg/podgroup"
)

// podAdded: a new unbound member may complete its group: a pass now.
// A pod created bound takes capacity: a pass soon, if there are groups or
// team queues to count it against (for a pod outside any group).
func (q *Queue) podAdded(obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	_, inGroup := podgroup.KeyOf(pod)
	switch {
	case inGroup && pod.Spec.NodeName == "":
		q.Kick()
	case inGroup:
		q.refresh()
	case pod.Spec.NodeName != "":
		q.refreshIfCounting()
	}
}

// podUpdate: a pod bound, running or ending. Binding changes no
// admission (admitted members were placed on paper already): a pass soon,
// for the status (for a pod outside any group, only if there are groups
// or team queues to count it against). A bound pod being deleted frees
// capacity: a pass now if a group waits. An unbound member whose claims
// made from templates got their names (the resourceclaim controller
// writes them to the pod's status after it creates them) may complete a
// group that waited for them: a pass now.
func (q *Queue) podUpdate(old, obj interface{}) {
	o, ok1 := old.(*corev1.Pod)
	n, ok2 := obj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return
	}
	if _, inGroup := podgroup.KeyOf(n); inGroup && n.Spec.NodeName == "" &&
		!apiequality.Semantic.DeepEqual(o.Status.ResourceClaimStatuses, n.Status.ResourceClaimStatuses) {
		q.Kick()
	}
	if o.Spec.NodeName == n.Spec.NodeName && o.Status.Phase == n.Status.Phase && o.DeletionTimestamp.Equal(n.DeletionTimestamp) {
		return
	}
	if n.DeletionTimestamp != nil && n.Spec.NodeName != "" {
		q.kickIfWaiting()
	}
	q.notePreempted(n)
	if _, inGroup := podgroup.KeyOf(n); inGroup {
		q.refresh()
	} else if n.Spec.NodeName != "" {
		q.refreshIfCounting()
	}
}

// podDeleted: a bound pod gone frees capacity; a member gone changes its
// group (members that ended are counted by q.ended: the scheduler's
// informer sees them leave as they were before they ended).
func (q *Queue) podDeleted(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.Spec.NodeName != "" {
		q.kickIfWaiting()
	}
	q.notePreempted(pod)
	if _, inGroup := podgroup.KeyOf(pod); inGroup {
		q.refresh()
	}
}

// notePreempted notes the group of a bound member a scheduler preempts,
// for the next pass, which preempts the rest of the group if it can no
// longer run as one.
func (q *Queue) notePreempted(pod *corev1.Pod) {
	if pod.Spec.NodeName == "" || !preemptedByScheduler(pod) {
		return
	}
	if key, ok := podgroup.KeyOf(pod); ok {
		q.mu.Lock()
		q.preempted[key] = true
		q.mu.Unlock()
		q.Kick()
	}
}

// preemptedByScheduler reports whether the pod is being deleted by a
// scheduler's preemption (the DisruptionTarget condition it sets).
func preemptedByScheduler(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonPreemptionByScheduler {
			return true
		}
	}
	return false
}
