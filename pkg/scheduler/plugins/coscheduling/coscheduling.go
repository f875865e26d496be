// Package coscheduling is the Coscheduling plugin: gang
// scheduling of pod groups named by the pod-group labels or by a scheduler-plugins
// PodGroup (scheduling.x-k8s.io/v1alpha1). Members of a group leave
// the queue together (QueueSort), a group that cannot be placed as a whole
// is rejected before any member reserves anything (PreFilter), and assumed
// members wait in Permit until min-available of them are placed; if that
// fails, every waiting member is rejected and its reservations released.
// The plugin is also the scheduler's side of the job queue (package
// jobqueue): PreEnqueue holds back the members of groups not admitted,
// and Filter keeps other pods off what the queue reserved for the group
// that waits longest and for the admitted group being placed.
package coscheduling

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
	"github.com/aisched/aisched/pkg/jobqueue"
	"github.com/aisched/aisched/pkg/podgroup"
)

// Name is the plugin name in KubeSchedulerConfiguration.
const Name = "Coscheduling"

// Coscheduling implements gang scheduling.
type Coscheduling struct {
	handle fwk.Handle
	groups *podgroup.Groups
	queue  *jobqueue.Queue
	gpus   *gpuledger.State
	// nodeGPUs remembers each snapshot node's cards for PreFilter's
	// whole-group check.
	nodeGPUs *gpuledger.NodeMemo[struct{}, gpuledger.NodeGPUs]
	clock    clock.WithDelayedExecution
	timeout  time.Duration
	// waits numbers each Permit wait by pod UID, so that the timer of an
	// earlier wait never ends a later one.
	waits sync.Map // types.UID -> uint64
	wait  atomic.Uint64
}

var (
	_ fwk.QueueSortPlugin   = &Coscheduling{}
	_ fwk.PreEnqueuePlugin  = &Coscheduling{}
	_ fwk.PreFilterPlugin   = &Coscheduling{}
	_ fwk.FilterPlugin      = &Coscheduling{}
	_ fwk.PostFilterPlugin  = &Coscheduling{}
	_ fwk.PermitPlugin      = &Coscheduling{}
	_ fwk.ReservePlugin     = &Coscheduling{}
	_ fwk.EnqueueExtensions = &Coscheduling{}
	_ fwk.SignPlugin        = &Coscheduling{}
)

// New builds the plugin from its pluginConfig arguments; groups, queue,
// gpus and clk are the scheduler's pod groups, job queue, GPU ledger and
// clock, started.
func New(_ context.Context, obj runtime.Object, h fwk.Handle, groups *podgroup.Groups, queue *jobqueue.Queue, gpus *gpuledger.State, clk clock.WithDelayedExecution) (fwk.Plugin, error) {
	args := &config.CoschedulingArgs{}
	if err := config.Decode(Name, obj, args); err != nil {
		return nil, err
	}
	return &Coscheduling{
		handle:   h,
		groups:   groups,
		queue:    queue,
		gpus:     gpus,
		nodeGPUs: gpuledger.NewNodeMemo[struct{}, gpuledger.NodeGPUs](gpus),
		clock:    clk,
		timeout:  time.Duration(*args.PermitWaitingTimeSeconds) * time.Second,
	}, nil
}

// Name implements fwk.Plugin.
func (pl *Coscheduling) Name() string { return Name }

// sameGroup reports whether pod is a member of the group with key (pods
// with invalid group labels never get past PreFilter, so they never wait).
func sameGroup(pod *corev1.Pod, key string) bool {
	k, ok := podgroup.KeyOf(pod)
	return ok && k == key
}

// waiting returns the UIDs of the group's members waiting in Permit.
func (pl *Coscheduling) waiting(key string) map[string]bool {
	out := map[string]bool{}
	pl.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if p := wp.GetPod(); sameGroup(p, key) {
			out[string(p.UID)] = true
		}
	})
	return out
}

// PreEnqueue holds back the members of a group the job queue has not
// admitted; the queue activates them when it does. A pod in no group is
// held back the same way while a team queue accounts it (it is a group
// of one, jobqueue.Queue.Single); other pods in no group, and members of
// groups with invalid labels (PreFilter names the error), go on.
func (pl *Coscheduling) PreEnqueue(_ context.Context, pod *corev1.Pod) *fwk.Status {
	key, ok := pl.queueKey(pod)
	if !ok {
		return nil
	}
	if admitted, why := pl.queue.Gate(pod, key); !admitted {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
	}
	return nil
}

// queueKey is the key under which the job queue admits the pod: its
// gang's, or its own while a team queue accounts it; ok is false for a pod
// the queue does not hold back.
func (pl *Coscheduling) queueKey(pod *corev1.Pod) (string, bool) {
	ref, inGroup, err := pl.groups.Of(pod)
	switch {
	case inGroup && err != nil:
		return "", false
	case inGroup && ref.MinAvailable >= 2:
		return ref.Key(), true
	}
	return pl.queue.Single(pod)
}

