package simcluster

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	schedulingxv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
	aischedfake "github.com/aisched/aisched/pkg/generated/clientset/versioned/fake"
	aischedscheme "github.com/aisched/aisched/pkg/generated/clientset/versioned/scheme"
)

// fakeAPI is client-go's fake clientset, and the fake of aisched's
// generated one, with what of kube-apiserver the scheduler and the
// simulated kubelets rely on added as reactors:
//
//   - pods get a UID, a creation time on the engine's clock, the default
//     scheduler name, phase Pending, and their priority from their
//     PriorityClass (the Priority admission plugin);
//   - the binding subresource binds a pod, with the Binding's annotations,
//     and sets PodScheduled, as the apiserver's binding storage does, and
//     refuses a pod already bound;
//   - lists and watches of pods honour field selectors, as the
//     scheduler's informer of non-terminal pods needs: a pod that ends
//     leaves that watch as a deletion;
//   - ResourceClaims get a resource version on every write, which the
//     scheduler's assume cache of claims compares (versionClaim);
//   - discovery serves aisched's CRDs.
//
// Everything else is the fake's: no admission (no ResourceQuota, no
// defaulting beyond the above), no garbage collection, no graceful
// deletion. It counts writes, so that the engine can tell when the
// cluster is quiet.
type fakeAPI struct {
	core    *fake.Clientset
	aisched *aischedfake.Clientset
	clock   clock.PassiveClock
	// writes counts the creates, updates, patches and deletes.
	writes atomic.Int64
	// uids numbers pods: the same run gives the same UIDs.
	uids atomic.Uint64
	// claimVersions numbers the writes of ResourceClaims (versionClaim).
	claimVersions atomic.Int64
}

var podsResource = corev1.SchemeGroupVersion.WithResource("pods")

// watchBuffer is the event buffer of the fake's watches. client-go's fake
// watcher panics when its buffer fills, and its default of 100 events is
// less than a burst of node heartbeats on a large cluster.
const watchBuffer = 1 << 14

var setWatchBuffer sync.Once

func newFakeAPI(clk clock.PassiveClock) *fakeAPI {
	setWatchBuffer.Do(func() { watch.DefaultChanSize = watchBuffer })
	// The plain object tracker: NewClientset's field-managed one builds a
	// REST mapper on every write, a third of a trace replay's CPU; nothing
	// here applies or reads managed fields.
	core := fake.NewSimpleClientset()
	a := &fakeAPI{core: core, aisched: aischedfake.NewSimpleClientset(), clock: clk}
	tracker := a.core.Tracker()
	a.core.PrependReactor("create", "pods", a.createPod)
	a.core.PrependReactor("*", "resourceclaims", a.versionClaim)
	a.core.PrependReactor("list", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		sel := action.(k8stesting.ListActionImpl).GetListRestrictions().Fields
		if sel == nil || sel.Empty() {
			return false, nil, nil
		}
		obj, err := tracker.List(podsResource, corev1.SchemeGroupVersion.WithKind("Pod"), action.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		list := obj.(*corev1.PodList)
		kept := list.Items[:0]
		for _, p := range list.Items {
			if sel.Matches(podFields(&p)) {
				kept = append(kept, p)
			}
		}
		list.Items = kept
		return true, list, nil
	})
	a.core.PrependWatchReactor("pods", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w := action.(k8stesting.WatchActionImpl)
		sel := w.GetWatchRestrictions().Fields
		if sel == nil || sel.Empty() {
			return false, nil, nil
		}
		// What matches now is what the watcher's list held (it listed just
		// before), so that a change of one of those pods is passed on.
		listed, err := tracker.List(podsResource, corev1.SchemeGroupVersion.WithKind("Pod"), action.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		matching := map[string]*corev1.Pod{}
		for i, p := range listed.(*corev1.PodList).Items {
			if sel.Matches(podFields(&p)) {
				matching[p.Namespace+"/"+p.Name] = &listed.(*corev1.PodList).Items[i]
			}
		}
		in, err := tracker.Watch(podsResource, action.GetNamespace(), w.ListOptions)
		if err != nil {
			return true, nil, err
		}
		return true, newSelectingWatch(in, sel, matching), nil
	})
	count := func(action k8stesting.Action) (bool, runtime.Object, error) {
		switch action.GetVerb() {
		case "create", "update", "patch", "delete", "delete-collection":
			a.writes.Add(1)
		}
		return false, nil, nil
	}
	a.core.PrependReactor("*", "*", count)
	a.aisched.PrependReactor("*", "*", count)
	a.aisched.Resources = []*metav1.APIResourceList{
		{GroupVersion: aischedv1alpha1.SchemeGroupVersion.String(), APIResources: []metav1.APIResource{
			{Name: "gpuinventories", Kind: "GPUInventory"}, {Name: "nodemetrics", Kind: "NodeMetrics"}, {Name: "aischedqueues", Kind: "Queue"},
			{Name: "aischedtopologies", Kind: "Topology"},
		}},
		{GroupVersion: schedulingxv1alpha1.SchemeGroupVersion.String(), APIResources: []metav1.APIResource{
			{Name: "podgroups", Namespaced: true, Kind: "PodGroup"},
		}},
	}
	return a
}

