package nodesim

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/agent/deliver"
	"github.com/aisched/aisched/pkg/gpu"
)

// syncPod moves one pod bound to a simulated node along its life: admit and
// start it, end it after its run duration, finish its deletion. A positive
// duration asks to be called again after it.
func (s *Simulator) syncPod(ctx context.Context, key string) (time.Duration, error) {
	obj, exists, err := s.pods.GetIndexer().GetByKey(key)
	if err != nil {
		return 0, err
	}
	if !exists {
		s.release(key)
		return 0, nil
	}
	pod := obj.(*corev1.Pod)
	if !s.simulates(pod.Spec.NodeName) {
		return 0, nil
	}
	switch {
	case pod.DeletionTimestamp != nil:
		return 0, s.deletePod(ctx, key, pod)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		s.release(key)
		return 0, nil
	case pod.Status.Phase == corev1.PodRunning:
		if _, ok := s.alloc.holds(key, pod.UID); !ok {
			// Running before a restart but not restored: account for it.
			s.alloc.admit(key, claimOf(pod), true)
		}
		return s.runPod(ctx, key, pod)
	default:
		return s.startPod(ctx, key, pod)
	}
}

// restorePods accounts for the pods that already run on the simulated
// nodes, keeping their IPs, before any new pod is admitted.
func (s *Simulator) restorePods(ctx context.Context) {
	for _, obj := range s.pods.GetIndexer().List() {
		pod := obj.(*corev1.Pod)
		if !s.simulates(pod.Spec.NodeName) || pod.Status.Phase != corev1.PodRunning {
			continue
		}
		key, _ := cache.MetaNamespaceKeyFunc(pod)
		if _, rej := s.alloc.admit(key, claimOf(pod), true); rej != nil {
			klog.FromContext(ctx).Info("Could not restore pod", "pod", key, "reason", rej.Reason, "message", rej.Message)
		}
		if n, ok := s.node(pod.Spec.NodeName); ok && n.Inventory != nil {
			s.devices.restore(n, key, pod)
		}
		if err := s.prepareClaims(ctx, key, pod, true); err != nil {
			klog.FromContext(ctx).Info("Could not restore the pod's claims", "pod", key, "err", err)
		}
	}
}

// startPod admits a pod like the kubelet and reports it Running, or Failed
// with the kubelet's reason when it does not fit.
func (s *Simulator) startPod(ctx context.Context, key string, pod *corev1.Pod) (time.Duration, error) {
	c := claimOf(pod)
	c.ip = ""
	ip, rej := s.alloc.admit(key, c, false)
	if rej != nil {
		return 0, s.failPod(ctx, pod, rej.Reason, rej.Reason, "Pod was rejected: "+rej.Message)
	}
	if err := s.prepareClaims(ctx, key, pod, false); err != nil {
		s.release(key)
		return 0, s.failPod(ctx, pod, "FailedPrepareDynamicResources", "UnexpectedAdmissionError", "Pod was rejected: "+err.Error())
	}
	for _, start := range []struct {
		reason string
		do     func() error
	}{
		{"CreateContainerError", func() error { return s.createContainers(ctx, key, pod) }},
		{"RunContainerError", func() error { return s.run(ctx, pod, ip) }},
	} {
		if err := start.do(); err != nil {
			s.release(key)
			return 0, s.failPod(ctx, pod, "Failed", start.reason, err.Error())
		}
	}
	now := metav1.NewTime(s.clock.Now())
	status := pod.Status.DeepCopy()
	status.Phase = corev1.PodRunning
	status.HostIP = s.alloc.hostIP(pod.Spec.NodeName)
	status.HostIPs = []corev1.HostIP{{IP: status.HostIP}}
	status.PodIP = ip
	status.PodIPs = []corev1.PodIP{{IP: ip}}
	if status.StartTime == nil {
		status.StartTime = &now
	}
	status.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		status.InitContainerStatuses = append(status.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), ContainerID: containerID(pod, c.Name),
			Ready: true,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: now}},
		})
	}
	status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		status.ContainerStatuses = append(status.ContainerStatuses, runningStatus(pod, c, now, 0, nil))
	}
	setReadyConditions(pod, status, now, true, "")
	if err := s.updateStatus(ctx, pod, status); err != nil {
		return 0, err
	}
	s.recorder.Event(pod, corev1.EventTypeNormal, "Started", "Started simulated containers")
	return s.remaining(pod, status.StartTime.Time), nil
}

// failPod reports that the pod could not start: an event of eventReason,
// and the pod Failed with reason and message.
func (s *Simulator) failPod(ctx context.Context, pod *corev1.Pod, eventReason, reason, message string) error {
	s.recorder.Event(pod, corev1.EventTypeWarning, eventReason, message)
	status := pod.Status.DeepCopy()
	status.Phase = corev1.PodFailed
	status.Reason = reason
	status.Message = message
	return s.updateStatus(ctx, pod, status)
}

