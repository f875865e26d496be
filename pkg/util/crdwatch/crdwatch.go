// Package crdwatch starts an informer of aisched's generated clientset only
// when the apiserver serves its CRD: without the CRD an informer never
// syncs, and a component waiting for it would hang.
package crdwatch

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/generated/informers/externalversions"
)

// Start returns the informer that pick chooses from a new factory, started
// and synced within timeout, or nil when gv is not served.
func Start(ctx context.Context, client versioned.Interface, gv schema.GroupVersion, timeout time.Duration,
	pick func(externalversions.SharedInformerFactory) cache.SharedIndexInformer) (cache.SharedIndexInformer, error) {
	_, err := client.Discovery().ServerResourcesForGroupVersion(gv.String())
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("discover %s: %w", gv, err)
	}
	factory := externalversions.NewSharedInformerFactory(client, 0)
	informer := pick(factory)
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		return nil, fmt.Errorf("%s cache not synced after %s", gv, timeout)
	}
	return informer, nil
}
