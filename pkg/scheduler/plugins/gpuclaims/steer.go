package gpuclaims

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpuledger"
)

// steerer is the view of the scheduler's DRA manager that upstream's
// DynamicResources is built with. Claims and classes are the scheduler's
// own; while GPUClaims' PreFilter runs for a pod (begin), its slice lister
// returns the GPU driver's slices with each slice's devices in the GPU
// ledger's order for the slice's node, and, for a gang member with a plan,
// the devices of its planned node other than its own left out. Upstream
// builds its allocator from this list in PreFilter; the allocator tries a
// slice's devices in order, so the first that fits a claim is aisched's
// choice, and everything it checks is checked. Outside PreFilter the
// lister returns the slices as they are.
type steerer struct {
	gpus  *gpuledger.State
	inner fwk.SharedDRAManager

	mu sync.Mutex
	// pod is set while the pod's PreFilter runs; plan is its gang plan.
	pod  *corev1.Pod
	plan *gpuledger.ClaimPlan
	// ordered caches the reordered copy of each slice at the generation
	// of its node's view, so that a slice is copied once per change of its
	// node, not once per pod.
	ordered map[*resourceapi.ResourceSlice]orderedSlice
}

type orderedSlice struct {
	gen   uint64
	slice *resourceapi.ResourceSlice
}

var _ fwk.SharedDRAManager = &steerer{}

func newSteerer(gpus *gpuledger.State, inner fwk.SharedDRAManager) *steerer {
	return &steerer{gpus: gpus, inner: inner, ordered: map[*resourceapi.ResourceSlice]orderedSlice{}}
}

// begin steers the slices for pod (and its gang plan, nil for none) until
// the function it returns is called.
func (s *steerer) begin(pod *corev1.Pod, plan *gpuledger.ClaimPlan) func() {
	s.mu.Lock()
	s.pod, s.plan = pod, plan
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.pod, s.plan = nil, nil
		s.mu.Unlock()
	}
}

// ResourceClaims implements fwk.SharedDRAManager: the scheduler's.
func (s *steerer) ResourceClaims() fwk.ResourceClaimTracker { return s.inner.ResourceClaims() }

// DeviceClasses implements fwk.SharedDRAManager: the scheduler's.
func (s *steerer) DeviceClasses() fwk.DeviceClassLister { return s.inner.DeviceClasses() }

// DeviceClassResolver implements fwk.SharedDRAManager: the scheduler's.
func (s *steerer) DeviceClassResolver() fwk.DeviceClassResolver { return s.inner.DeviceClassResolver() }

// ResourceSlices implements fwk.SharedDRAManager: the steering lister.
func (s *steerer) ResourceSlices() fwk.ResourceSliceLister { return sliceLister{s} }

type sliceLister struct{ s *steerer }

// ListWithDeviceTaintRules implements fwk.ResourceSliceLister.
func (l sliceLister) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	list, err := l.s.inner.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return nil, err
	}
	return l.s.steered(list), nil
}

// steered returns list with the GPU driver's slices replaced by their
// steered copies while a pod is being prefiltered.
func (s *steerer) steered(list []*resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pod == nil {
		return list
	}
	driver := s.gpus.DRADriver()
	out := make([]*resourceapi.ResourceSlice, len(list))
	kept := make(map[*resourceapi.ResourceSlice]orderedSlice, len(s.ordered))
	views := map[string]*gpuledger.DRAView{}
	var allocated sets.Set[structured.DeviceID]
	for i, sl := range list {
		out[i] = sl
		node := ptr.Deref(sl.Spec.NodeName, "")
		if sl.Spec.Driver != driver || node == "" || len(sl.Spec.Devices) == 0 {
			continue
		}
		v, seen := views[node]
		if !seen {
			if view, ok := s.gpus.DRA(node); ok {
				v = &view
			}
			views[node] = v
		}
		if v == nil {
			continue
		}
		if s.plan != nil && s.plan.Node == node {
			if allocated == nil {
				state, err := s.inner.ResourceClaims().GatherAllocatedState()
				if err != nil {
					// Unsteered, rather than risk hiding a device whose
					// counters the allocator must count.
					continue
				}
				allocated = gpuledger.AllocatedDevices(state)
			}
			out[i] = planned(sl, s.plan, allocated)
			continue
		}
		if c, ok := s.ordered[sl]; ok && c.gen == v.Gen {
			out[i] = c.slice
			kept[sl] = c
			continue
		}
		o := v.Ordered(sl)
		kept[sl] = orderedSlice{gen: v.Gen, slice: o}
		out[i] = o
	}
	// Slices no longer listed are dropped from the cache.
	s.ordered = kept
	return out
}

// planned returns the slice with only the devices of the plan, and those
// that hold an allocation (the allocator counts their counters from
// here).
func planned(sl *resourceapi.ResourceSlice, plan *gpuledger.ClaimPlan, allocated sets.Set[structured.DeviceID]) *resourceapi.ResourceSlice {
	keep := map[string]bool{}
	for _, ref := range plan.Devices {
		if ref.Pool == sl.Spec.Pool.Name {
			keep[ref.Device] = true
		}
	}
	return gpuledger.KeepDevices(sl, func(name string) bool {
		return keep[name] || allocated.Has(structured.MakeDeviceID(sl.Spec.Driver, sl.Spec.Pool.Name, name))
	})
}
