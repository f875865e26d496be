package gpuclaims

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpuledger/dra"
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
	devices *dra.Ledger
	inner   fwk.SharedDRAManager

	mu sync.Mutex
	// pod is set while the pod's PreFilter runs; plan is its gang plan.
	pod  *corev1.Pod
	plan *dra.ClaimPlan
	// Of the pod's listing: whether upstream listed the slices, the nodes
	// of the GPU driver's slices the ledger has not read as listed, and
	// whether the driver publishes a slice not local to one node.
	listed bool
	unsure sets.Set[string]
	remote bool
	// ordered caches what each slice listed is steered to (its
	// reordered copy, or itself), and byNode the slices cached of each
	// node, as of the ledger's generation gen: a pod's listing looks each
	// slice up, and only the slices of the nodes whose view changed since
	// are ordered again, so that a pod costs one lookup per slice, not a
	// reading of every slice and every node's view.
	ordered map[*resourceapi.ResourceSlice]orderedSlice
	byNode  map[string][]*resourceapi.ResourceSlice
	gen     uint64
}

// orderedSlice is what a slice of a node is steered to. node is set for
// the GPU driver's slices of one node with devices; current when the
// ledger's view of the node was built from this slice.
type orderedSlice struct {
	node    string
	slice   *resourceapi.ResourceSlice
	current bool
	remote  bool
}

var _ fwk.SharedDRAManager = &steerer{}

func newSteerer(devices *dra.Ledger, inner fwk.SharedDRAManager) *steerer {
	return &steerer{devices: devices, inner: inner}
}

// begin steers the slices for pod (and its gang plan, nil for none) until
// the function it returns is called.
func (s *steerer) begin(pod *corev1.Pod, plan *dra.ClaimPlan) func() {
	s.mu.Lock()
	s.pod, s.plan = pod, plan
	s.listed, s.unsure, s.remote = false, nil, false
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.pod, s.plan = nil, nil
		s.mu.Unlock()
	}
}

// listing returns, for the pod being prefiltered, the nodes of the GPU
// driver's slices the ledger has not read as upstream listed them; ok is
// false when upstream listed no slices, or the driver publishes a slice
// not local to one node (the ledger's counts do not cover it).
func (s *steerer) listing() (unsure sets.Set[string], ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unsure, s.listed && !s.remote
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
	s.update(len(list))
	s.listed = true
	out := make([]*resourceapi.ResourceSlice, len(list))
	var allocated sets.Set[structured.DeviceID]
	for i, sl := range list {
		o, ok := s.ordered[sl]
		if !ok {
			o = s.order(sl)
		}
		out[i] = o.slice
		s.remote = s.remote || o.remote
		if o.node != "" && !o.current {
			if s.unsure == nil {
				s.unsure = sets.New[string]()
			}
			s.unsure.Insert(o.node)
		}
		if s.plan == nil || o.node != s.plan.Node || o.node == "" {
			continue
		}
		if _, ok := s.devices.View(o.node); !ok {
			continue
		}
		if allocated == nil {
			state, err := s.inner.ResourceClaims().GatherAllocatedState()
			if err != nil {
				// Unsteered, rather than risk hiding a device whose
				// counters the allocator must count.
				out[i] = sl
				continue
			}
			allocated = dra.AllocatedDevices(state)
		}
		out[i] = planned(sl, s.plan, allocated)
	}
	return out
}

// update forgets what is cached of the nodes whose view changed since the
// last listing (of every node, when the ledger no longer knows which, or
// when the cache holds more than twice the listed slices: slices no longer
// listed, as an updated slice is a new object).
func (s *steerer) update(listed int) {
	changed, now, ok := s.devices.ChangedSince(s.gen)
	s.gen = now
	if !ok || s.ordered == nil || len(s.ordered) > 2*listed {
		s.ordered = map[*resourceapi.ResourceSlice]orderedSlice{}
		s.byNode = map[string][]*resourceapi.ResourceSlice{}
		return
	}
	for _, node := range changed {
		for _, sl := range s.byNode[node] {
			delete(s.ordered, sl)
		}
		delete(s.byNode, node)
	}
}

// order steers a slice: the GPU driver's devices of a node the ledger
// has a view of in its order for the node; any other slice as it is.
func (s *steerer) order(sl *resourceapi.ResourceSlice) orderedSlice {
	o := orderedSlice{slice: sl}
	node := ptr.Deref(sl.Spec.NodeName, "")
	ours := sl.Spec.Driver == s.devices.Driver()
	o.remote = ours && node == ""
	if ours && node != "" && len(sl.Spec.Devices) > 0 {
		o.node = node
		o.current = s.devices.SliceCurrent(sl)
		if v, ok := s.devices.View(node); ok {
			o.slice = v.Ordered(sl)
		}
	}
	s.ordered[sl] = o
	if o.node != "" {
		s.byNode[o.node] = append(s.byNode[o.node], sl)
	}
	return o
}

// planned returns the slice with only the devices of the plan, and those
// that hold an allocation (the allocator counts their counters from
// here).
func planned(sl *resourceapi.ResourceSlice, plan *dra.ClaimPlan, allocated sets.Set[structured.DeviceID]) *resourceapi.ResourceSlice {
	keep := map[string]bool{}
	for _, ref := range plan.Devices {
		if ref.Pool == sl.Spec.Pool.Name {
			keep[ref.Device] = true
		}
	}
	return dra.KeepDevices(sl, func(name string) bool {
		return keep[name] || allocated.Has(structured.MakeDeviceID(sl.Spec.Driver, sl.Spec.Pool.Name, name))
	})
}