// runPod ends a running pod once its run duration has passed: the
// containers exit with the pod's exit code, and the pod either restarts
// them (restartPolicy Always, or OnFailure with a non-zero code) or ends
// Succeeded or Failed.
func (s *Simulator) runPod(ctx context.Context, key string, pod *corev1.Pod) (time.Duration, error) {
	started := podStart(pod)
	left := s.remaining(pod, started)
	if left != 0 {
		// Still running: the runtime reads the annotations again (or
		// starts the containers again after a restart of aisched up), and
		// readiness may have changed (a readiness gate).
		if err := s.run(ctx, pod, pod.Status.PodIP); err != nil {
			return 0, err
		}
		status := pod.Status.DeepCopy()
		setReadyConditions(pod, status, metav1.NewTime(s.clock.Now()), true, "")
		if conditionTrue(status.Conditions, corev1.PodReady) != conditionTrue(pod.Status.Conditions, corev1.PodReady) {
			return 0, s.updateStatus(ctx, pod, status)
		}
		return max(left, 0), nil
	}
	d := s.runDuration(pod)
	code := s.exitCode(pod)
	now := metav1.NewTime(s.clock.Now())
	status := pod.Status.DeepCopy()
	restart := pod.Spec.RestartPolicy == corev1.RestartPolicyAlways ||
		(pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && code != 0)
	status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		prev := containerStatus(pod, c.Name)
		terminated := &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: exitReason(code), StartedAt: containerStart(prev, started), FinishedAt: now,
			ContainerID: containerID(pod, c.Name),
		}
		if restart {
			restarts := int32(0)
			if prev != nil {
				restarts = prev.RestartCount + 1
			}
			status.ContainerStatuses = append(status.ContainerStatuses, runningStatus(pod, c, now, restarts, terminated))
			continue
		}
		status.ContainerStatuses = append(status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), ContainerID: containerID(pod, c.Name),
			Started: ptr.To(false),
			State:   corev1.ContainerState{Terminated: terminated},
		})
	}
	if restart {
		setReadyConditions(pod, status, now, true, "")
		if err := s.updateStatus(ctx, pod, status); err != nil {
			return 0, err
		}
		return d, nil
	}
	status.Phase = corev1.PodSucceeded
	if code != 0 {
		status.Phase = corev1.PodFailed
	}
	setReadyConditions(pod, status, now, false, "PodCompleted")
	if err := s.updateStatus(ctx, pod, status); err != nil {
		return 0, err
	}
	s.release(key)
	return 0, nil
}

// run hands the pod to the Runtime, if any.
func (s *Simulator) run(ctx context.Context, pod *corev1.Pod, ip string) error {
	if s.opts.Runtime == nil {
		return nil
	}
	return s.opts.Runtime.Run(ctx, pod, ip)
}

// createContainers creates a GPU pod's containers through the node's
// delivery hook (devices) and checks that the hook gave an aisched-placed
// pod the cards the simulated device layer holds for it. Pods without
// GPUs, and nodes without cards, need no container runtime.
func (s *Simulator) createContainers(ctx context.Context, key string, pod *corev1.Pod) error {
	n, ok := s.node(pod.Spec.NodeName)
	_, assigned := pod.Annotations[gpu.AssignedAnnotation]
	if !ok || n.Inventory == nil || s.devices == nil || !assigned && gpu.RequestedCards(pod) == 0 {
		return nil
	}
	delivered, held, err := s.devices.start(n, key, pod, s.alloc.cardsOf(key))
	if err != nil {
		return err
	}
	if assigned && !slices.Equal(delivered, held) {
		klog.FromContext(ctx).Error(nil, "The delivery hook gave a pod other cards than the simulated device layer holds for it", "pod", key, "delivered", delivered, "held", held)
		s.recorder.Eventf(pod, corev1.EventTypeWarning, deliver.ReasonDrift, "the delivery hook gave cards [%s]; the simulated device layer holds [%s]", strings.Join(delivered, ", "), strings.Join(held, ", "))
	}
	return nil
}

// node returns the simulated node of this name.
func (s *Simulator) node(name string) (Node, bool) {
	s.nodesMu.RLock()
	defer s.nodesMu.RUnlock()
	n, ok := s.nodes[name]
	return n, ok
}

// release frees what the pod held: its resources, IP and cards, and its
// containers when the Runtime runs them.
func (s *Simulator) release(key string) {
	s.alloc.release(key)
	s.prepared.unprepare(key)
	if s.devices != nil {
		s.devices.stop(key)
	}
	if s.opts.Runtime != nil {
		s.opts.Runtime.Stop(key)
	}
}

