package jobqueue

import corev1 "k8s.io/api/core/v1"

// fence is a node held by Fence: at capacity, until a pass that started
// after the fence (the started count was after) completes.
type fence struct {
	capacity Capacity
	after    uint64
}

// Fence returns the fence that applies to a pod of group key ("" for
// none) and priority, nil when no group waits with a reservation that
// binds the pod (Plan.Binding).
func (q *Queue) Fence(key string, priority int32) *Fence {
	p := q.plan.Load()
	if p == nil || p.Seen == nil || p.Reservation == nil || p.Reservation.Holder == key || priority > p.Reservation.Priority {
		return nil
	}
	return &Fence{q: q, seen: p.Seen, Holder: p.Reservation.Holder}
}

// Fence keeps pods off capacity that freed after the job queue's last
// pass, until the next pass has given it: a pod in no group could
// otherwise take a node freed between two passes before the waiting
// group's reservation moves there, and leave that group waiting on the
// pods of its reserved nodes.
type Fence struct {
	// Holder is the waiting group.
	Holder string
	q      *Queue
	seen   map[string]Capacity
}

// Holds reports whether pod must keep off node, which has now free: more
// than the last pass saw (capacity freed since, or a node added). The
// queue then makes a pass, and activates the pod after it. A node is held
// once for the same capacity: where the scheduler counts a node's free
// resources otherwise than the queue, a pod waits one pass at most.
func (f *Fence) Holds(pod *corev1.Pod, node string, now Capacity) bool {
	if seen, ok := f.seen[node]; ok && !now.exceeds(seen) {
		return false
	}
	q := f.q
	q.mu.Lock()
	defer q.mu.Unlock()
	switch e, ok := q.fences[node]; {
	case !ok || now.exceeds(e.capacity):
		q.fences[node] = fence{capacity: now, after: q.started}
	case q.completed > e.after:
		// A pass that started after the fence saw this capacity.
		return false
	}
	q.fenced[pod.Namespace+"/"+pod.Name] = pod
	q.Kick()
	return true
}
