package gateway

import (
	"context"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/aisched/aisched/apis/platform/v1alpha1"
	"github.com/aisched/aisched/pkg/platform/refs"
)

// RouteReconciler compiles each AIService, with the API keys its status
// publishes and its ready endpoints, into the gateway's route: an edit, a
// key rotation or a pod becoming ready applies as soon as the cache sees
// it.
type RouteReconciler struct {
	Client  client.Client
	Gateway *Gateway
}

// Reconcile installs or removes the route of an AIService.
func (r *RouteReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var svc v1alpha1.AIService
	if err := r.Client.Get(ctx, req.NamespacedName, &svc); err != nil {
		if apierrors.IsNotFound(err) {
			r.Gateway.Delete(req.Namespace, req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	endpoints, err := refs.ReadyEndpoints(ctx, r.Client, svc.Namespace, svc.Name, svc.Spec.Port)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.Gateway.Apply(&svc, endpoints)
	return ctrl.Result{}, nil
}

// SetupWithManager watches AIServices and their EndpointSlices; it reads
// no Secret (the controller publishes the keys' digests in the status).
// It runs on every replica (no leader election): each gateway needs every
// route. The manager's cache must have been made with refs.CacheOptions.
func (r *RouteReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := refs.IndexServices(ctx, mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("gateway").
		For(&v1alpha1.AIService{}).
		Watches(&discoveryv1.EndpointSlice{}, refs.ServiceOfSlice()).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4, NeedLeaderElection: ptr.To(false)}).
		Complete(r)
}
