package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ReasonClaimDeallocated is the reason of the event on a pending member
// of a partial group whose DRA claim the queue deallocated.
const ReasonClaimDeallocated = "ClaimDeallocated"

// evictAgain is how long the queue waits before it deletes a victim again
// (a deletion that failed, or one the informers have not shown yet).
const evictAgain = 30 * time.Second

// evictor deletes the pods a plan preempts, as the scheduler's own
// preemption does: it marks each with the DisruptionTarget condition
// (reason PreemptionByScheduler), records an event, and deletes it with
// its own grace period.
// It also deallocates the DRA claims a partial group's pending members
// hold (deallocate).
type evictor struct {
	client   kubernetes.Interface
	recorder events.EventRecorder
	clock    clock.PassiveClock

	mu    sync.Mutex
	asked map[types.UID]time.Time
	// evicted, if set, is told of each victim deleted.
	evicted func(Preemption, *corev1.Pod)
}

func newEvictor(client kubernetes.Interface, recorder events.EventRecorder, clk clock.PassiveClock) *evictor {
	return &evictor{client: client, recorder: recorder, clock: clk, asked: map[types.UID]time.Time{}}
}

// evict deletes the victims of p not being deleted already.
func (e *evictor) evict(ctx context.Context, p Preemption) {
	now := e.clock.Now()
	for _, v := range p.Victims {
		if v.DeletionTimestamp != nil {
			continue
		}
		if !e.ask(v.UID, now) {
			continue
		}
		if err := e.evictOne(ctx, v, p); err != nil {
			klog.FromContext(ctx).Info("Preempting a pod", "pod", klog.KObj(v), "podGroup", p.Group, "err", err)
		}
	}
	for _, h := range p.Deallocate {
		if !e.ask(h.Claim.UID, now) {
			continue
		}
		if err := e.deallocate(ctx, h, p); err != nil {
			klog.FromContext(ctx).Info("Deallocating a claim", "claim", klog.KObj(h.Claim), "pod", klog.KObj(h.Pod), "podGroup", p.Group, "err", err)
		}
	}
	e.mu.Lock()
	for uid, at := range e.asked {
		if now.Sub(at) >= 10*evictAgain {
			delete(e.asked, uid)
		}
	}
	e.mu.Unlock()
}

// ask records that the object with uid is acted on now, and reports
// whether it may be: not within evictAgain of the last time.
func (e *evictor) ask(uid types.UID, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if at, asked := e.asked[uid]; asked && now.Sub(at) < evictAgain {
		return false
	}
	e.asked[uid] = now
	return true
}

// partialMessage says why a member of a partial group is released.
func partialMessage(p Preemption) string {
	return fmt.Sprintf("released by aisched's job queue: its pod group %s held fewer than min-available members bound for longer than partialGroupSeconds, and the rest cannot be placed (%s); the group starts over whole", p.Group, p.why)
}

// deallocate clears the allocation of a claim held by a pending member of
// a partial group, as upstream's PostFilter does for an unschedulable pod,
// and says so on the pod. The update carries the claim's resourceVersion:
// a claim that changed since the pass read it is left for the next.
func (e *evictor) deallocate(ctx context.Context, h HeldClaim, p Preemption) error {
	claim := h.Claim.DeepCopy()
	claim.Status.ReservedFor = nil
	claim.Status.Allocation = nil
	claim.Status.Devices = nil
	if _, err := e.client.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if e.recorder != nil {
		e.recorder.Eventf(h.Pod, claim, corev1.EventTypeNormal, ReasonClaimDeallocated, "Deallocating",
			"%s; its claim %s was deallocated", partialMessage(p), claim.Name)
	}
	return nil
}

func (e *evictor) evictOne(ctx context.Context, v *corev1.Pod, p Preemption) error {
	msg := fmt.Sprintf("preempted by aisched's job queue for pod group %s of priority %d", p.Group, p.Priority)
	switch {
	case p.brokenGroup:
		msg = fmt.Sprintf("preempted by aisched's job queue: a member of its pod group %s was preempted, and a group is preempted whole", p.Group)
	case p.Queue != "":
		msg = fmt.Sprintf(takenBackFormat, p.Queue, p.Group, p.Priority, strings.Join(p.From, ", "))
	case p.partial:
		msg = partialMessage(p)
	}
	cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler,
		Message: msg, LastTransitionTime: metav1.NewTime(e.clock.Now())}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{cond}}})
	if err != nil {
		return err
	}
	if _, err := e.client.CoreV1().Pods(v.Namespace).Patch(ctx, v.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if e.recorder != nil {
		reason := "Preempted"
		if p.Queue != "" {
			reason = "Reclaimed"
		}
		e.recorder.Eventf(v, nil, corev1.EventTypeNormal, reason, "Preempting", "%s", msg)
	}
	err = e.client.CoreV1().Pods(v.Namespace).Delete(ctx, v.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &v.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil && e.evicted != nil {
		e.evicted(p, v)
	}
	return err
}