// reservationKey is the CycleState key of the reservation Filter checks.
const reservationKey fwk.StateKey = Name + "/reservation"

// reservationState is the reservation that applies to the pod being
// scheduled, the fence of capacity freed since the queue's last pass (nil
// when no waiting group's reservation binds the pod), and the pod's
// demand.
type reservationState struct {
	reservation *jobqueue.Reservation
	fence       *jobqueue.Fence
	demand      jobqueue.Demand
}

// Clone implements fwk.StateData; the state is read-only.
func (s *reservationState) Clone() fwk.StateData { return s }

// PreFilter rejects a member of a group that cannot be placed as a whole:
// too few members exist, or the members still to place do not fit on the
// nodes' free resources. Nothing is reserved for such a group. For every
// pod it notes the job queue's reservation, if one applies, for Filter.
func (pl *Coscheduling) PreFilter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	ref, ok, err := pl.groups.Of(pod)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	reserved := false
	priority := corev1helpers.PodPriority(pod)
	// The queue's key of the pod: its gang's, or its own when a team
	// queue admits it alone; a holder's own pods are not held back.
	key := ref.Key()
	if single, queued := pl.queue.Single(pod); queued && (!ok || ref.MinAvailable < 2) {
		key = single
	}
	if r := pl.queue.Binding(key, priority); r != nil {
		state.Write(reservationKey, &reservationState{reservation: r, fence: pl.queue.Fence(key, priority), demand: jobqueue.DemandOf(pod)})
		reserved = true
	}
	if !ok {
		if s := refuseLoneTopology(pod); s != nil {
			return nil, s
		}
	}
	if !ok || ref.MinAvailable < 2 {
		if reserved {
			return nil, nil
		}
		return nil, fwk.NewStatus(fwk.Skip)
	}
	members := pl.groups.Members(ref.Key())
	if len(members) < ref.MinAvailable {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("pod group %s has %d of its %d pods (min-available)", ref.Key(), len(members), ref.MinAvailable))
	}
	waiting := pl.waiting(ref.Key())
	placed := len(waiting)
	var pending []*corev1.Pod
	for _, m := range members {
		switch {
		case m.Spec.NodeName != "":
			placed++
		case !waiting[string(m.UID)] && m.UID != pod.UID:
			pending = append(pending, m)
		}
	}
	result, status := pl.preFilterDomain(state, pod, ref)
	need := ref.MinAvailable - placed
	if status != nil || need <= 0 || placed > 0 {
		// Refused, complete, or being placed: the check passed for the
		// first member of this attempt, and a member that finds no node
		// now releases the others (PostFilter). Checking once per attempt
		// keeps the cost per group, not per member.
		return result, status
	}
	// This pod first: it is the one about to be placed.
	pending = append([]*corev1.Pod{pod}, pending...)
	nodes, where := withinDomain(state, nodes)
	if fit := pl.placeable(pending, nodes, need); fit < need {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("pod group %s needs %d more pods placed at once, the free resources of %s hold %d of them", ref.Key(), need, where, fit))
	}
	return result, nil
}

// batchSign is what Coscheduling's Filter reads of a pod that is not a
// gang member: its group (a group of min-available 1 may hold the
// reservation), priority and request, cards included.
type batchSign struct {
	Group    string
	Priority int32
	Request  jobqueue.Resources
	GPU      gpu.Request
}

// SignPod implements fwk.SignPlugin. A gang member is not batched: whether
// it may be placed depends on the other members. For other pods the
// Filter depends on the pod's group, priority and request, and on the job
// queue's reservation, which the scheduler checks again on the node a
// batch hints before it uses the hint.
func (pl *Coscheduling) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	ref, ok, err := pl.groups.Of(pod)
	if err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	if ok && ref.MinAvailable >= 2 {
		return nil, fwk.NewStatus(fwk.Unschedulable, "gang members are not batched")
	}
	d := jobqueue.DemandOf(pod)
	sign := batchSign{Priority: corev1helpers.PodPriority(pod), Request: d.Request, GPU: d.GPU}
	if ok {
		sign.Group = ref.Key()
	}
	return []fwk.SignFragment{{Key: "aisched.io/" + Name, Value: sign}}, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin.
func (pl *Coscheduling) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter keeps a pod off what the job queue reserved on a node for the
// group that waits longest and for the admitted group being placed
// (jobqueue.Plan.Binding): the pod may use of each resource only what
// exceeds both. A holder's own members and pods of higher priority are not
// held back by its reservation. While a group waits, it also keeps such a
// pod off capacity freed on a node since the queue's last pass, until the
// next pass has decided whether the waiting group needs it
// (jobqueue.Fence).
func (pl *Coscheduling) Filter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	if s := filterDomain(state, ni.Node().Name); s != nil {
		return s
	}
	data, err := state.Read(reservationKey)
	if err != nil {
		return nil
	}
	s := data.(*reservationState)
	free, gpus := freeOf(ni), pl.gpus.NodeGPUsOf(ni)
	node := ni.Node().Name
	if s.fence != nil && s.fence.Holds(pod, node, jobqueue.Capacity{Free: free, GPUMilli: gpus.FreeMilli()}) {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node freed capacity since the job queue's last pass; the queue first decides whether pod group %s needs it", s.fence.Holder))
	}
	if !s.reservation.Allows(node, free, gpus, s.demand.Request, s.demand.GPU) {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node reserved by the job queue for pod group %s", s.reservation.Holder))
	}
	return nil
}

