package platform

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/aisched/aisched/apis/platform/v1alpha1"
)

// OperatorInstanceReconciler runs an OperatorInstance as a Deployment of the
// same name: scaled to spec.replicas while the instance and its Operator
// are online, to zero otherwise (the object stays; the pods and their GPUs
// go).
type OperatorInstanceReconciler struct {
	Client client.Client
	// DefaultSchedulerName schedules the pods of instances that name no
	// scheduler; empty means the aisched profile.
	DefaultSchedulerName string
}

// Reconcile makes the Deployment and reports it in the status.
func (r *OperatorInstanceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var inst v1alpha1.OperatorInstance
	if err := r.Client.Get(ctx, req.NamespacedName, &inst); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := inst.DeepCopy()
	inst.Status.ObservedGeneration = inst.Generation
	inst.Status.Selector = labels.SelectorFromSet(selectorLabels(&inst)).String()

	var op v1alpha1.Operator
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: inst.Namespace, Name: inst.Spec.OperatorRef.Name}, &op)
	if apierrors.IsNotFound(err) {
		// Without its Operator the pod template is unknown: the
		// Deployment, if any, is left as it is.
		setReady(&inst.Status.Conditions, inst.Generation, false, v1alpha1.ReasonOperatorNotFound,
			fmt.Sprintf("spec.operatorRef.name: operator %q not found in namespace %s", inst.Spec.OperatorRef.Name, inst.Namespace))
		return ctrl.Result{}, r.patchStatus(ctx, orig, &inst)
	}
	if err != nil {
		return ctrl.Result{}, err
	}

	replicas := int32(1)
	if inst.Spec.Replicas != nil {
		replicas = *inst.Spec.Replicas
	}
	offlineReason, offlineMsg := "", ""
	switch {
	case op.Spec.State == v1alpha1.Offline:
		replicas, offlineReason, offlineMsg = 0, v1alpha1.ReasonOperatorOffline, fmt.Sprintf("operator %s is offline: no pods run and their GPUs are free", op.Name)
	case inst.Spec.State == v1alpha1.Offline:
		replicas, offlineReason, offlineMsg = 0, v1alpha1.ReasonOffline, "the instance is offline: no pods run and their GPUs are free"
	}
	schedulerName := inst.Spec.SchedulerName
	if schedulerName == "" {
		schedulerName = r.DefaultSchedulerName
	}

	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: inst.Namespace, Name: inst.Name}}
	_, err = controllerutil.CreateOrUpdate(ctx, r.Client, d, func() error {
		if d.ResourceVersion != "" && !metav1.IsControlledBy(d, &inst) {
			return fmt.Errorf("deployment %s exists and belongs to something else", d.Name)
		}
		applyDeployment(d, &inst, &op, replicas, schedulerName)
		return controllerutil.SetControllerReference(&inst, d, r.Client.Scheme())
	})
	if err != nil {
		setReady(&inst.Status.Conditions, inst.Generation, false, v1alpha1.ReasonDeploymentFailed, err.Error())
		return ctrl.Result{}, errors.Join(err, r.patchStatus(ctx, orig, &inst))
	}
	inst.Status.Deployment = d.Name
	inst.Status.Replicas = d.Status.Replicas
	inst.Status.ReadyReplicas = d.Status.ReadyReplicas
	switch {
	case offlineReason != "":
		setReady(&inst.Status.Conditions, inst.Generation, false, offlineReason, offlineMsg)
	case d.Status.ObservedGeneration < d.Generation || d.Status.ReadyReplicas < replicas || d.Status.Replicas > replicas:
		reason, why, err := r.whyNotReady(ctx, &inst, d)
		if err != nil {
			return ctrl.Result{}, err
		}
		msg := fmt.Sprintf("%d of %d replicas ready", d.Status.ReadyReplicas, replicas)
		if d.Status.Replicas > replicas {
			msg += fmt.Sprintf(", %d more to stop", d.Status.Replicas-replicas)
		}
		if why != "" {
			msg += "; " + why
		}
		setReady(&inst.Status.Conditions, inst.Generation, false, reason, msg)
	default:
		setReady(&inst.Status.Conditions, inst.Generation, true, v1alpha1.ReasonReady, fmt.Sprintf("%d of %d replicas ready", d.Status.ReadyReplicas, replicas))
	}
	return ctrl.Result{}, r.patchStatus(ctx, orig, &inst)
}

// whyNotReady explains missing replicas from the Deployment's failure
// condition (a quota that refused the pods, say) and the pods themselves:
// how many the scheduler cannot place and its message for the first.
func (r *OperatorInstanceReconciler) whyNotReady(ctx context.Context, inst *v1alpha1.OperatorInstance, d *appsv1.Deployment) (reason, msg string, err error) {
	var parts []string
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			parts = append(parts, c.Message)
		}
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(inst.Namespace), client.MatchingLabels(selectorLabels(inst))); err != nil {
		return "", "", err
	}
	// The newest pod's message first, so that the message follows a rollout.
	sort.Slice(pods.Items, func(i, j int) bool {
		return pods.Items[j].CreationTimestamp.Before(&pods.Items[i].CreationTimestamp)
	})
	var unschedulableCount, starting int
	var first string
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if why, ok := unschedulable(p); ok {
			unschedulableCount++
			if first == "" {
				first = why
			}
		} else if !podReady(p) {
			starting++
		}
	}
	reason = v1alpha1.ReasonReplicasNotReady
	if unschedulableCount > 0 {
		reason = v1alpha1.ReasonUnschedulable
		parts = append(parts, fmt.Sprintf("%d cannot be scheduled: %s", unschedulableCount, strings.TrimSpace(first)))
	}
	if starting > 0 {
		parts = append(parts, fmt.Sprintf("%d starting or not ready", starting))
	}
	return reason, strings.Join(parts, "; "), nil
}

// unschedulable returns the scheduler's message for an unbound pod it
// could not place.
func unschedulable(p *corev1.Pod) (string, bool) {
	if p.Spec.NodeName != "" {
		return "", false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message, true
		}
	}
	return "", false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (r *OperatorInstanceReconciler) patchStatus(ctx context.Context, orig, inst *v1alpha1.OperatorInstance) error {
	if equality.Semantic.DeepEqual(orig.Status, inst.Status) {
		return nil
	}
	return r.Client.Status().Patch(ctx, inst, client.MergeFrom(orig))
}
