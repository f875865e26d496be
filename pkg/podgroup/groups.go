package podgroup

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
	"github.com/aisched/aisched/pkg/generated/informers/externalversions"
	listers "github.com/aisched/aisched/pkg/generated/listers/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/util/crdwatch"
	"github.com/aisched/aisched/pkg/util/quote"
)

// syncTimeout bounds the wait for the PodGroup cache at start.
const syncTimeout = 30 * time.Second

// CreatedFromLabelsAnnotation marks a PodGroup the job queue created to
// show the state of a group its members' labels declare and size.
const CreatedFromLabelsAnnotation = "scheduling.aisched.io/created-from-labels"

// groupIndex indexes the scheduler's pod informer by group key.
const groupIndex = "aisched.io/pod-group"

// Groups is the scheduler's one view of pod groups: it resolves the group of
// a pod from the labels or annotations that name and size it, or from a
// scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1) named by the
// pod's label, lists a group's members, keeps each
// group's creation time for the queue order, and sends a gang's pending
// members back to the active queue when the gang becomes complete (its
// last member or its PodGroup arrives). One Groups serves every profile of
// a scheduler.
type Groups struct {
	// podGroups is nil when the PodGroup CRD is not served.
	podGroups cache.SharedIndexInformer
	lister    listers.PodGroupLister
	client    versioned.Interface
	// volcano lists Volcano's PodGroups; nil when they are not served.
	volcano cache.GenericLister
	// pods is the scheduler's pod informer store, indexed by group.
	pods     cache.Indexer
	activate func(map[string]*corev1.Pod)

	mu sync.Mutex
	// times is the creation time of each group: the earliest creation
	// time of its members seen so far, or its PodGroup's. It only moves
	// back, so the queue order of a group is stable.
	times map[string]time.Time
}

// New returns a Groups that is not started.
func New() *Groups {
	return &Groups{times: map[string]time.Time{}}
}

// Start follows PodGroups when the CRD is served (through client), and
// Volcano's when they are (through dyn, which may be nil), indexes the
// scheduler's pods by group, and activates pending gang members through
// activate when their gang becomes complete.
func (g *Groups) Start(ctx context.Context, client versioned.Interface, dyn dynamic.Interface, factory informers.SharedInformerFactory, activate func(map[string]*corev1.Pod)) error {
	informer := factory.Core().V1().Pods().Informer()
	if err := informer.AddIndexers(cache.Indexers{groupIndex: indexByGroup}); err != nil {
		return fmt.Errorf("indexing pods by group: %w", err)
	}
	g.pods, g.activate = informer.GetIndexer(), activate
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: g.podAdded, DeleteFunc: g.podDeleted}); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	if err := g.startVolcano(ctx, client.Discovery(), dyn); err != nil {
		return err
	}
	pgInformer, err := crdwatch.Start(ctx, client, schedulingv1alpha1.SchemeGroupVersion.WithResource("podgroups"), syncTimeout,
		func(f externalversions.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Scheduling().V1alpha1().PodGroups().Informer()
		})
	switch {
	case err != nil:
		return err
	case pgInformer == nil:
		klog.FromContext(ctx).Info("PodGroup CRD (scheduling.x-k8s.io) not installed; pod groups come from the pods' labels and annotations only")
		return nil
	}
	g.podGroups, g.lister, g.client = pgInformer, listers.NewPodGroupLister(pgInformer.GetIndexer()), client
	// A PodGroup created after its pods, or whose minMember dropped, may
	// let them through: their group time is the PodGroup's.
	return g.OnPodGroup(g.podGroupChanged)
}

func indexByGroup(obj interface{}) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	key, ok := KeyOf(pod)
	if !ok {
		return nil, nil
	}
	return []string{key}, nil
}

// API returns the PodGroup lister and a client, or false when the CRD is
// not served.
func (g *Groups) API() (listers.PodGroupLister, versioned.Interface, bool) {
	return g.lister, g.client, g.lister != nil
}

// OnPodGroup calls f with the key of every PodGroup added, or updated in
// its spec, except the arrival of one the job queue created to show a
// group its members' labels size (CreatedFromLabelsAnnotation): the group
// was whole before it, and its arrival changes nothing. (With 16-pod gangs
// on 1,000 nodes, each such arrival set off a job queue pass over the
// whole cluster: 200 passes while 3,200 pods were placed.)
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
		AddFunc: func(obj interface{}) {
			if pg, ok := obj.(*schedulingv1alpha1.PodGroup); ok && pg.Annotations[CreatedFromLabelsAnnotation] == "true" {
				return
			}
			call(obj)
		},
		UpdateFunc: func(old, obj interface{}) {
			if o, ok := old.(*schedulingv1alpha1.PodGroup); ok && o.Generation == obj.(*schedulingv1alpha1.PodGroup).Generation {
				return
			}
			call(obj)
		},
	})
	return err
}

