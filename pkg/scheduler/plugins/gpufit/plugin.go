// Package gpufit is the GPUFit plugin: it filters nodes by
// per-card GPU constraints (memory, CUDA cores, model) on top of the card
// count, and by the shares left on each card. It is the one owner of card
// choice: at Reserve it picks the concrete cards of a pod (best fit, or,
// for a share, the card the profile's card proposer such as FGD proposes
// when that card has room) and records them in the GPU ledger; it
// releases them at Unreserve and binds the pod with the cards in its
// gpu.aisched.io/assigned annotation, for the node's device layer to
// honour.
package gpufit

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
)

// Name is the plugin name in KubeSchedulerConfiguration.
const Name = "GPUFit"

const (
	preFilterStateKey = "PreFilter" + Name
	reserveStateKey   = "Reserve" + Name
)

// GPUFit filters nodes by per-card GPU constraints and assigns cards.
type GPUFit struct {
	handle fwk.Handle
	state  *gpuledger.State
	// scan is the nodes' cards as PreFilter last listed them.
	scan nodeScan
}

var (
	_ fwk.PreFilterPlugin   = &GPUFit{}
	_ fwk.FilterPlugin      = &GPUFit{}
	_ fwk.ReservePlugin     = &GPUFit{}
	_ fwk.BindPlugin        = &GPUFit{}
	_ fwk.EnqueueExtensions = &GPUFit{}
	_ fwk.SignPlugin        = &GPUFit{}
)

// New builds the plugin; state is the scheduler's GPU ledger, started.
func New(_ context.Context, obj runtime.Object, h fwk.Handle, state *gpuledger.State) (fwk.Plugin, error) {
	args := &config.GPUFitArgs{}
	if err := config.Decode(Name, obj, args); err != nil {
		return nil, err
	}
	return &GPUFit{handle: h, state: state}, nil
}

// Name implements fwk.Plugin.
func (pl *GPUFit) Name() string { return Name }

// SignPod implements fwk.SignPlugin. Feasibility depends on the pod only
// through its GPU request, and a card assignment on one node changes only
// that node's feasibility, which the scheduler checks again before it
// reuses a batched result. Pods with an invalid request are not batched.
func (pl *GPUFit) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	req, err := gpu.ParseRequest(pod)
	if err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	return []fwk.SignFragment{{Key: "aisched.io/" + Name, Value: req}}, nil
}

// EventsToRegister implements fwk.EnqueueExtensions: a pod rejected for
// lack of cards may fit when a GPU pod leaves, a node gains GPUs, an
// inventory changes, its own GPU request is corrected, or the node agent
// locates the cards of another scheduler's pod.
func (pl *GPUFit) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	events := []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: pl.afterPodDeleted},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel}, QueueingHintFn: pl.afterNodeChanged},
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.Update}, QueueingHintFn: pl.afterOwnUpdate},
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Update}, QueueingHintFn: pl.afterLocated},
	}
	if pl.state.InventoryServed() {
		// Any inventory change may add or heal cards; the hint would have to
		// decode the dynamic informer's unstructured objects to do better.
		events = append(events, fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: gpuledger.InventoryEvent, ActionType: fwk.Add | fwk.Update}})
	}
	return events, nil
}

func (pl *GPUFit) afterPodDeleted(logger klog.Logger, pod *corev1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	deleted, _, err := util.As[*corev1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if req, err := gpu.ParseRequest(deleted); err == nil && req.Count > 0 {
		logger.V(5).Info("GPU pod left, its cards may fit", "pod", klog.KObj(pod), "deleted", klog.KObj(deleted))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// afterLocated requeues a pod when the node agent locates the cards of a
// pod another scheduler placed: its node may no longer be Unlocated.
func (pl *GPUFit) afterLocated(logger klog.Logger, pod *corev1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	old, located, err := util.As[*corev1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if v, ok := located.Annotations[gpu.LocatedAnnotation]; ok && (old == nil || old.Annotations[gpu.LocatedAnnotation] != v) {
		logger.V(5).Info("The cards of a pod were located, its node may have room", "pod", klog.KObj(pod), "located", klog.KObj(located))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

func (pl *GPUFit) afterNodeChanged(_ klog.Logger, _ *corev1.Pod, _, newObj interface{}) (fwk.QueueingHint, error) {
	_, node, err := util.As[*corev1.Node](nil, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if pl.state.Cards(node).Len() > 0 {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

func (pl *GPUFit) afterOwnUpdate(_ klog.Logger, pod *corev1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	oldPod, newPod, err := util.As[*corev1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	oldReq, oldErr := gpu.ParseRequest(oldPod)
	newReq, newErr := gpu.ParseRequest(newPod)
	if (oldErr == nil) != (newErr == nil) || !oldReq.Equal(newReq) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}
