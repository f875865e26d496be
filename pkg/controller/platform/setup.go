package platform

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/apis/platform/v1alpha1"
	"github.com/aisched/aisched/pkg/platform/refs"
)

// Options configure the controllers.
type Options struct {
	// GatewayURL is the gateway's base URL as callers reach it
	// (http://gateway.example:8480), from which each AIService's status.url
	// is made; empty leaves status.url empty.
	GatewayURL string
	// SchedulerName is the scheduler of the instances' pods when an
	// OperatorInstance does not name one.
	SchedulerName string
	// Pepper makes the digests of API keys that AIServices publish for
	// the gateway (package keys); Run makes or reads it.
	Pepper []byte
}

// NewScheme returns a scheme with the Kubernetes types and the platform's.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	// The team queues' webhook (pkg/webhook/queues) decodes aischedqueues.
	if err := aischedv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Setup adds the Operator, OperatorInstance and AIService controllers and
// the cache indexes they use to mgr, whose cache must have been made with
// refs.CacheOptions.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if err := refs.IndexInstances(ctx, mgr); err != nil {
		return err
	}
	if err := refs.IndexServices(ctx, mgr); err != nil {
		return err
	}
	c := mgr.GetClient()
	if err := ctrl.NewControllerManagedBy(mgr).Named("operator").
		For(&v1alpha1.Operator{}).
		Complete(&OperatorReconciler{Client: c}); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("operatorinstance").
		For(&v1alpha1.OperatorInstance{}).
		Owns(&appsv1.Deployment{}).
		Watches(&v1alpha1.Operator{}, refs.InstancesOfOperator(c)).
		// Pods say why replicas are not ready (unschedulable, and why).
		Watches(&corev1.Pod{}, refs.InstanceOfPod()).
		Complete(&OperatorInstanceReconciler{Client: c, DefaultSchedulerName: opts.SchedulerName}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("aiservice").
		For(&v1alpha1.AIService{}).
		Owns(&corev1.Service{}).
		Watches(&v1alpha1.OperatorInstance{}, refs.ServicesOfInstance(c)).
		Watches(&v1alpha1.Operator{}, refs.ServicesOfOperator(c)).
		Watches(&corev1.Secret{}, refs.ServicesOfSecret(c)).
		Watches(&discoveryv1.EndpointSlice{}, refs.ServiceOfSlice()).
		Complete(&AIServiceReconciler{Client: c, GatewayURL: opts.GatewayURL, Pepper: opts.Pepper})
}

// setReady sets the Ready condition and reports whether it changed.
func setReady(conds *[]metav1.Condition, generation int64, ok bool, reason, msg string) bool {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return meta.SetStatusCondition(conds, metav1.Condition{
		Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: generation,
	})
}
