package agent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/generated/clientset/versioned"
)

// MetricsWriter writes samples to the status of one node's NodeMetrics,
// which it creates, with an empty spec, when there is none. In the steady
// state a sample costs one request: the status update of the object as last
// written. The agent uses one; the simulated nodes of `aisched up` one per
// node. A MetricsWriter is not safe for concurrent use.
type MetricsWriter struct {
	client versioned.Interface
	node   string
	// meta returns the metadata of a new object.
	meta func(ctx context.Context) metav1.ObjectMeta
	// last is the object as last written, whose resourceVersion the next
	// status update uses; nil when it must be read again.
	last *aischedv1alpha1.NodeMetrics
}

// NewMetricsWriter returns a writer of node's NodeMetrics; meta gives the
// metadata of the object when it must be created (name and owner).
func NewMetricsWriter(client versioned.Interface, node string, meta func(ctx context.Context) metav1.ObjectMeta) *MetricsWriter {
	return &MetricsWriter{client: client, node: node, meta: meta}
}

// Write publishes status. An object changed or deleted by someone else
// since the last write is read again, or created, and written once more.
func (w *MetricsWriter) Write(ctx context.Context, status aischedv1alpha1.NodeMetricsStatus) error {
	client := w.client.AischedV1alpha1().NodeMetrics()
	for retried := false; ; retried = true {
		if w.last == nil {
			nm, err := w.readOrCreate(ctx)
			if err != nil {
				return err
			}
			w.last = nm
		}
		nm := w.last.DeepCopy()
		nm.Status = status
		updated, err := client.UpdateStatus(ctx, nm, metav1.UpdateOptions{FieldManager: FieldManager})
		if err == nil {
			w.last = updated
			return nil
		}
		stale := apierrors.IsConflict(err) || apierrors.IsNotFound(err)
		if stale {
			// Someone else wrote or deleted the object since: read it
			// again, at once the first time.
			w.last = nil
		}
		if !stale || retried {
			return fmt.Errorf("updating the status of NodeMetrics %s: %w", w.node, err)
		}
	}
}

// readOrCreate returns the node's NodeMetrics, created when missing.
func (w *MetricsWriter) readOrCreate(ctx context.Context) (*aischedv1alpha1.NodeMetrics, error) {
	client := w.client.AischedV1alpha1().NodeMetrics()
	nm, err := client.Get(ctx, w.node, metav1.GetOptions{})
	if err == nil {
		return nm, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading NodeMetrics %s: %w", w.node, err)
	}
	nm, err = client.Create(ctx, &aischedv1alpha1.NodeMetrics{ObjectMeta: w.meta(ctx)}, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, fmt.Errorf("creating NodeMetrics %s: %w%s", w.node, err, crdHint(err))
	}
	return nm, nil
}

// OwnedByNode returns the metadata of a new object of the node: its name
// and, when the Node can be read (client may be nil), the Node as owner, so
// that the garbage collector deletes the object with the node. The
// reference does not block the owner's deletion, which would take
// permission to update the Node's finalizers.
func OwnedByNode(client kubernetes.Interface, node string) func(ctx context.Context) metav1.ObjectMeta {
	return func(ctx context.Context) metav1.ObjectMeta {
		meta := metav1.ObjectMeta{Name: node}
		if client == nil {
			return meta
		}
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			klog.FromContext(ctx).Info("Creating without an owner: the Node cannot be read", "node", node, "err", err)
			return meta
		}
		meta.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: corev1.SchemeGroupVersion.String(),
			Kind:       "Node",
			Name:       n.Name,
			UID:        n.UID,
		}}
		return meta
	}
}
