package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
)

// inventoryResync is how long the agent trusts its copy of the
// GPUInventory. An unchanged inventory costs no request per interval, and
// one that was deleted or edited by hand is written again within this time.
const inventoryResync = 5 * time.Minute

// publish writes the sample as the status of the node's NodeMetrics and,
// when it has one, its GPU inventory. A failure of one does not keep the
// other from being written; the error joins both.
func (a *Agent) publish(ctx context.Context, s sample) error {
	err := a.publishMetrics(ctx, s.status())
	if s.inventory != nil {
		err = errors.Join(err, a.publishInventory(ctx, s.inventory))
	}
	return err
}

// status is the NodeMetrics status of the sample.
func (s sample) status() aischedv1alpha1.NodeMetricsStatus {
	st := aischedv1alpha1.NodeMetricsStatus{
		SampleTime: metav1.NewTime(s.time),
		Window:     metav1.Duration{Duration: s.window},
		Source:     aischedv1alpha1.MetricsSourceAgent,
		Utilization: aischedv1alpha1.Utilization{
			CPU:     percent(s.util.CPU),
			Memory:  percent(s.util.Memory),
			Network: percent(s.util.Network),
			Disk:    percent(s.util.Disk),
		},
		Performance: aischedv1alpha1.Performance{
			Cores:           int32(s.perf.Cores),
			MaxFrequencyMHz: s.perf.MaxFrequencyMHz,
			NetworkMbps:     s.perf.NetworkMbps,
			DiskMBps:        s.diskMBps,
		},
	}
	if s.perf.MemoryBytes > 0 {
		st.Performance.Memory = resource.NewQuantity(s.perf.MemoryBytes, resource.BinarySI)
	}
	for _, c := range s.cards {
		st.GPUs = append(st.GPUs, aischedv1alpha1.GPUMetrics{Index: c.Index, Utilization: c.UtilizationPercent, MemoryUsedMiB: c.MemoryUsedMiB})
	}
	return st
}

// percent converts a fraction to a whole percent between 0 and 100; nil
// (unknown) stays nil.
func percent(f *float64) *int32 {
	if f == nil {
		return nil
	}
	p := int32(math.Round(min(max(*f, 0), 1) * 100))
	return &p
}

// publishMetrics writes status to the node's NodeMetrics, which it creates,
// with an empty spec, when there is none. In the steady state that is one
// request: the status update of the object as last written.
func (a *Agent) publishMetrics(ctx context.Context, status aischedv1alpha1.NodeMetricsStatus) error {
	client := a.opts.Client.AischedV1alpha1().NodeMetrics()
	for retried := false; ; retried = true {
		if a.nodeMetrics == nil {
			nm, err := a.readOrCreateMetrics(ctx)
			if err != nil {
				return err
			}
			a.nodeMetrics = nm
		}
		nm := a.nodeMetrics.DeepCopy()
		nm.Status = status
		updated, err := client.UpdateStatus(ctx, nm, metav1.UpdateOptions{FieldManager: FieldManager})
		if err == nil {
			a.nodeMetrics = updated
			return nil
		}
		stale := apierrors.IsConflict(err) || apierrors.IsNotFound(err)
		if stale {
			// Someone else wrote or deleted the object since: read it
			// again, at once the first time.
			a.nodeMetrics = nil
		}
		if !stale || retried {
			return fmt.Errorf("updating the status of NodeMetrics %s: %w", a.opts.NodeName, err)
		}
	}
}

// readOrCreateMetrics returns the node's NodeMetrics, created when missing.
func (a *Agent) readOrCreateMetrics(ctx context.Context) (*aischedv1alpha1.NodeMetrics, error) {
	client := a.opts.Client.AischedV1alpha1().NodeMetrics()
	nm, err := client.Get(ctx, a.opts.NodeName, metav1.GetOptions{})
	if err == nil {
		return nm, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading NodeMetrics %s: %w", a.opts.NodeName, err)
	}
	nm, err = client.Create(ctx, &aischedv1alpha1.NodeMetrics{ObjectMeta: a.objectMeta(ctx)}, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, fmt.Errorf("creating NodeMetrics %s: %w%s", a.opts.NodeName, err, crdHint(err))
	}
	return nm, nil
}

// crdHint explains the NotFound of a create, which means that the
// apiserver does not serve the resource.
func crdHint(err error) string {
	if apierrors.IsNotFound(err) {
		return " (are aisched's CRDs installed? kubectl apply -k deploy/crds)"
	}
	return ""
}

// publishInventory makes the node's GPUInventory list gpus. It writes only
// when they differ from what it last read or wrote, and reads again after
// inventoryResync.
func (a *Agent) publishInventory(ctx context.Context, gpus []aischedv1alpha1.GPU) error {
	now := a.opts.Clock.Now()
	if a.inventory != nil && now.Sub(a.inventoryRead) < inventoryResync && apiequality.Semantic.DeepEqual(a.inventory.Spec.GPUs, gpus) {
		return nil
	}
	a.inventory = nil
	client := a.opts.Client.AischedV1alpha1().GPUInventories()
	inv, err := client.Get(ctx, a.opts.NodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		inv = &aischedv1alpha1.GPUInventory{ObjectMeta: a.objectMeta(ctx), Spec: aischedv1alpha1.GPUInventorySpec{GPUs: gpus}}
		if inv, err = client.Create(ctx, inv, metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
			return fmt.Errorf("creating GPUInventory %s: %w%s", a.opts.NodeName, err, crdHint(err))
		}
	case err != nil:
		return fmt.Errorf("reading GPUInventory %s: %w", a.opts.NodeName, err)
	case !apiequality.Semantic.DeepEqual(inv.Spec.GPUs, gpus):
		inv = inv.DeepCopy()
		inv.Spec.GPUs = gpus
		if inv, err = client.Update(ctx, inv, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			return fmt.Errorf("updating GPUInventory %s: %w", a.opts.NodeName, err)
		}
	}
	a.inventory, a.inventoryRead = inv, now
	return nil
}

// objectMeta is the metadata of a new object of the node: its name and,
// when the Node can be read, the Node as owner, so that the garbage
// collector deletes the object with the node. The reference does not block
// the owner's deletion, which would take permission to update the Node's
// finalizers.
func (a *Agent) objectMeta(ctx context.Context) metav1.ObjectMeta {
	meta := metav1.ObjectMeta{Name: a.opts.NodeName}
	if a.opts.KubeClient == nil {
		return meta
	}
	node, err := a.opts.KubeClient.CoreV1().Nodes().Get(ctx, a.opts.NodeName, metav1.GetOptions{})
	if err != nil {
		klog.FromContext(ctx).Info("Creating without an owner: the Node cannot be read", "node", a.opts.NodeName, "err", err)
		return meta
	}
	meta.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: corev1.SchemeGroupVersion.String(),
		Kind:       "Node",
		Name:       node.Name,
		UID:        node.UID,
	}}
	return meta
}
