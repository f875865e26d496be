// Package crdwatch starts informers of custom resources only when the
// apiserver serves them: without the CRD an informer never syncs, and a
// component waiting for it would hang. Start serves aisched's generated
// clientset; StartDynamic serves peers' resources (Volcano's, KAI's)
// through the dynamic client.
package crdwatch

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/generated/informers/externalversions"
)

// Served reports whether the apiserver serves resource gvr.
func Served(disc discovery.DiscoveryInterface, gvr schema.GroupVersionResource) (bool, error) {
	list, err := disc.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("discover %s: %w", gvr.GroupVersion(), err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == gvr.Resource }), nil
}

// Start returns the informer that pick chooses from a new factory, started
// and synced within timeout, or nil when gvr is not served.
func Start(ctx context.Context, client versioned.Interface, gvr schema.GroupVersionResource, timeout time.Duration,
	pick func(externalversions.SharedInformerFactory) cache.SharedIndexInformer) (cache.SharedIndexInformer, error) {
	if ok, err := Served(client.Discovery(), gvr); !ok || err != nil {
		return nil, err
	}
	factory := externalversions.NewSharedInformerFactory(client, 0)
	informer := pick(factory)
	factory.Start(ctx.Done())
	return informer, waitSynced(ctx, informer, gvr, timeout)
}

// Watch starts the informer that pick chooses, as Start does, calls
// handler's functions on its changes, and returns its indexer and the
// handler's HasSynced; all nil when gvr is not served.
func Watch(ctx context.Context, client versioned.Interface, gvr schema.GroupVersionResource, timeout time.Duration,
	pick func(externalversions.SharedInformerFactory) cache.SharedIndexInformer, handler cache.ResourceEventHandler) (cache.Indexer, cache.InformerSynced, error) {
	informer, err := Start(ctx, client, gvr, timeout, pick)
	if informer == nil || err != nil {
		return nil, nil, err
	}
	reg, err := informer.AddEventHandler(handler)
	if err != nil {
		return nil, nil, err
	}
	return informer.GetIndexer(), reg.HasSynced, nil
}

// OnChange is a handler that calls f on every add, update and delete.
func OnChange(f func()) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { f() },
		UpdateFunc: func(interface{}, interface{}) { f() },
		DeleteFunc: func(interface{}) { f() },
	}
}

// StartDynamic returns a started and synced informer of gvr through the
// dynamic client, calling handler's functions if it is not nil; nil when
// gvr is not served, or dyn is nil (a simulator without an apiserver).
func StartDynamic(ctx context.Context, disc discovery.DiscoveryInterface, dyn dynamic.Interface, gvr schema.GroupVersionResource,
	timeout time.Duration, handler cache.ResourceEventHandler) (cache.SharedIndexInformer, error) {
	if dyn == nil {
		return nil, nil
	}
	if ok, err := Served(disc, gvr); !ok || err != nil {
		return nil, err
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	informer := factory.ForResource(gvr).Informer()
	if handler != nil {
		if _, err := informer.AddEventHandler(handler); err != nil {
			return nil, err
		}
	}
	factory.Start(ctx.Done())
	return informer, waitSynced(ctx, informer, gvr, timeout)
}

func waitSynced(ctx context.Context, informer cache.SharedIndexInformer, gvr schema.GroupVersionResource, timeout time.Duration) error {
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		return fmt.Errorf("%s cache not synced after %s", gvr.GroupResource(), timeout)
	}
	return nil
}
