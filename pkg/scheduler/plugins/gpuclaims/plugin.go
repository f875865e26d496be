// Package gpuclaims is the GPUClaims plugin: upstream's DynamicResources
// plugin, with aisched choosing the GPU driver's devices. It builds
// upstream's plugin from upstream's constructor with the scheduler's
// feature gates, so that every extension point, every check of an
// allocation and every write of a claim is upstream's code; what it
// changes is what upstream's allocator chooses from, in PreFilter: the
// GPU driver's devices of each slice in the DRA ledger's order of
// preference for the node (best fit, card quality; package gpuledger/dra),
// and, for a member of a gang the job queue solved whole, only the devices
// the solution gave it. It also refuses a claim no device can ever meet,
// naming the claim and request, and records the scheduler's pending
// allocations in the DRA ledger. The mechanism, and why it and not
// another: docs/dra.md.
package gpuclaims

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/gpuledger"
	"github.com/aisched/aisched/pkg/gpuledger/dra"
)

// Name is the plugin name in KubeSchedulerConfiguration.
const Name = "GPUClaims"

// Planner gives the devices a gang's solution gave a member (the job
// queue); ok is false for a pod without one.
type Planner interface {
	ClaimPlan(pod *corev1.Pod) (plan dra.ClaimPlan, ok bool)
}

// GPUClaims is upstream's DynamicResources with aisched's device choice.
type GPUClaims struct {
	*dynamicresources.DynamicResources
	// gpus is the card ledger, devices the DRA ledger that reports to it.
	gpus    *gpuledger.State
	devices *dra.Ledger
	planner Planner
	// dra is the scheduler's DRA manager, steer the view of it upstream's
	// plugin is given.
	dra   fwk.SharedDRAManager
	steer *steerer
	// scan keeps the nodes the ledger counts short of each need (room.go);
	// narrow what narrows a cycle's nodes (narrow.go).
	scan   roomScan
	narrow narrowing
	handle fwk.Handle
}

var (
	_ fwk.PreEnqueuePlugin  = &GPUClaims{}
	_ fwk.PreFilterPlugin   = &GPUClaims{}
	_ fwk.FilterPlugin      = &GPUClaims{}
	_ fwk.PostFilterPlugin  = &GPUClaims{}
	_ fwk.ScorePlugin       = &GPUClaims{}
	_ fwk.ReservePlugin     = &GPUClaims{}
	_ fwk.PreBindPlugin     = &GPUClaims{}
	_ fwk.EnqueueExtensions = &GPUClaims{}
)

// New builds the plugin: upstream's DynamicResources, built with the
// scheduler's feature gates and a handle whose DRA manager is the
// steering view of the scheduler's. gpus is the scheduler's GPU ledger,
// started, devices its DRA ledger; planner gives gang members their
// devices (nil: none).
func New(ctx context.Context, obj runtime.Object, h fwk.Handle, gpus *gpuledger.State, devices *dra.Ledger, planner Planner) (fwk.Plugin, error) {
	args := &config.GPUClaimsArgs{}
	if err := config.Decode(Name, obj, args); err != nil {
		return nil, err
	}
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	pl := &GPUClaims{gpus: gpus, devices: devices, planner: planner, dra: h.SharedDRAManager(), handle: h}
	pl.narrow.empty = int(*args.EmptyNodesToTry)
	if p, ok := h.(interface{ PercentageOfNodesToScore() *int32 }); ok {
		pct := p.PercentageOfNodesToScore()
		pl.narrow.adaptive = pct != nil && *pct == 0
	}
	handle := h
	if pl.dra != nil {
		pl.steer = newSteerer(devices, pl.dra)
		handle = &steeredHandle{Handle: h, dra: pl.steer}
	}
	upstream, err := dynamicresources.New(ctx, upstreamArgs(args, fts), handle, fts)
	if err != nil {
		return nil, err
	}
	pl.DynamicResources = upstream.(*dynamicresources.DynamicResources)
	return pl, nil
}