// addAisched adds one of aisched's objects under the resource the
// generated clients use: the tracker's own guess from the kind would file
// a Queue under "queues", where the clients (which ask for
// "aischedqueues") never find it.
func (a *fakeAPI) addAisched(o runtime.Object) error {
	gvks, _, err := aischedscheme.Scheme.ObjectKinds(o)
	if err != nil {
		return err
	}
	for _, list := range a.aisched.Resources {
		for _, r := range list.APIResources {
			if r.Kind != gvks[0].Kind || list.GroupVersion != gvks[0].GroupVersion().String() {
				continue
			}
			gv, err := schema.ParseGroupVersion(list.GroupVersion)
			if err != nil {
				return err
			}
			m, err := meta.Accessor(o)
			if err != nil {
				return err
			}
			return a.aisched.Tracker().Create(gv.WithResource(r.Name), o, m.GetNamespace())
		}
	}
	return a.aisched.Tracker().Add(o)
}

// versionClaim gives a ResourceClaim written a resource version, higher
// than any before, as the apiserver does. The scheduler keeps the claims
// in an assume cache (DynamicResources' claim tracker): after writing an
// allocation it assumes the object its write returned, and takes an
// informer's update only when its version is newer (compared as
// integers). The fake's tracker stores objects with the version they were
// written with, so without this the cache kept a claim unallocated and
// gave its devices again.
func (a *fakeAPI) versionClaim(action k8stesting.Action) (bool, runtime.Object, error) {
	// The writer's object is not changed, as with the apiserver: a copy is
	// stored.
	switch act := action.(type) {
	case k8stesting.CreateActionImpl:
		act.Object = a.versioned(act.Object.DeepCopyObject())
		return k8stesting.ObjectReaction(a.core.Tracker())(act)
	case k8stesting.UpdateActionImpl:
		act.Object = a.versioned(act.Object.DeepCopyObject())
		return k8stesting.ObjectReaction(a.core.Tracker())(act)
	case k8stesting.PatchActionImpl:
		// The tracker applies the patch to the stored object; the result
		// is stored again with its new version.
		handled, obj, err := k8stesting.ObjectReaction(a.core.Tracker())(action)
		if !handled || err != nil {
			return handled, obj, err
		}
		if err := a.core.Tracker().Update(act.GetResource(), a.versioned(obj), act.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	}
	return false, nil, nil
}

// versioned gives obj the next claim resource version and returns it.
func (a *fakeAPI) versioned(obj runtime.Object) runtime.Object {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetResourceVersion(strconv.FormatInt(a.claimVersions.Add(1), 10))
	}
	return obj
}

// createPod creates a pod as the apiserver would (see fakeAPI), or binds
// one (the binding subresource).
func (a *fakeAPI) createPod(action k8stesting.Action) (bool, runtime.Object, error) {
	create := action.(k8stesting.CreateActionImpl)
	if create.GetSubresource() == "binding" {
		return a.bind(create)
	}
	if create.GetSubresource() != "" {
		return false, nil, nil
	}
	pod := create.GetObject().(*corev1.Pod).DeepCopy()
	ns := action.GetNamespace()
	pod.Namespace = ns
	if pod.Name == "" && pod.GenerateName != "" {
		pod.Name = pod.GenerateName + utilrand.String(5)
	}
	if pod.UID == "" {
		pod.UID = uuidFor(fmt.Sprint("pod/", a.uids.Add(1)))
	}
	pod.CreationTimestamp = metav1.NewTime(a.clock.Now())
	pod.Generation = 1
	if pod.Spec.SchedulerName == "" {
		pod.Spec.SchedulerName = corev1.DefaultSchedulerName
	}
	if pod.Status.Phase == "" {
		pod.Status.Phase = corev1.PodPending
	}
	if err := a.admitPriority(pod); err != nil {
		return true, nil, err
	}
	if err := a.core.Tracker().Create(podsResource, pod, ns); err != nil {
		return true, nil, err
	}
	return true, pod.DeepCopy(), nil
}

// admitPriority sets the pod's priority from its PriorityClass, or the
// global default one, as the Priority admission plugin does.
func (a *fakeAPI) admitPriority(pod *corev1.Pod) error {
	gvr := schedulingv1.SchemeGroupVersion.WithResource("priorityclasses")
	var class *schedulingv1.PriorityClass
	if name := pod.Spec.PriorityClassName; name != "" {
		obj, err := a.core.Tracker().Get(gvr, "", name)
		if err != nil {
			return apierrors.NewForbidden(podsResource.GroupResource(), pod.Name, fmt.Errorf("no PriorityClass with name %s was found", name))
		}
		class = obj.(*schedulingv1.PriorityClass)
	} else {
		obj, err := a.core.Tracker().List(gvr, schedulingv1.SchemeGroupVersion.WithKind("PriorityClass"), "")
		if err != nil {
			return err
		}
		for i, pc := range obj.(*schedulingv1.PriorityClassList).Items {
			if pc.GlobalDefault {
				class = &obj.(*schedulingv1.PriorityClassList).Items[i]
			}
		}
	}
	var value int32
	if class != nil {
		value = class.Value
		pod.Spec.PreemptionPolicy = class.PreemptionPolicy
	}
	pod.Spec.Priority = &value
	return nil
}