// Of returns the group of a pod: one the pod names and sizes itself
// (FromPod), else the scheduler-plugins PodGroup its label (or old label)
// names, or the Volcano PodGroup its annotation names. ok is false for a
// pod in no group. An error names what is wrong, including a PodGroup that
// does not exist (yet).
func (g *Groups) Of(pod *corev1.Pod) (ref Ref, ok bool, err error) {
	if Native(pod) {
		return Ref{}, false, nil
	}
	if ref, ok, err := FromPod(pod); ok {
		return ref, ok, err
	}
	name, key, ok := objectName(pod)
	if !ok {
		return Ref{}, false, nil
	}
	ref = Ref{Namespace: pod.Namespace, Name: name}
	if key == "annotation "+VolcanoGroupAnnotation {
		ref, err := g.volcanoRef(ref, key)
		return ref, true, err
	}
	if g.lister == nil {
		return ref, true, fmt.Errorf("%s=%s: the PodGroup CRD (scheduling.x-k8s.io) is not installed", key, quote.Value(name))
	}
	pg, err := g.lister.PodGroups(pod.Namespace).Get(name)
	if err != nil {
		return ref, true, fmt.Errorf("%s=%s: waiting for PodGroup %s: %w", key, quote.Value(name), ref.Key(), err)
	}
	if pg.Spec.MinMember < 1 || pg.Spec.MinMember > MaxMinAvailable {
		return ref, true, fmt.Errorf("PodGroup %s: spec.minMember %d: must be between 1 and %d", ref.Key(), pg.Spec.MinMember, MaxMinAvailable)
	}
	ref.MinAvailable = int(pg.Spec.MinMember)
	ref.Created = pg.CreationTimestamp.Time
	ref.MinResources = pg.Spec.MinResources
	ref.Annotations = pg.Annotations
	if t := pg.Spec.ScheduleTimeoutSeconds; t != nil && *t > 0 {
		ref.Timeout = time.Duration(*t) * time.Second
	}
	return ref, true, nil
}

// Gang returns the group of a pod that gangs: min-available above 1.
// Pods in no group, in a group of one, or with an invalid group are not
// ganged.
func (g *Groups) Gang(pod *corev1.Pod) (Ref, bool) {
	ref, ok, err := g.Of(pod)
	if !ok || err != nil || ref.MinAvailable < 2 {
		return Ref{}, false
	}
	return ref, true
}

// Members returns the group's pods that are neither ended nor being
// deleted (the scheduler's informer drops ended pods).
func (g *Groups) Members(key string) []*corev1.Pod {
	objs, err := g.pods.ByIndex(groupIndex, key)
	if err != nil {
		return nil
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// Time returns the creation time of the group with key given the creation
// time of one member: the earliest seen.
func (g *Groups) Time(key string, member time.Time) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.times[key]
	if !ok || member.Before(t) {
		g.times[key] = member
		return member
	}
	return t
}

// podAdded: when an unbound member makes its gang reach min-available
// pods, the members rejected for lack of members go back to the active
// queue (the scheduler reports unscheduled pod additions to plugins only
// with the GenericWorkload gate on).
func (g *Groups) podAdded(obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName != "" {
		return
	}
	ref, ok := g.Gang(pod)
	if !ok {
		return
	}
	members := g.Members(ref.Key())
	if len(members) < ref.MinAvailable {
		return
	}
	pending := map[string]*corev1.Pod{}
	for _, m := range members {
		if m.Spec.NodeName == "" && m.UID != pod.UID {
			pending[m.Namespace+"/"+m.Name] = m
		}
	}
	g.activate(pending)
}

// podDeleted drops the time of a group whose last pod went away.
func (g *Groups) podDeleted(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	key, ok := KeyOf(pod)
	if !ok {
		return
	}
	if objs, err := g.pods.ByIndex(groupIndex, key); err == nil && len(objs) > 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.times, key)
}

// podGroupChanged records a PodGroup's creation time as its group's and
// activates its pending members.
func (g *Groups) podGroupChanged(key string) {
	objs, err := g.pods.ByIndex(groupIndex, key)
	if err != nil || len(objs) == 0 {
		return
	}
	pending := map[string]*corev1.Pod{}
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName == "" {
			if ref, ok := g.Gang(p); ok && !ref.Created.IsZero() {
				g.Time(key, ref.Created)
			}
			pending[p.Namespace+"/"+p.Name] = p
		}
	}
	g.activate(pending)
}
