package coscheduling

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/pkg/podgroup"
)

// sortKey is what Less compares after priority: the pod's creation time or
// its group's, the group key ("" for a pod in no group), and the time the
// entity entered the queue. Comparing such tuples in order is a strict weak
// order.
type sortKey struct {
	created time.Time
	group   string
	queued  time.Time
}

func lessKey(a, b sortKey) bool {
	if !a.created.Equal(b.created) {
		return a.created.Before(b.created)
	}
	if a.group != b.group {
		return a.group < b.group
	}
	return a.queued.Before(b.queued)
}

// Less implements fwk.QueueSortPlugin: higher priority
// first; then creation time, where a group member counts with its group's
// creation time, so the members of a group leave the queue together; then
// the group key; then the time in the queue.
func (pl *Coscheduling) Less(a, b fwk.QueuedEntityInfo) bool {
	if pa, pb := a.GetPriority(), b.GetPriority(); pa != pb {
		return pa > pb
	}
	return lessKey(pl.sortKey(a), pl.sortKey(b))
}

func (pl *Coscheduling) sortKey(e fwk.QueuedEntityInfo) sortKey {
	k := sortKey{queued: e.GetTimestamp()}
	p, ok := e.(interface{ GetPod() *corev1.Pod })
	if !ok || p.GetPod() == nil {
		// Not a pod (an upstream pod-group entity): its queue time.
		k.created = k.queued
		return k
	}
	pod := p.GetPod()
	k.created = pod.CreationTimestamp.Time
	if key, ok := podgroup.KeyOf(pod); ok {
		k.group = key
		k.created = pl.groups.Time(key, k.created)
	}
	return k
}
