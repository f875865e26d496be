package platform

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aisched/aisched/apis/platform/v1alpha1"
)

// OperatorReconciler reports whether an Operator is online.
type OperatorReconciler struct {
	Client client.Client
}

// Reconcile sets the Operator's Ready condition.
func (r *OperatorReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var op v1alpha1.Operator
	if err := r.Client.Get(ctx, req.NamespacedName, &op); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := op.DeepCopy()
	if op.Spec.State == v1alpha1.Offline {
		setReady(&op.Status.Conditions, op.Generation, false, v1alpha1.ReasonOffline, "the operator is offline: its instances run no pods")
	} else {
		setReady(&op.Status.Conditions, op.Generation, true, v1alpha1.ReasonOnline, "instances may run the operator")
	}
	op.Status.ObservedGeneration = op.Generation
	if equality.Semantic.DeepEqual(orig.Status, op.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.Client.Status().Patch(ctx, &op, client.MergeFrom(orig))
}
