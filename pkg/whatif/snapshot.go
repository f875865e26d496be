package whatif

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
)

// Snapshot is what whatif reads of a live cluster, with list and get
// calls only: nodes, the pods that have not ended, namespaces,
// ResourceQuotas (with the usage their controller counted), priority
// classes, and aisched's GPUInventories, NodeMetrics, PodGroups, team
// queues (aischedqueues, with the usage history their status keeps) and
// topologies (aischedtopologies) where their CRDs are served: with the
// namespaces' labels, the queues decide each pod's queue. Each list is
// consistent in itself; the lists are
// taken one after the other, so a pod that binds between two of them may
// be seen on the node list's state of a moment before.
type Snapshot struct {
	// Taken is when the snapshot was read.
	Taken time.Time
	// Core are Kubernetes' objects, Aisched aisched's.
	Core, Aisched []runtime.Object
	// Pods are the snapshot's pods, also in Core.
	Pods []*corev1.Pod
}

// Take reads a snapshot of the cluster.
func Take(ctx context.Context, client kubernetes.Interface, aisched versioned.Interface) (*Snapshot, error) {
	s := &Snapshot{Taken: time.Now()}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	for i := range nodes.Items {
		s.Core = append(s.Core, clean(&nodes.Items[i]))
	}
	notEnded := fields.AndSelectors(
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)))
	pods, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: notEnded.String()})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	for i := range pods.Items {
		p := clean(&pods.Items[i])
		s.Core = append(s.Core, p)
		s.Pods = append(s.Pods, p)
	}
	namespaces, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	for i := range namespaces.Items {
		s.Core = append(s.Core, clean(&namespaces.Items[i]))
	}
	quotas, err := client.CoreV1().ResourceQuotas(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list resourcequotas: %w", err)
	}
	for i := range quotas.Items {
		s.Core = append(s.Core, clean(&quotas.Items[i]))
	}
	classes, err := client.SchedulingV1().PriorityClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list priorityclasses: %w", err)
	}
	for i := range classes.Items {
		s.Core = append(s.Core, clean(&classes.Items[i]))
	}
	if err := s.takeAisched(ctx, aisched); err != nil {
		return nil, err
	}
	return s, nil
}

// takeAisched reads aisched's objects; a CRD that is not served has none.
func (s *Snapshot) takeAisched(ctx context.Context, aisched versioned.Interface) error {
	all := metav1.ListOptions{}
	for _, l := range []struct {
		what string
		list func() (runtime.Object, error)
	}{
		{"gpuinventories", func() (runtime.Object, error) { return aisched.AischedV1alpha1().GPUInventories().List(ctx, all) }},
		{"nodemetrics", func() (runtime.Object, error) { return aisched.AischedV1alpha1().NodeMetrics().List(ctx, all) }},
		{"podgroups", func() (runtime.Object, error) {
			return aisched.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).List(ctx, all)
		}},
		{"aischedtopologies", func() (runtime.Object, error) { return aisched.AischedV1alpha1().AischedTopologies().List(ctx, all) }},
		{"aischedqueues", func() (runtime.Object, error) { return aisched.AischedV1alpha1().AischedQueues().List(ctx, all) }},
	} {
		list, err := l.list()
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("list %s: %w", l.what, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return fmt.Errorf("list %s: %w", l.what, err)
		}
		for _, obj := range items {
			if m, ok := obj.(metav1.Object); ok {
				m.SetManagedFields(nil)
			}
			s.Aisched = append(s.Aisched, obj)
		}
	}
	return nil
}

// clean drops what the simulation has no use for (managed fields) from a
// listed object; the list's item is returned, not a copy.
func clean[T interface {
	runtime.Object
	SetManagedFields([]metav1.ManagedFieldsEntry)
}](obj T) T {
	obj.SetManagedFields(nil)
	return obj
}