// deletePod finishes a graceful deletion the way the kubelet does once the
// containers are stopped: delete with grace period 0, guarded by the UID so
// that a new pod of the same name is not hit.
func (s *Simulator) deletePod(ctx context.Context, key string, pod *corev1.Pod) error {
	s.release(key)
	if pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds == 0 {
		// Already deleted; only finalizers keep the object.
		return nil
	}
	err := s.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func (s *Simulator) updateStatus(ctx context.Context, pod *corev1.Pod, status *corev1.PodStatus) error {
	p := pod.DeepCopy()
	p.Status = *status
	_, err := s.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// runDuration reads the run duration of a pod: -1 when it runs until
// deleted. A malformed annotation is reported once as a Warning event on
// the pod, and the pod runs until deleted.
func (s *Simulator) runDuration(pod *corev1.Pod) time.Duration {
	v, ok := pod.Annotations[RunDurationAnnotation]
	if !ok {
		return -1
	}
	d, err := time.ParseDuration(v)
	if err == nil && d < 0 {
		err = fmt.Errorf("must not be negative")
	}
	if err != nil {
		s.warnOnce(pod, RunDurationAnnotation, v, err)
		return -1
	}
	return d
}

func (s *Simulator) exitCode(pod *corev1.Pod) int32 {
	v, ok := pod.Annotations[ExitCodeAnnotation]
	if !ok {
		return 0
	}
	code, err := strconv.ParseInt(v, 10, 32)
	if err == nil && (code < 0 || code > 255) {
		err = fmt.Errorf("must be between 0 and 255")
	}
	if err != nil {
		s.warnOnce(pod, ExitCodeAnnotation, v, err)
		return 0
	}
	return int32(code)
}

func (s *Simulator) warnOnce(pod *corev1.Pod, annotation, value string, err error) {
	if _, seen := s.warned.LoadOrStore(string(pod.UID)+"/"+annotation, true); seen {
		return
	}
	s.recorder.Eventf(pod, corev1.EventTypeWarning, "InvalidAnnotation", "annotation %s=%q: %v; ignored", annotation, value, err)
}

// remaining returns how long the pod's containers still run, 0 when they
// are due to exit now, -1 when they run until deleted.
func (s *Simulator) remaining(pod *corev1.Pod, started time.Time) time.Duration {
	d := s.runDuration(pod)
	if d < 0 {
		return -1
	}
	now := s.clock.Now()
	if s.opts.Slowdown != nil && !now.Before(started.Add(d)) {
		d = time.Duration(float64(d) * s.slowdown(pod))
	}
	left := started.Add(d).Sub(now)
	if left <= 0 {
		return 0
	}
	return left
}

// slowdown returns how many times its run duration the pod runs
// (Options.Slowdown), asked once.
func (s *Simulator) slowdown(pod *corev1.Pod) float64 {
	if f, ok := s.slowed.Load(pod.UID); ok {
		return f.(float64)
	}
	f := s.opts.Slowdown(pod, corelisters.NewPodLister(s.pods.GetIndexer()))
	if math.IsNaN(f) || f < 1 {
		f = 1
	}
	s.slowed.Store(pod.UID, f)
	return f
}

// podStart is when the current run of the pod's containers began: the
// latest container start, or the pod's start time.
func podStart(pod *corev1.Pod) time.Time {
	var t time.Time
	if pod.Status.StartTime != nil {
		t = pod.Status.StartTime.Time
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if r := cs.State.Running; r != nil && r.StartedAt.After(t) {
			t = r.StartedAt.Time
		}
	}
	return t
}

func runningStatus(pod *corev1.Pod, c corev1.Container, now metav1.Time, restarts int32, last *corev1.ContainerStateTerminated) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{
		Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), ContainerID: containerID(pod, c.Name),
		Ready: true, Started: ptr.To(true), RestartCount: restarts,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
	}
	if last != nil {
		cs.LastTerminationState = corev1.ContainerState{Terminated: last}
	}
	return cs
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func containerStart(cs *corev1.ContainerStatus, fallback time.Time) metav1.Time {
	if cs != nil && cs.State.Running != nil {
		return cs.State.Running.StartedAt
	}
	return metav1.NewTime(fallback)
}

func exitReason(code int32) string {
	if code == 0 {
		return "Completed"
	}
	return "Error"
}

func imageID(image string) string { return "aisched-sim://" + image }

func containerID(pod *corev1.Pod, container string) string {
	return fmt.Sprintf("aisched-sim://%s/%s", pod.UID, container)
}

// setReadyConditions sets the kubelet-owned pod conditions. Ready also
// needs every readiness gate of the pod to be True, as on a real node.
func setReadyConditions(pod *corev1.Pod, status *corev1.PodStatus, now metav1.Time, running bool, reason string) {
	ready := running
	for _, gate := range pod.Spec.ReadinessGates {
		if !conditionTrue(status.Conditions, gate.ConditionType) {
			ready = false
		}
	}
	set := func(t corev1.PodConditionType, ok bool, reason string) {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, LastTransitionTime: now}
		if ok {
			c.Status, c.Reason = corev1.ConditionTrue, ""
		}
		for i := range status.Conditions {
			if status.Conditions[i].Type == t {
				if status.Conditions[i].Status == c.Status {
					c.LastTransitionTime = status.Conditions[i].LastTransitionTime
				}
				status.Conditions[i] = c
				return
			}
		}
		status.Conditions = append(status.Conditions, c)
	}
	// The kubelet reports PodScheduled too: a pod bound by spec.nodeName,
	// past the scheduler, gets it only from the kubelet.
	set(corev1.PodScheduled, true, "")
	set(corev1.PodReadyToStartContainers, running, "")
	set(corev1.PodInitialized, true, "")
	set(corev1.ContainersReady, running, reason)
	set(corev1.PodReady, ready, reason)
}

func conditionTrue(conds []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
