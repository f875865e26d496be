// Package jobqueue is aisched's job queue (seed 002, with its four flaws
// fixed): pod groups are admitted whole, by priority then age, when the
// whole group fits its namespace's ResourceQuota and min-available of its
// members can be placed on the nodes' free resources. The first group that
// fits the cluster but not its free resources holds a reservation, so
// nothing starves; smaller groups backfill around it. Admission runs on
// events (pods, nodes, quotas, PodGroups), many groups per pass. The
// scheduler holds back the members of groups not admitted (PreEnqueue), so
// a job created by any tool goes through the queue.
package jobqueue

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/aisched/aisched/pkg/gpuledger"
	"github.com/aisched/aisched/pkg/podgroup"
)

// Options configure a Queue.
type Options struct {
	// Backoff is the first wait after a failed attempt; it doubles with
	// each failure in a row up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// Backfill: see Input.Backfill.
	Backfill bool
	// PartialGroup is how long a group may hold some but fewer than
	// min-available members bound while it is not admitted, before its
	// bound members are deleted so that it starts over whole; 0: never.
	PartialGroup time.Duration
	// Clock times backoffs and passes; nil is the real clock.
	Clock clock.WithDelayedExecution
}

// minInterval spaces passes, so that a burst of events makes one pass.
const minInterval = 10 * time.Millisecond

// refreshDelay is how soon a pass follows events that change no admission,
// only what the status shows (members bound or running) or the exact
// accounting of free resources (a pod in no group bound).
const refreshDelay = time.Second

// Queue admits pod groups. One Queue serves every profile of a scheduler;
// it covers the pods of the profiles that call Gate.
type Queue struct {
	groups   *podgroup.Groups
	gpus     *gpuledger.State
	opts     Options
	activate func(map[string]*corev1.Pod)

	pods   cache.Indexer
	nodes  corelisters.NodeLister
	quotas corelisters.ResourceQuotaLister
	status *statusWriter
	held   *podWriter
	evict  *evictor
	// synced report whether the queue's handlers have seen what the
	// informers first listed.
	synced []cache.InformerSynced

	kick chan struct{}
	// refreshing is true while a delayed pass is pending.
	refreshing atomic.Bool
	plan       atomic.Pointer[Plan]
	// waiting is true when the last plan left groups queued: then any
	// freed or added capacity is worth a pass.
	waiting atomic.Bool
	// state is where the loop is: loopWaiting for a kick, loopPassing or
	// loopSpacing passes (waiting on the clock).
	state atomic.Int32

	metrics *queueMetrics

	mu       sync.Mutex
	profiles map[string]bool
	admitted map[string]bool
	// admittedAt is when each admitted group was admitted, until
	// min-available of its members are bound.
	admittedAt map[string]time.Time
	failures   map[string]int
	backoff    map[string]time.Time
	// ended counts the members that succeeded or failed, by group.
	ended *endedPods
	// preempted are the groups a member of which a scheduler preempted
	// since the last pass.
	preempted map[string]bool
	// partialSince is when each group that holds some but fewer than
	// min-available members bound, and is not admitted, was first seen so.
	partialSince map[string]time.Time
	// started and completed count the passes.
	started, completed uint64
	// fences are the nodes Fence holds, with the capacity each was fenced
	// for; fenced are the pods it held off since the last pass, which the
	// next pass activates.
	fences map[string]fence
	fenced map[string]*corev1.Pod
}

// fence is a node held by Fence: at capacity, until a pass that started
// after the fence (the started count was after) completes.
type fence struct {
	capacity Capacity
	after    uint64
}

type terminalCounts struct{ succeeded, failed int32 }

// New returns a queue that is not started; it places groups on the cards
// of the GPU ledger gpus.
func New(groups *podgroup.Groups, gpus *gpuledger.State, opts Options) *Queue {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Queue{
		groups:   groups,
		gpus:     gpus,
		opts:     opts,
		kick:     make(chan struct{}, 1),
		profiles: map[string]bool{},
		metrics:  newQueueMetrics(),
		admitted: map[string]bool{},
		failures: map[string]int{},
		backoff:  map[string]time.Time{},

		preempted:    map[string]bool{},
		admittedAt:   map[string]time.Time{},
		fences:       map[string]fence{},
		partialSince: map[string]time.Time{},
		fenced:       map[string]*corev1.Pod{},
	}
}