// bind assigns a pod to the Binding's node, as the apiserver's binding
// storage does.
func (a *fakeAPI) bind(create k8stesting.CreateActionImpl) (bool, runtime.Object, error) {
	binding := create.GetObject().(*corev1.Binding)
	ns := create.GetNamespace()
	obj, err := a.core.Tracker().Get(podsResource, ns, binding.Name)
	if err != nil {
		return true, nil, err
	}
	pod := obj.(*corev1.Pod).DeepCopy()
	switch {
	case binding.UID != "" && binding.UID != pod.UID:
		return true, nil, apierrors.NewConflict(podsResource.GroupResource(), pod.Name, fmt.Errorf("the UID in the binding (%s) does not match the pod's (%s)", binding.UID, pod.UID))
	case pod.Spec.NodeName != "":
		return true, nil, apierrors.NewConflict(podsResource.GroupResource(), pod.Name, fmt.Errorf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
	}
	pod.Spec.NodeName = binding.Target.Name
	for k, v := range binding.Annotations {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[k] = v
	}
	setCondition(&pod.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(a.clock.Now())})
	if err := a.core.Tracker().Update(podsResource, pod, ns); err != nil {
		return true, nil, err
	}
	return true, binding, nil
}

func setCondition(status *corev1.PodStatus, c corev1.PodCondition) {
	for i := range status.Conditions {
		if status.Conditions[i].Type == c.Type {
			status.Conditions[i] = c
			return
		}
	}
	status.Conditions = append(status.Conditions, c)
}

// podFields are the fields of a pod that field selectors read, as the
// apiserver's pod storage offers them.
func podFields(p *corev1.Pod) fields.Set {
	return fields.Set{
		"metadata.name":            p.Name,
		"metadata.namespace":       p.Namespace,
		"spec.nodeName":            p.Spec.NodeName,
		"spec.restartPolicy":       string(p.Spec.RestartPolicy),
		"spec.schedulerName":       p.Spec.SchedulerName,
		"spec.serviceAccountName":  p.Spec.ServiceAccountName,
		"spec.hostNetwork":         fmt.Sprint(p.Spec.HostNetwork),
		"status.phase":             string(p.Status.Phase),
		"status.podIP":             p.Status.PodIP,
		"status.nominatedNodeName": p.Status.NominatedNodeName,
	}
}

// selectingWatch passes on the events of the pods a field selector
// selects, as the apiserver's watch cache does: a pod that starts matching
// is added; one that stops matching is deleted from the watcher's view,
// with its content before the change (a pod that ended arrives at a
// scheduler, whose informer leaves ended pods out, as it was while running).
type selectingWatch struct {
	in   watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

// newSelectingWatch passes on in's events of the pods sel selects;
// matching are the pods that match when it starts, by namespace/name.
func newSelectingWatch(in watch.Interface, sel fields.Selector, matching map[string]*corev1.Pod) *selectingWatch {
	w := &selectingWatch{in: in, out: make(chan watch.Event, watchBuffer), stop: make(chan struct{})}
	go w.run(sel, matching)
	return w
}

func (w *selectingWatch) run(sel fields.Selector, matching map[string]*corev1.Pod) {
	defer close(w.out)
	for ev := range w.in.ResultChan() {
		pod, ok := ev.Object.(*corev1.Pod)
		if !ok {
			w.send(ev)
			continue
		}
		key := pod.Namespace + "/" + pod.Name
		prev, was := matching[key]
		is := sel.Matches(podFields(pod))
		switch {
		case ev.Type == watch.Deleted:
			delete(matching, key)
			if was {
				w.send(ev)
			}
		case is && was:
			matching[key] = pod
			w.send(watch.Event{Type: watch.Modified, Object: pod})
		case is:
			matching[key] = pod
			w.send(watch.Event{Type: watch.Added, Object: pod})
		case was:
			delete(matching, key)
			prev = prev.DeepCopy()
			prev.ResourceVersion = pod.ResourceVersion
			w.send(watch.Event{Type: watch.Deleted, Object: prev})
		}
	}
}

func (w *selectingWatch) send(ev watch.Event) {
	select {
	case w.out <- ev:
	case <-w.stop:
	}
}

// Stop implements watch.Interface.
func (w *selectingWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.in.Stop()
	})
}

// ResultChan implements watch.Interface.
func (w *selectingWatch) ResultChan() <-chan watch.Event { return w.out }

// uuidFor is a UID derived from name, the same in every run.
func uuidFor(name string) types.UID {
	return types.UID(uuid.NewSHA1(uidSpace, []byte(name)).String())
}

// uidSpace is the name space of the fast engine's UIDs.
var uidSpace = uuid.MustParse("3f1c5e0a-7a52-4bd1-9d3e-2b6f0c9e8a41")