// PostFilter runs when a member found no node: the group cannot gather now,
// so the members waiting in Permit are rejected and release what they hold.
func (pl *Coscheduling) PostFilter(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	ref, ok := pl.groups.Gang(pod)
	if !ok {
		// A pod a team queue admitted alone found no node: its admission
		// goes back to the queue, which tries again after a backoff.
		if key, queued := pl.queue.Single(pod); queued {
			pl.queue.Failed(key)
		}
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	pl.rejectWaiting(ref.Key(), pod, fmt.Sprintf("member %s of pod group %s found no node", pod.Name, ref.Key()))
	pl.queue.Failed(ref.Key())
	return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("pod group %s: a member found no node; waiting members released", ref.Key()))
}

// Permit lets a member through when min-available members of its group
// are bound or assumed, and lets the waiting ones through with it;
// otherwise the member waits, at most the configured time.
func (pl *Coscheduling) Permit(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) (*fwk.Status, time.Duration) {
	ref, ok := pl.groups.Gang(pod)
	if !ok {
		return nil, 0
	}
	key := ref.Key()
	placed := 1 + len(pl.waiting(key))
	for _, m := range pl.groups.Members(key) {
		if m.Spec.NodeName != "" && m.UID != pod.UID {
			placed++
		}
	}
	if placed < ref.MinAvailable {
		timeout := pl.timeout
		if ref.Timeout > 0 {
			timeout = ref.Timeout
		}
		pl.expire(pod, key, ref.MinAvailable, timeout)
		return fwk.NewStatus(fwk.Wait, fmt.Sprintf("pod group %s: %d of %d members placed", key, placed, ref.MinAvailable)), timeout + permitBackstop
	}
	pl.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if sameGroup(wp.GetPod(), key) {
			wp.Allow(Name)
		}
	})
	return nil, 0
}

// permitBackstop is how much longer than the plugin's own timer the
// scheduler's Permit wait lasts: the plugin ends waits on the scheduler's
// clock (which the simulator makes virtual); the scheduler's own timer,
// on the real clock, only backs it up.
const permitBackstop = time.Minute

// expire rejects the pod's wait in Permit after timeout on the plugin's
// clock, unless the wait ended before.
func (pl *Coscheduling) expire(pod *corev1.Pod, key string, minAvailable int, timeout time.Duration) {
	n := pl.wait.Add(1)
	pl.waits.Store(pod.UID, n)
	pl.clock.AfterFunc(timeout, func() {
		if cur, ok := pl.waits.Load(pod.UID); !ok || cur.(uint64) != n {
			return
		}
		pl.waits.Delete(pod.UID)
		if wp := pl.handle.GetWaitingPod(pod.UID); wp != nil {
			wp.Reject(Name, fmt.Sprintf("pod group %s: fewer than %d members placed within %s", key, minAvailable, timeout))
		}
	})
}

// Reserve implements fwk.ReservePlugin; the group needs nothing reserved.
func (pl *Coscheduling) Reserve(context.Context, fwk.CycleState, *corev1.Pod, string) *fwk.Status {
	return nil
}

// Unreserve runs when a member's reservation is undone (Permit timed out or
// was rejected, binding failed): every other waiting member is rejected, so
// that no part of the group holds resources alone.
func (pl *Coscheduling) Unreserve(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) {
	ref, ok := pl.groups.Gang(pod)
	if !ok {
		return
	}
	pl.rejectWaiting(ref.Key(), pod, fmt.Sprintf("member %s of pod group %s was not placed", pod.Name, ref.Key()))
	pl.queue.Failed(ref.Key())
}

func (pl *Coscheduling) rejectWaiting(key string, cause *corev1.Pod, msg string) {
	var rejected []*corev1.Pod
	pl.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if p := wp.GetPod(); p.UID != cause.UID && sameGroup(p, key) {
			rejected = append(rejected, p)
			wp.Reject(Name, msg)
		}
	})
	if len(rejected) > 0 {
		klog.V(3).InfoS("Rejected waiting members of a pod group", "group", key, "members", len(rejected), "cause", klog.KObj(cause))
	}
}

// EventsToRegister implements fwk.EnqueueExtensions: a group may become
// placeable when a bound pod goes away, or a node comes, grows, loses a
// taint, gains a label or is uncordoned (a taint update). A group that was
// missing members is activated by activateGroup instead: the scheduler
// reports unscheduled pod additions only with the GenericWorkload gate on.
func (pl *Coscheduling) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeTaint | fwk.UpdateNodeLabel}},
	}, nil
}
