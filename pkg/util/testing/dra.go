package testing

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
)

// FakeDRA is a DRA manager (fwk.SharedDRAManager) over fixed slices,
// classes and claims, which records pending allocations as the
// scheduler's does; Listed counts the slice listings.
type FakeDRA struct {
	Slices    []*resourceapi.ResourceSlice
	Classes   map[string]*resourceapi.DeviceClass
	Claims    map[string]*resourceapi.ResourceClaim
	Allocated structured.AllocatedState
	Pending   map[types.UID]*resourceapi.AllocationResult
	Listed    int
}

var _ fwk.SharedDRAManager = &FakeDRA{}

// NewFakeDRA returns a FakeDRA; the allocations of the claims count as
// allocated.
func NewFakeDRA(slices []*resourceapi.ResourceSlice, classes []*resourceapi.DeviceClass, claims ...*resourceapi.ResourceClaim) *FakeDRA {
	f := &FakeDRA{Slices: slices, Classes: map[string]*resourceapi.DeviceClass{}, Claims: map[string]*resourceapi.ResourceClaim{},
		Pending: map[types.UID]*resourceapi.AllocationResult{},
		Allocated: structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID](),
			AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}}
	for _, c := range classes {
		f.Classes[c.Name] = c
	}
	for _, c := range claims {
		f.AddClaim(c)
	}
	return f
}

// AddClaim adds a claim; its allocation, if any, counts as allocated.
func (f *FakeDRA) AddClaim(c *resourceapi.ResourceClaim) {
	f.Claims[c.Namespace+"/"+c.Name] = c
	if c.Status.Allocation == nil {
		return
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if r.ShareID == nil {
			f.Allocated.AllocatedDevices.Insert(id)
			continue
		}
		f.Allocated.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
		f.Allocated.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
	}
}

// ResourceClaims implements fwk.SharedDRAManager.
func (f *FakeDRA) ResourceClaims() fwk.ResourceClaimTracker { return fakeClaims{f} }

// ResourceSlices implements fwk.SharedDRAManager.
func (f *FakeDRA) ResourceSlices() fwk.ResourceSliceLister { return f }

// DeviceClasses implements fwk.SharedDRAManager.
func (f *FakeDRA) DeviceClasses() fwk.DeviceClassLister { return f }

// DeviceClassResolver implements fwk.SharedDRAManager: no class serves an
// extended resource.
func (f *FakeDRA) DeviceClassResolver() fwk.DeviceClassResolver { return f }

// GetDeviceClass implements fwk.DeviceClassResolver.
func (f *FakeDRA) GetDeviceClass(corev1.ResourceName) *resourceapi.DeviceClass { return nil }

// ListWithDeviceTaintRules implements fwk.ResourceSliceLister.
func (f *FakeDRA) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	f.Listed++
	return f.Slices, nil
}

// List implements fwk.DeviceClassLister.
func (f *FakeDRA) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, c := range f.Classes {
		out = append(out, c)
	}
	return out, nil
}

// Get implements fwk.DeviceClassLister.
func (f *FakeDRA) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := f.Classes[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("device class %s not found", name)
}

// fakeClaims is FakeDRA's fwk.ResourceClaimTracker.
type fakeClaims struct{ *FakeDRA }

func (t fakeClaims) List() ([]*resourceapi.ResourceClaim, error) {
	var out []*resourceapi.ResourceClaim
	for _, c := range t.Claims {
		out = append(out, c)
	}
	return out, nil
}

func (t fakeClaims) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	if c, ok := t.Claims[namespace+"/"+name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("claim %s/%s not found", namespace, name)
}

func (t fakeClaims) ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error) {
	return t.Allocated.AllocatedDevices.Clone(), nil
}

func (t fakeClaims) GatherAllocatedState() (*structured.AllocatedState, error) {
	s := structured.AllocatedState{AllocatedDevices: t.Allocated.AllocatedDevices.Clone(),
		AllocatedSharedDeviceIDs: t.Allocated.AllocatedSharedDeviceIDs.Clone(), AggregatedCapacity: t.Allocated.AggregatedCapacity.Clone()}
	return &s, nil
}

func (t fakeClaims) SignalClaimPendingAllocation(uid types.UID, claim *resourceapi.ResourceClaim) error {
	t.Pending[uid] = claim.Status.Allocation
	return nil
}

func (t fakeClaims) GetPendingAllocation(uid types.UID) *resourceapi.AllocationResult {
	return t.Pending[uid]
}

func (t fakeClaims) MaybeRemoveClaimPendingAllocation(uid types.UID, _ bool) bool {
	_, ok := t.Pending[uid]
	delete(t.Pending, uid)
	return ok
}

func (t fakeClaims) AssumeClaimAfterAPICall(*resourceapi.ResourceClaim) error { return nil }
func (t fakeClaims) AssumedClaimRestore(string, string)                       {}