// upstreamArgs are DynamicResources' arguments from GPUClaims', set only
// where the feature gates allow them (upstream's validation).
func upstreamArgs(a *config.GPUClaimsArgs, fts feature.Features) *schedconfig.DynamicResourcesArgs {
	out := &schedconfig.DynamicResourcesArgs{}
	if fts.EnableDRASchedulerFilterTimeout {
		out.FilterTimeout = &metav1.Duration{Duration: time.Duration(*a.FilterTimeoutSeconds) * time.Second}
	}
	if fts.EnableDRADeviceBindingConditions && fts.EnableDRAResourceClaimDeviceStatus {
		out.BindingTimeout = &metav1.Duration{Duration: time.Duration(*a.BindingTimeoutSeconds) * time.Second}
	}
	return out
}

// steeredHandle is the scheduler's handle with the steering DRA manager.
type steeredHandle struct {
	fwk.Handle
	dra fwk.SharedDRAManager
}

// SharedDRAManager implements fwk.Handle.
func (h *steeredHandle) SharedDRAManager() fwk.SharedDRAManager { return h.dra }

// Name implements fwk.Plugin.
func (pl *GPUClaims) Name() string { return Name }

// PreFilter is upstream's, run while the steering view orders the GPU
// driver's devices for this pod (and, for a gang member with a plan,
// shows only its devices); upstream builds its allocator from that view
// here. Once upstream found nothing to refuse, a claim that no device of
// the cluster can ever meet is refused, naming the claim and request; a
// gang member with a plan may go only to its planned node, and any other
// pod only to the nodes that may have room for its claims (room.go).
func (pl *GPUClaims) PreFilter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	var plan *dra.ClaimPlan
	if pl.planner != nil {
		if p, ok := pl.planner.ClaimPlan(pod); ok {
			plan = &p
		}
	}
	if pl.steer != nil {
		defer pl.steer.begin(pod, plan)()
	}
	res, status := pl.DynamicResources.PreFilter(ctx, cs, pod, nodes)
	if !status.IsSuccess() {
		return res, status
	}
	if why := pl.devices.NeverFits(pod); why != "" {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
	}
	if plan != nil {
		klog.FromContext(ctx).V(4).Info("Steering a gang member to its planned devices", "pod", klog.KObj(pod), "node", plan.Node, "devices", plan.Devices)
		planned := &fwk.PreFilterResult{NodeNames: sets.New(plan.Node)}
		return planned.Merge(res), status
	}
	if pl.steer == nil {
		return res, status
	}
	unsure, ok := pl.steer.listing()
	if !ok {
		return res, status
	}
	// Narrowing only where upstream's PreFilter left every node: a list
	// of its own (claims allocated already) may leave none of ours.
	room, rejected := pl.candidates(cs, pod, nodes, unsure, res.AllNodes())
	if rejected != nil {
		return nil, rejected
	}
	if res.AllNodes() {
		return room, status
	}
	return room.Merge(res), status
}

// Reserve is upstream's; the allocations it made pending are recorded in
// the DRA ledger, so that the pods ranked before its PreBind writes them
// count them, and a pod tried on every node is narrowed again next time.
func (pl *GPUClaims) Reserve(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodeName string) *fwk.Status {
	status := pl.DynamicResources.Reserve(ctx, cs, pod, nodeName)
	if !status.IsSuccess() || pl.dra == nil {
		return status
	}
	pl.narrow.forget(pod.UID)
	for _, c := range pl.claims(pod) {
		if a := pl.dra.ResourceClaims().GetPendingAllocation(c.UID); a != nil {
			pl.devices.AssumeClaim(c.UID, c.Namespace+"/"+c.Name, a)
		}
	}
	return status
}

// Unreserve is upstream's; the ledger forgets what Reserve recorded.
func (pl *GPUClaims) Unreserve(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodeName string) {
	pl.DynamicResources.Unreserve(ctx, cs, pod, nodeName)
	for _, c := range pl.claims(pod) {
		pl.devices.ForgetAssumed(c.UID)
	}
}

// claims are the pod's claims the DRA manager knows.
func (pl *GPUClaims) claims(pod *corev1.Pod) []*resourceapi.ResourceClaim {
	if pl.dra == nil {
		return nil
	}
	var out []*resourceapi.ResourceClaim
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			continue
		}
		if c, err := pl.dra.ResourceClaims().Get(pod.Namespace, *name); err == nil {
			out = append(out, c)
		}
	}
	return out
}
