package jobqueue

import (
	"context"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Where the admission loop is (Queue.state).
const (
	loopWaiting = iota
	loopPassing
	loopSpacing
)

func (q *Queue) loop(ctx context.Context) {
	// No pass, hence no status write, held-pod condition or eviction,
	// before the queue has seen the cluster. A standby replica of a
	// leader-elected scheduler starts its informers only when it leads
	// (delayCacheUntilActive, which aisched scheduler sets), so only the
	// leader's queue acts.
	if !cache.WaitForCacheSync(ctx.Done(), q.synced...) {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.kick:
		}
		q.state.Store(loopPassing)
		q.pass(ctx)
		q.state.Store(loopSpacing)
		select {
		case <-ctx.Done():
			return
		case <-q.opts.Clock.After(minInterval):
		}
		q.state.Store(loopWaiting)
	}
}

// Idle reports whether the queue has no pass to make before its clock
// moves: it is not making one, and none is asked for, or the next one
// waits for the spacing between passes. The simulator's virtual clock
// moves only when the cluster is idle.
func (q *Queue) Idle() bool {
	switch q.state.Load() {
	case loopPassing:
		return false
	case loopSpacing:
		return true
	}
	return len(q.kick) == 0
}

// pass makes one plan from the informers' state and acts on it.
func (q *Queue) pass(ctx context.Context) {
	logger := klog.FromContext(ctx)
	start := q.opts.Clock.Now()
	q.mu.Lock()
	q.started++
	fenced := q.fenced
	q.fenced = map[string]*corev1.Pod{}
	q.mu.Unlock()
	in, members, broken := q.input(start)
	plan := Compute(in)
	q.demands.sweep()
	q.plan.Store(&plan)
	q.mu.Lock()
	q.completed = q.started
	if plan.Seen == nil {
		clear(q.fences)
	}
	q.mu.Unlock()

	activate := map[string]*corev1.Pod{}
	waiting := false
	q.mu.Lock()
	for key, d := range plan.Decisions {
		switch {
		case d.Admitted && !q.admitted[key]:
			q.admitted[key] = true
			q.admittedAt[key] = start
			q.metrics.admissionWait.Observe(start.Sub(members[key].Created).Seconds())
			for _, p := range members[key].Pending {
				activate[p.Namespace+"/"+p.Name] = p
			}
		case !d.Admitted && d.Reason != ReasonWaitingForMembers:
			waiting = true
		}
	}
	// Forget groups that are gone or fully placed.
	for key := range q.admitted {
		if g, ok := members[key]; !ok || (len(g.Pending) == 0 && len(g.Bound) >= g.MinAvailable) {
			delete(q.admitted, key)
		}
	}
	for key, at := range q.admittedAt {
		switch g, ok := members[key]; {
		case !ok:
			delete(q.admittedAt, key)
		case len(g.Bound)+g.Succeeded >= g.MinAvailable:
			q.metrics.placement.Observe(start.Sub(at).Seconds())
			delete(q.admittedAt, key)
		}
	}
	for key := range q.failures {
		if g, ok := members[key]; !ok || len(g.Bound) >= g.MinAvailable {
			delete(q.failures, key)
			delete(q.backoff, key)
		}
	}
	stuck := q.stuckPartial(plan, members, start)
	q.mu.Unlock()
	q.metrics.record(plan, members)
	q.waiting.Store(waiting)
	// A cluster without gangs or team queues (CPU pods alone): 36 passes
	// over 10,000 pods and 5,000 nodes were 2% of the scheduler's CPU.
	q.counting.Store(len(in.Groups) > 0 || in.Queues != nil)
	admittedPods := len(activate)
	// The pods a fence held off try again on what this plan saw.
	maps.Copy(activate, fenced)
	if len(activate) > 0 {
		q.activate(activate)
	}
	if q.status != nil {
		q.status.publish(plan, members, q.ended.counts)
	}
	q.afterTeams(in, start)
	q.held.publish(plan, members)
	reclaiming := map[string]bool{}
	for _, p := range plan.Preemptions {
		if p.queueName == "" {
			continue
		}
		reclaiming[p.Group] = true
		if !q.reclaiming[p.Group] {
			q.metrics.reclaimNeeded.WithLabelValues(p.queueName).Add(float64(p.need) / 1000)
		}
	}
	q.reclaiming = reclaiming
	for _, p := range slices.Concat(plan.Preemptions, broken, stuck) {
		q.evict.evict(ctx, p)
	}
	took := q.opts.Clock.Since(start)
	q.metrics.passDuration.Observe(took.Seconds())
	logger.V(4).Info("Job queue pass", "groups", len(in.Groups), "admitted", admittedPods, "fenced", len(fenced), "reservation", plan.Reservation != nil, "took", took)
}

// afterTeams keeps what a pass counted of the team queues: their usage
// history, the tree for the console (Queues), their status and metrics.
func (q *Queue) afterTeams(in Input, now time.Time) {
	t := in.Queues
	if t == nil {
		q.tree.Store(nil)
		q.metrics.recordQueues(nil)
		return
	}
	q.mu.Lock()
	if !q.historyAt.IsZero() {
		t.Decay(now.Sub(q.historyAt))
	}
	q.historyAt = now
	q.history = map[string]map[string]int64{}
	for _, n := range t.Queues() {
		if n.HalfLife <= 0 {
			continue
		}
		h := map[string]int64{}
		for i, name := range t.Names() {
			h[name] = n.History()[i]
		}
		q.history[n.Name] = h
	}
	q.mu.Unlock()
	q.tree.Store(t)
	if q.queueStatus != nil {
		q.queueStatus.publish(t, in.QueueProblems, now)
	}
	q.metrics.recordQueues(t)
}
