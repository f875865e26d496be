package simcluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
)

// PodObserver watches a cluster's pods with one informer and records, at
// the cluster's time, what the runners above wait on and measure: when
// each pod was first seen bound, when it was first seen ended, and why
// the scheduler last left it pending. It is the one observer of pods of
// every harness: scenario runs measure from it, trace replays and whatif
// wait on it; the throughput benchmark measures from it too. A runner
// that follows each change in order (a scenario's teams, the evicted pods
// it replaces) is told of every one (PodEvent).
type PodObserver struct {
	client kubernetes.Interface
	now    func() time.Time
	stop   func()
	// notify, when not nil, is told of each change in the order seen.
	notify func(PodEvent)

	mu   sync.Mutex
	pods map[string]*PodState
	// last is when a pod was last seen bound, ended, or deleted while it
	// ran.
	last time.Time
	// changed is closed, and replaced, whenever a pod's state changes.
	changed chan struct{}
}

// PodState is what an observer saw of one pod.
type PodState struct {
	// Pod is the pod as last seen.
	Pod *corev1.Pod
	// Bound is when the pod was first seen bound to a node; zero until
	// then.
	Bound time.Time
	// Ended is when the pod was first seen Succeeded or Failed; zero
	// until then.
	Ended time.Time
	// Deleted is when the pod was seen deleted; zero until then.
	Deleted time.Time
}

// PodEvent is one change of a pod, as the observer saw it at the
// cluster's time.
type PodEvent struct {
	// Pod is the pod as it is now; for a pod deleted, its last state.
	Pod *corev1.Pod
	// At is the cluster's time of the change.
	At time.Time
	// Deleted says the pod was deleted.
	Deleted bool
}

// NotScheduled is the pod's PodScheduled=False condition as last seen: why
// the scheduler left it pending (Unschedulable, SchedulerError, or the job
// queue's reason); nil when the pod is bound or nothing said so.
func (s PodState) NotScheduled() *corev1.PodCondition {
	if s.Pod == nil {
		return nil
	}
	return NotScheduled(s.Pod)
}

// NotScheduled returns pod's PodScheduled=False condition, nil when it has
// none.
func NotScheduled(pod *corev1.Pod) *corev1.PodCondition {
	_, cond := podutil.GetPodCondition(&pod.Status, corev1.PodScheduled)
	if cond == nil || cond.Status != corev1.ConditionFalse {
		return nil
	}
	return cond
}

// ObservePods starts observing every pod of c at c's time, and returns
// once the observer has seen the pods c has now. notify, when not nil, is
// told of each change, one at a time in the order seen (from the
// informer's goroutine). Stop ends it.
func ObservePods(ctx context.Context, c Cluster, notify func(PodEvent)) (*PodObserver, error) {
	return observe(ctx, c.Client(), c.Now, notify)
}

// ObserveClient is ObservePods for any cluster client, with now its time:
// a real cluster's is time.Now.
func ObserveClient(ctx context.Context, client kubernetes.Interface, now func() time.Time) (*PodObserver, error) {
	return observe(ctx, client, now, nil)
}

func observe(ctx context.Context, client kubernetes.Interface, now func() time.Time, notify func(PodEvent)) (*PodObserver, error) {
	o := &PodObserver{client: client, now: now, notify: notify, pods: map[string]*PodState{}, changed: make(chan struct{})}
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Core().V1().Pods().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    o.observe,
		UpdateFunc: func(_, obj interface{}) { o.observe(obj) },
		DeleteFunc: o.deleted,
	}); err != nil {
		return nil, err
	}
	stopInformers := make(chan struct{})
	// Shutdown waits for the informers, which stop with their channel.
	o.stop = sync.OnceFunc(func() { close(stopInformers); factory.Shutdown() })
	factory.Start(stopInformers)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		o.Stop()
		return nil, fmt.Errorf("observing pods: %w", ctx.Err())
	}
	return o, nil
}

// Stop stops the observer's informer and waits for it.
func (o *PodObserver) Stop() { o.stop() }

func (o *PodObserver) observe(obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := o.now()
	key := pod.Namespace + "/" + pod.Name
	o.mu.Lock()
	s := o.state(key)
	s.Pod = pod
	if pod.Spec.NodeName != "" && s.Bound.IsZero() {
		s.Bound, o.last = now, now
	}
	// A pod that ends frees room: what waits may bind now.
	if (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) && s.Ended.IsZero() {
		s.Ended, o.last = now, now
	}
	o.changedLocked()
	o.mu.Unlock()
	if o.notify != nil {
		o.notify(PodEvent{Pod: pod, At: now})
	}
}

// deleted records a pod deleted; one bound and not ended frees room.
func (o *PodObserver) deleted(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := o.now()
	o.mu.Lock()
	s := o.state(pod.Namespace + "/" + pod.Name)
	s.Pod = pod
	if s.Deleted.IsZero() {
		s.Deleted = now
		if !s.Bound.IsZero() && s.Ended.IsZero() {
			o.last = now
		}
	}
	o.changedLocked()
	o.mu.Unlock()
	if o.notify != nil {
		o.notify(PodEvent{Pod: pod, At: now, Deleted: true})
	}
}

// state is the state of the pod key, made when new. Called with o.mu
// held.
func (o *PodObserver) state(key string) *PodState {
	s := o.pods[key]
	if s == nil {
		s = &PodState{}
		o.pods[key] = s
	}
	return s
}

// changedLocked wakes the waiters. Called with o.mu held.
func (o *PodObserver) changedLocked() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// Pod returns what the observer saw of the pod namespace/name; false when
// it saw nothing of it.
func (o *PodObserver) Pod(key string) (PodState, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.pods[key]
	if !ok {
		return PodState{}, false
	}
	return *s, true
}

// LastChange is when a pod was last seen bound, ended, or deleted while
// it ran; zero when none was.
func (o *PodObserver) LastChange() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last
}

// Wait returns the state of the pod key once done says it is done.
func (o *PodObserver) Wait(ctx context.Context, key string, done func(PodState) bool) (PodState, error) {
	for {
		o.mu.Lock()
		var s PodState
		p, seen := o.pods[key]
		if seen {
			s = *p
		}
		changed := o.changed
		o.mu.Unlock()
		if seen && done(s) {
			return s, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return PodState{}, fmt.Errorf("waiting for pod %s: %w", key, ctx.Err())
		}
	}
}

// Refresh reads the pods named (namespace/name) from the cluster and
// records them as if the informer had delivered them, for a reader that
// must see their state as of now rather than as the watch brings it:
// whatif, between steps of the fast engine's clock. Its states are
// Pod(key)'s from then on.
func (o *PodObserver) Refresh(ctx context.Context, keys ...string) error {
	for _, key := range keys {
		namespace, name, err := cache.SplitMetaNamespaceKey(key)
		if err != nil {
			return err
		}
		pod, err := o.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		o.observe(pod)
	}
	return nil
}
