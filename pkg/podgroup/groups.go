package podgroup

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/generated/informers/externalversions"
	listers "github.com/aisched/aisched/pkg/generated/listers/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/util/crdwatch"
)

// syncTimeout bounds the wait for the PodGroup cache at start.
const syncTimeout = 30 * time.Second

// Groups resolves the group of a pod from the seed labels or from a
// scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1) named by the
// pod's scheduling.x-k8s.io/pod-group label. One Groups serves every
// profile of a scheduler.
type Groups struct {
	once    sync.Once
	initErr error
	// podGroups is nil when the PodGroup CRD is not served.
	podGroups cache.SharedIndexInformer
	lister    listers.PodGroupLister
	client    versioned.Interface
}

// Init starts following PodGroups when the CRD is served, once; later
// calls return the first call's result.
func (g *Groups) Init(ctx context.Context, config *rest.Config) error {
	g.once.Do(func() { g.initErr = g.init(ctx, config) })
	return g.initErr
}

func (g *Groups) init(ctx context.Context, config *rest.Config) error {
	client, err := versioned.NewForConfig(config)
	if err != nil {
		return err
	}
	informer, err := crdwatch.Start(ctx, client, schedulingv1alpha1.SchemeGroupVersion, syncTimeout,
		func(f externalversions.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Scheduling().V1alpha1().PodGroups().Informer()
		})
	switch {
	case err != nil:
		return err
	case informer == nil:
		klog.FromContext(ctx).Info("PodGroup CRD (scheduling.x-k8s.io) not installed; pod groups come from the seed labels only")
		return nil
	}
	g.podGroups, g.lister, g.client = informer, listers.NewPodGroupLister(informer.GetIndexer()), client
	return nil
}

// API returns the PodGroup lister and a client, or false when the CRD is
// not served.
func (g *Groups) API() (listers.PodGroupLister, versioned.Interface, bool) {
	return g.lister, g.client, g.lister != nil
}

// OnPodGroup calls f with the key of every PodGroup added, or updated in
// its spec.
func (g *Groups) OnPodGroup(f func(key string)) error {
	if g.podGroups == nil {
		return nil
	}
	call := func(obj interface{}) {
		if pg, ok := obj.(*schedulingv1alpha1.PodGroup); ok {
			f(pg.Namespace + "/" + pg.Name)
		}
	}
	_, err := g.podGroups.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: call,
		UpdateFunc: func(old, obj interface{}) {
			if o, ok := old.(*schedulingv1alpha1.PodGroup); ok && o.Generation == obj.(*schedulingv1alpha1.PodGroup).Generation {
				return
			}
			call(obj)
		},
	})
	return err
}

// Of returns the group of a pod: from the seed labels (FromPod), else from
// the PodGroup its scheduling.x-k8s.io/pod-group label names. ok is false
// for a pod in no group. An error names what is wrong, including a PodGroup
// that does not exist (yet).
func (g *Groups) Of(pod *corev1.Pod) (ref Ref, ok bool, err error) {
	if Native(pod) {
		return Ref{}, false, nil
	}
	if ref, ok, err := FromPod(pod); ok {
		return ref, ok, err
	}
	name, ok := pod.Labels[schedulingv1alpha1.PodGroupLabel]
	if !ok {
		return Ref{}, false, nil
	}
	ref = Ref{Namespace: pod.Namespace, Name: name}
	if g.lister == nil {
		return ref, true, fmt.Errorf("label %s=%q: the PodGroup CRD (scheduling.x-k8s.io) is not installed", schedulingv1alpha1.PodGroupLabel, name)
	}
	pg, err := g.lister.PodGroups(pod.Namespace).Get(name)
	if err != nil {
		return ref, true, fmt.Errorf("label %s=%q: waiting for PodGroup %s: %w", schedulingv1alpha1.PodGroupLabel, name, ref.Key(), err)
	}
	if pg.Spec.MinMember < 1 || pg.Spec.MinMember > MaxMinAvailable {
		return ref, true, fmt.Errorf("PodGroup %s: spec.minMember %d: must be between 1 and %d", ref.Key(), pg.Spec.MinMember, MaxMinAvailable)
	}
	ref.MinAvailable = int(pg.Spec.MinMember)
	ref.Created = pg.CreationTimestamp.Time
	ref.MinResources = pg.Spec.MinResources
	if t := pg.Spec.ScheduleTimeoutSeconds; t != nil && *t > 0 {
		ref.Timeout = time.Duration(*t) * time.Second
	}
	return ref, true, nil
}