// Start follows pods, nodes, ResourceQuotas and PodGroups through the
// scheduler's informers and runs the admission loop until ctx ends.
// activate moves pods of newly admitted groups to the active queue; client
// and recorder tell the pods held back why they wait. It is called once,
// by the scheduler's services.
func (q *Queue) Start(ctx context.Context, factory informers.SharedInformerFactory, client kubernetes.Interface, recorder events.EventRecorder, activate func(map[string]*corev1.Pod)) error {
	q.activate = activate
	podInformer := factory.Core().V1().Pods().Informer()
	q.pods = podInformer.GetIndexer()
	q.held = newPodWriter(client, recorder, q.pods, q.opts.Clock)
	q.evict = newEvictor(client, recorder, q.opts.Clock)
	go q.held.run(ctx)
	ended, err := startEndedPods(ctx, client, q.refresh)
	if err != nil {
		return err
	}
	q.ended = ended
	q.nodes = factory.Core().V1().Nodes().Lister()
	quotaInformer := factory.Core().V1().ResourceQuotas().Informer()
	q.quotas = factory.Core().V1().ResourceQuotas().Lister()
	podsReg, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    q.podAdded,
		UpdateFunc: q.podUpdate,
		DeleteFunc: q.podDeleted,
	})
	if err != nil {
		return err
	}
	onWaiting := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { q.kickIfWaiting() },
		UpdateFunc: func(interface{}, interface{}) { q.kickIfWaiting() },
		DeleteFunc: func(interface{}) { q.kickIfWaiting() },
	}
	nodesReg, err := factory.Core().V1().Nodes().Informer().AddEventHandler(onWaiting)
	if err != nil {
		return err
	}
	quotasReg, err := quotaInformer.AddEventHandler(onWaiting)
	if err != nil {
		return err
	}
	q.synced = []cache.InformerSynced{podsReg.HasSynced, nodesReg.HasSynced, quotasReg.HasSynced}
	if err := q.groups.OnPodGroup(func(string) { q.Kick() }); err != nil {
		return err
	}
	if lister, client, ok := q.groups.API(); ok {
		q.status = newStatusWriter(lister, client)
		go q.status.run(ctx)
	}
	go q.loop(ctx)
	return nil
}

// Kick asks for a pass.
func (q *Queue) Kick() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// refresh asks for a pass within refreshDelay.
func (q *Queue) refresh() {
	if q.refreshing.CompareAndSwap(false, true) {
		q.opts.Clock.AfterFunc(refreshDelay, func() {
			q.refreshing.Store(false)
			q.Kick()
		})
	}
}

func (q *Queue) kickIfWaiting() {
	if q.waiting.Load() {
		q.Kick()
	}
}

// podAdded: a new unbound member may complete its group: a pass now.
// A pod created bound takes capacity: a pass soon.
func (q *Queue) podAdded(obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	_, inGroup := podgroup.KeyOf(pod)
	switch {
	case inGroup && pod.Spec.NodeName == "":
		q.Kick()
	case inGroup || pod.Spec.NodeName != "":
		q.refresh()
	}
}

