package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
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
	err := a.nodeMetrics.Write(ctx, s.status())
	if s.inventory == nil {
		return err
	}
	switch dra, draErr := a.draManaged(ctx); {
	case draErr != nil:
		// Not knowing, publish nothing: a card in both would be given twice.
		err = errors.Join(err, draErr)
	case dra:
		a.logChange(ctx, "dra", "The node's GPUs are published as DRA ResourceSlices; its GPUInventory is withdrawn", "driver", a.opts.DRADriver)
		err = errors.Join(err, a.withdrawInventory(ctx))
	default:
		if _, was := a.lastLogged["dra"]; was {
			delete(a.lastLogged, "dra")
			klog.FromContext(ctx).Info("The node's GPUs are no longer published as DRA ResourceSlices; publishing its GPUInventory", "driver", a.opts.DRADriver)
		}
		err = errors.Join(err, a.publishInventory(ctx, s.inventory))
	}
	return err
}

// draManaged reports whether Options.DRADriver publishes ResourceSlices of
// this node. A cluster that does not serve ResourceSlices, or does not let
// the agent list them, has none.
func (a *Agent) draManaged(ctx context.Context) (bool, error) {
	if a.opts.DRADriver == "" || a.opts.KubeClient == nil {
		return false, nil
	}
	selector := fields.Set{"spec.nodeName": a.opts.NodeName, "spec.driver": a.opts.DRADriver}.AsSelector().String()
	slices, err := a.opts.KubeClient.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: selector})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
		a.logChange(ctx, "dra-list", "Cannot list ResourceSlices; GPUs are taken as not managed by DRA", "err", err)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("listing the node's ResourceSlices of %s: %w", a.opts.DRADriver, err)
	}
	for _, rs := range slices.Items {
		if rs.Spec.Driver == a.opts.DRADriver && rs.Spec.NodeName != nil && *rs.Spec.NodeName == a.opts.NodeName {
			return true, nil
		}
	}
	return false, nil
}

// withdrawInventory deletes the node's GPUInventory, if any.
func (a *Agent) withdrawInventory(ctx context.Context) error {
	a.inventory = nil
	err := a.opts.Client.AischedV1alpha1().GPUInventories().Delete(ctx, a.opts.NodeName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("withdrawing GPUInventory %s: %w", a.opts.NodeName, err)
	}
	return nil
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

// crdHint explains the NotFound of a create, which means that the
// apiserver does not serve the resource.
func crdHint(err error) string {
	if apierrors.IsNotFound(err) {
		return " (are aisched's CRDs installed? helm install the chart charts/aisched, or run aisched crds)"
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

// objectMeta is the metadata of a new object of the node (OwnedByNode).
func (a *Agent) objectMeta(ctx context.Context) metav1.ObjectMeta {
	return OwnedByNode(a.opts.KubeClient, a.opts.NodeName)(ctx)
}
