package podgroup

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/aisched/aisched/pkg/util/crdwatch"
)

// VolcanoPodGroups are Volcano's PodGroups, which pods name with the
// annotation VolcanoGroupAnnotation; aisched reads their spec.minMember
// like a scheduler-plugins PodGroup's, through the dynamic client (the
// rest of Volcano's API is not needed). Their status is Volcano's: the job
// queue does not write it.
var VolcanoPodGroups = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}

// startVolcano follows Volcano's PodGroups when the apiserver serves them;
// dyn nil (the simulator) reads none.
func (g *Groups) startVolcano(ctx context.Context, disc discovery.DiscoveryInterface, dyn dynamic.Interface) error {
	if dyn == nil {
		return nil
	}
	changed := func(obj interface{}) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			g.podGroupChanged(u.GetNamespace() + "/" + u.GetName())
		}
	}
	informer, err := crdwatch.StartDynamic(ctx, disc, dyn, VolcanoPodGroups, syncTimeout, cache.ResourceEventHandlerFuncs{
		AddFunc: changed,
		UpdateFunc: func(old, obj interface{}) {
			if o, ok := old.(*unstructured.Unstructured); ok && o.GetGeneration() != obj.(*unstructured.Unstructured).GetGeneration() {
				changed(obj)
			}
		},
	})
	if err != nil || informer == nil {
		return err
	}
	g.volcano = cache.NewGenericLister(informer.GetIndexer(), VolcanoPodGroups.GroupResource())
	klog.FromContext(ctx).Info("Reading Volcano's PodGroups", "groupVersion", VolcanoPodGroups.GroupVersion())
	return nil
}

// volcanoRef completes ref, named by key, from its Volcano PodGroup.
func (g *Groups) volcanoRef(ref Ref, key string) (Ref, error) {
	if g.volcano == nil {
		return ref, fmt.Errorf("%s=%q: Volcano's PodGroup CRD (%s) is not installed; create a scheduling.x-k8s.io/v1alpha1 PodGroup %q with the same minMember and label the pods %s=%s instead",
			key, ref.Name, VolcanoPodGroups.GroupVersion(), ref.Name, "scheduling.x-k8s.io/pod-group", ref.Name)
	}
	obj, err := g.volcano.ByNamespace(ref.Namespace).Get(ref.Name)
	if err != nil {
		return ref, fmt.Errorf("%s=%q: waiting for Volcano PodGroup %s: %w", key, ref.Name, ref.Key(), err)
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return ref, fmt.Errorf("PodGroup %s (scheduling.volcano.sh): unexpected %T", ref.Key(), obj)
	}
	minMember, found, err := unstructured.NestedInt64(u.Object, "spec", "minMember")
	switch {
	case err != nil:
		return ref, fmt.Errorf("PodGroup %s (scheduling.volcano.sh): spec.minMember: %w", ref.Key(), err)
	case !found || minMember < 1 || minMember > MaxMinAvailable:
		return ref, fmt.Errorf("PodGroup %s (scheduling.volcano.sh): spec.minMember %d: must be between 1 and %d", ref.Key(), minMember, MaxMinAvailable)
	}
	ref.MinAvailable = int(minMember)
	ref.Created = u.GetCreationTimestamp().UTC()
	ref.Annotations = u.GetAnnotations()
	if spec, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec"); ok {
		ref.Volcano, _ = spec.(map[string]interface{})
	}
	return ref, nil
}