// podUpdate: a pod bound, running or ending. Binding changes no
// admission (admitted members were placed on paper already): a pass soon,
// for the status. A bound pod being deleted frees capacity: a pass now if
// a group waits.
func (q *Queue) podUpdate(old, obj interface{}) {
	o, ok1 := old.(*corev1.Pod)
	n, ok2 := obj.(*corev1.Pod)
	if !ok1 || !ok2 || (o.Spec.NodeName == n.Spec.NodeName && o.Status.Phase == n.Status.Phase && o.DeletionTimestamp.Equal(n.DeletionTimestamp)) {
		return
	}
	if n.DeletionTimestamp != nil && n.Spec.NodeName != "" {
		q.kickIfWaiting()
	}
	q.notePreempted(n)
	if _, inGroup := podgroup.KeyOf(n); inGroup || n.Spec.NodeName != "" {
		q.refresh()
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
	admittedPods := len(activate)
	// The pods a fence held off try again on what this plan saw.
	maps.Copy(activate, fenced)
	if len(activate) > 0 {
		q.activate(activate)
	}
	if q.status != nil {
		q.status.publish(plan, members, q.ended.counts)
	}
	q.held.publish(plan, members)
	for _, p := range slices.Concat(plan.Preemptions, broken, stuck) {
		q.evict.evict(ctx, p)
	}
	logger.V(4).Info("Job queue pass", "groups", len(in.Groups), "admitted", admittedPods, "fenced", len(fenced), "reservation", plan.Reservation != nil, "took", q.opts.Clock.Since(start))
}

// stuckPartial returns the groups that have held some but fewer than
// min-available members bound, with others pending and without admission,
// for longer than Options.PartialGroup: their bound members are deleted, so that no card
// stays held by a group that cannot run, and the group starts over whole.
// A group is partial so only when its placement was cut short (a
// scheduler restart between its bindings) and the queue cannot admit the
// rest; it completes as soon as the queue can. q.mu is held.
func (q *Queue) stuckPartial(plan Plan, groups map[string]*Group, now time.Time) []Preemption {
	var stuck []Preemption
	for key, g := range groups {
		d := plan.Decisions[key]
		// Members pending too: the group tries to complete. One that lost
		// a member and waits for its controller to make another is left
		// to that controller.
		partial := len(g.Bound) > 0 && len(g.Pending) > 0 && len(g.Bound)+g.Succeeded < g.MinAvailable && !d.Admitted
		if !partial || q.opts.PartialGroup <= 0 {
			delete(q.partialSince, key)
			continue
		}
		since, ok := q.partialSince[key]
		if !ok {
			q.partialSince[key] = now
			q.opts.Clock.AfterFunc(q.opts.PartialGroup, q.Kick)
			continue
		}
		if now.Sub(since) >= q.opts.PartialGroup {
			stuck = append(stuck, Preemption{Group: key, Priority: g.Priority, Victims: g.Bound, partial: true,
				why: fmt.Sprintf("%s %s", d.Reason, d.Message)})
			delete(q.partialSince, key)
		}
	}
	for key := range q.partialSince {
		if groups[key] == nil {
			delete(q.partialSince, key)
		}
	}
	return stuck
}

// input gathers the state a plan depends on from the informers.
// Its third result preempts the rest of each group that lost a member to a
// scheduler's preemption and can no longer run as a group.
func (q *Queue) input(now time.Time) (Input, map[string]*Group, []Preemption) {
	q.mu.Lock()
	profiles := make(map[string]bool, len(q.profiles))
	for p := range q.profiles {
		profiles[p] = true
	}
	q.mu.Unlock()

	used := map[string]Resources{}
	bound := map[string][]*corev1.Pod{}
	groups := map[string]*Group{}
	q.mu.Lock()
	preempted := q.preempted
	q.preempted = map[string]bool{}
	q.mu.Unlock()
	for _, obj := range q.pods.List() {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			continue
		}
		if pod.Spec.NodeName != "" {
			used[pod.Spec.NodeName] = used[pod.Spec.NodeName].Add(RequestOf(pod))
			bound[pod.Spec.NodeName] = append(bound[pod.Spec.NodeName], pod)
		}
		if pod.DeletionTimestamp != nil || !profiles[pod.Spec.SchedulerName] {
			continue
		}
		key, ok := podgroup.KeyOf(pod)
		if !ok {
			continue
		}
		g := groups[key]
		if g == nil {
			ref, ok, err := q.groups.Of(pod)
			if !ok || err != nil || ref.MinAvailable < 2 {
				continue
			}
			g = &Group{Key: key, Namespace: pod.Namespace, MinAvailable: ref.MinAvailable, MinResources: ref.MinResources,
				Created: ref.Created, Priority: PriorityOf(pod)}
			groups[key] = g
		}
		g.Priority = max(g.Priority, PriorityOf(pod))
		if ref := pod.CreationTimestamp.Time; g.Created.IsZero() || ref.Before(g.Created) {
			g.Created = ref
		}
		if pod.Spec.NodeName != "" {
			g.Bound = append(g.Bound, pod)
		} else {
			g.Pending = append(g.Pending, pod)
		}
	}

	in := Input{Now: now, Backfill: q.opts.Backfill, Quotas: map[string][]Quota{}}
	nodes, _ := q.nodes.List(labels.Everything())
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range nodes {
		alloc := allocatable(n)
		in.Rooms = append(in.Rooms, Room{Node: n, Allocatable: alloc, Free: alloc.Sub(used[n.Name]), GPUs: q.gpus.NodeGPUs(n, bound[n.Name]), Pods: bound[n.Name]})
	}
	q.mu.Lock()
	for key, g := range groups {
		g.Succeeded = int(q.ended.counts(key).succeeded)
		g.Admitted = q.admitted[key]
		g.BackoffUntil = q.backoff[key]
		in.Groups = append(in.Groups, *g)
		if _, ok := in.Quotas[g.Namespace]; !ok {
			in.Quotas[g.Namespace] = q.quotasIn(g.Namespace)
		}
	}
	q.mu.Unlock()
	var broken []Preemption
	for key := range preempted {
		// The rest of a group that can no longer run as one goes too: a
		// gang is preempted whole (upstream's preemption takes pods one
		// by one).
		if g := groups[key]; g != nil && len(g.Bound) > 0 && len(g.Bound)+g.Succeeded < g.MinAvailable {
			broken = append(broken, Preemption{Group: key, Priority: g.Priority, Victims: g.Bound, brokenGroup: true})
		}
	}
	return in, groups, broken
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

func (q *Queue) quotasIn(namespace string) []Quota {
	list, _ := q.quotas.ResourceQuotas(namespace).List(labels.Everything())
	out := make([]Quota, 0, len(list))
	for _, rq := range list {
		out = append(out, Quota{Name: rq.Name, Hard: rq.Spec.Hard, Used: rq.Status.Used})
	}
	return out
}

func allocatable(n *corev1.Node) Resources {
	a := n.Status.Allocatable
	return Resources{MilliCPU: a.Cpu().MilliValue(), Memory: a.Memory().Value(), Pods: a.Pods().Value()}
}

// PriorityOf is the pod's priority, 0 when it has none.
func PriorityOf(pod *corev1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}
