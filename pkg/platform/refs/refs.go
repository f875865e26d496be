// Package refs follows the references between the service platform's
// objects (AIService -> OperatorInstance -> Operator, AIService -> API-key
// Secret and EndpointSlices) for the controller and the gateway, which
// must hear when a referenced object changes: cache indexes, the map
// functions from a changed object to the objects that refer to it, the
// cache filters that keep the caches to the platform's own objects, and the
// ready endpoints of a service.
package refs

import (
	"context"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/aisched/aisched/apis/platform/v1alpha1"
)

// Index fields of the caches.
const (
	operatorField = "spec.operatorRef.name"
	instanceField = "spec.instanceRef.name"
	secretField   = "spec.auth.secretRef.name"
)

// CacheOptions keeps a cache to the objects of the platform: pods of
// OperatorInstances, EndpointSlices of AIServices' Services and Secrets of
// type APIKeySecretType, rather than every pod, slice and Secret of the
// cluster (memory, and the controller reads no other Secret; the gateway
// reads none).
func CacheOptions() cache.Options {
	has := func(key string) labels.Selector {
		r, err := labels.NewRequirement(key, selection.Exists, nil)
		if err != nil {
			panic(err) // the keys are constants
		}
		return labels.NewSelector().Add(*r)
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:                {Label: has(v1alpha1.InstanceLabel)},
		&discoveryv1.EndpointSlice{}: {Label: has(v1alpha1.ServiceLabel)},
		&corev1.Secret{}:             {Field: fields.OneTermEqualSelector("type", v1alpha1.APIKeySecretType)},
	}}
}

// Indexer is what Index needs of a manager.
type Indexer interface {
	GetFieldIndexer() client.FieldIndexer
}

// IndexInstances registers the index of OperatorInstances by Operator
// that InstancesOfOperator and ServicesOfOperator use. Call it once per
// manager, before the controllers start.
func IndexInstances(ctx context.Context, mgr Indexer) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.OperatorInstance{}, operatorField, func(o client.Object) []string {
		return []string{o.(*v1alpha1.OperatorInstance).Spec.OperatorRef.Name}
	})
}

// IndexServices registers the indexes of AIServices by instance and by
// Secret that ServicesOfInstance, ServicesOfOperator and ServicesOfSecret
// use. Call it once per manager, before the controllers start.
func IndexServices(ctx context.Context, mgr Indexer) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &v1alpha1.AIService{}, instanceField, func(o client.Object) []string {
		return []string{o.(*v1alpha1.AIService).Spec.InstanceRef.Name}
	}); err != nil {
		return err
	}
	return idx.IndexField(ctx, &v1alpha1.AIService{}, secretField, func(o client.Object) []string {
		if a := o.(*v1alpha1.AIService).Spec.Auth; a != nil && a.SecretRef != nil {
			return []string{a.SecretRef.Name}
		}
		return nil
	})
}

// InstancesOfOperator maps an Operator to the instances that run it.
func InstancesOfOperator(c client.Reader) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var list v1alpha1.OperatorInstanceList
		if err := c.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{operatorField: o.GetName()}); err != nil {
			return nil
		}
		return requests(list.Items)
	})
}

// InstanceOfPod maps a pod to the instance that runs it.
func InstanceOfPod() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return named(o.GetNamespace(), o.GetLabels()[v1alpha1.InstanceLabel])
	})
}

// ServicesOfOperator maps an Operator to the AIServices of its instances.
func ServicesOfOperator(c client.Reader) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var insts v1alpha1.OperatorInstanceList
		if err := c.List(ctx, &insts, client.InNamespace(o.GetNamespace()), client.MatchingFields{operatorField: o.GetName()}); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range insts.Items {
			out = append(out, servicesBy(ctx, c, o.GetNamespace(), instanceField, insts.Items[i].Name)...)
		}
		return out
	})
}

// ServicesOfInstance maps an OperatorInstance to the AIServices on it.
func ServicesOfInstance(c client.Reader) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return servicesBy(ctx, c, o.GetNamespace(), instanceField, o.GetName())
	})
}

// ServicesOfSecret maps a Secret to the AIServices whose keys it holds.
func ServicesOfSecret(c client.Reader) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return servicesBy(ctx, c, o.GetNamespace(), secretField, o.GetName())
	})
}

// ServiceOfSlice maps an EndpointSlice to its AIService, named by the
// ServiceLabel its Service carries.
func ServiceOfSlice() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return named(o.GetNamespace(), o.GetLabels()[v1alpha1.ServiceLabel])
	})
}

func named(namespace, name string) []reconcile.Request {
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}}
}

func servicesBy(ctx context.Context, c client.Reader, ns, field, value string) []reconcile.Request {
	var list v1alpha1.AIServiceList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{field: value}); err != nil {
		return nil
	}
	return requests(list.Items)
}

func requests[T any, PT interface {
	*T
	client.Object
}](items []T) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(items))
	for i := range items {
		o := PT(&items[i])
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}})
	}
	return out
}

// ReadyEndpoints returns the ready addresses ("ip:port") of an AIService's
// EndpointSlices for its port, each once, in the slices' order.
func ReadyEndpoints(ctx context.Context, c client.Reader, ns, service string, port int32) ([]string, error) {
	var slices discoveryv1.EndpointSliceList
	if err := c.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{v1alpha1.ServiceLabel: service}); err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, s := range slices.Items {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 || !hasPort(s, port) {
			continue
		}
		for _, e := range s.Endpoints {
			// Ready unset means ready (the API's convention for old producers).
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				addr := net.JoinHostPort(a, strconv.Itoa(int(port)))
				if !seen[addr] {
					seen[addr] = true
					out = append(out, addr)
				}
			}
		}
	}
	return out, nil
}

func hasPort(s discoveryv1.EndpointSlice, want int32) bool {
	for _, p := range s.Ports {
		if p.Port != nil && *p.Port == want {
			return true
		}
	}
	return false
}
