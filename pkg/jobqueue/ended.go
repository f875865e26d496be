package jobqueue

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/aisched/aisched/pkg/podgroup"
)

// endedSelector selects the pods that ended: a pod's phase is Pending,
// Running, Succeeded, Failed or Unknown.
const endedSelector = "status.phase!=Pending,status.phase!=Running,status.phase!=Unknown"

// endedIndex indexes the ended pods by group.
const endedIndex = "aisched.io/ended-group"

// endedPods follows the pods that ended, which the scheduler's informers
// leave out: a pod that ends leaves them as a deletion carrying its state
// before it ended, so they cannot tell a member that succeeded from one
// deleted while running. A group's ended members count while their pods
// exist (a Job keeps them until its TTL), so a finished Job's group reads
// Finished with its counts, and a deleted one's counts go with its pods.
type endedPods struct {
	pods cache.Indexer
}

// startEndedPods starts the informer of ended pods; onChange is called on
// every change. Only what the counts read is kept of each pod.
func startEndedPods(ctx context.Context, client kubernetes.Interface, onChange func()) (*endedPods, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = endedSelector
	}))
	informer := factory.Core().V1().Pods().Informer()
	if err := informer.SetTransform(slimEnded); err != nil {
		return nil, fmt.Errorf("ended pods: %w", err)
	}
	if err := informer.AddIndexers(cache.Indexers{endedIndex: func(obj interface{}) ([]string, error) {
		if pod, ok := obj.(*corev1.Pod); ok {
			if key, ok := podgroup.KeyOf(pod); ok {
				return []string{key}, nil
			}
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("ended pods: %w", err)
	}
	changed := func(interface{}) { onChange() }
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj interface{}) { changed(obj) },
		DeleteFunc: changed,
	}); err != nil {
		return nil, fmt.Errorf("ended pods: %w", err)
	}
	factory.Start(ctx.Done())
	return &endedPods{pods: informer.GetIndexer()}, nil
}

// slimEnded keeps what podgroup.KeyOf and the counts read.
func slimEnded(obj interface{}) (interface{}, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			Labels: pod.Labels, Annotations: pod.Annotations},
		Spec:   corev1.PodSpec{SchedulingGroup: pod.Spec.SchedulingGroup},
		Status: corev1.PodStatus{Phase: pod.Status.Phase},
	}, nil
}

// counts returns the group's members that succeeded and failed.
func (e *endedPods) counts(key string) terminalCounts {
	var c terminalCounts
	if e == nil {
		return c
	}
	objs, _ := e.pods.ByIndex(endedIndex, key)
	for _, obj := range objs {
		switch obj.(*corev1.Pod).Status.Phase {
		case corev1.PodSucceeded:
			c.succeeded++
		case corev1.PodFailed:
			c.failed++
		}
	}
	return c
}
