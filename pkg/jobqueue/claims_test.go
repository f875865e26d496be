package jobqueue

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
	"github.com/aisched/aisched/pkg/gpuledger"
	"github.com/aisched/aisched/pkg/gpuledger/dra"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// features are the allocator's features of kube-scheduler 1.37's defaults
// that the tests use.
var features = structured.Features{AdminAccess: true, PrioritizedList: true, PartitionableDevices: true, DeviceTaints: true, ConsumableCapacity: true}

// wholeOrHalf is the claim of kubernetes#138765 in NVIDIA's terms: a whole
// card preferred, else half of one (a 3g.40gb MIG partition).
func wholeOrHalf(name string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu",
			FirstAvailable: []resourceapi.DeviceSubRequest{
				{Name: "whole", DeviceClassName: nvidiadra.GPUClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
				{Name: "half", DeviceClassName: nvidiadra.MIGClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
					Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
						Expression: "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"}}}},
			},
		}}}},
	}
}

// gang is n pods of a gang on node n1, one claim each, and a dynamic-MIG
// card of 80 GiB.
func gang(t *testing.T, n int) (*utiltesting.FakeDRA, *dra.Ledger, []Demand, []Room, placement) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelHostname: "n1"}}}
	cards := []gpu.Card{{Index: 0, UUID: "GPU-0", Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 81920, ComputeCapability: 9, Healthy: true}}
	sl := nvidiadra.Slices("n1", cards, nvidiadra.Options{DynamicMIG: true})
	f := utiltesting.NewFakeDRA(sl, nvidiadra.DeviceClasses())
	ledger := gpuledger.NewStandalone(gpuledger.Options{})
	gpus := dra.New(ledger, "")
	for _, s := range sl {
		gpus.ObserveSlice(s)
	}
	ledger.ObserveNode(node)
	var demands []Demand
	at := newPlacement(n)
	for i := range n {
		c := wholeOrHalf(fmt.Sprintf("c%d", i))
		f.AddClaim(c)
		pod := utiltesting.MakePod(fmt.Sprintf("p%d", i), "ns").Req("cpu", "1").Obj()
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(c.Name)}}
		demands = append(demands, DemandOf(pod))
		at.at[i] = 0
	}
	room := Room{Node: node, Allocatable: Resources{MilliCPU: 64000, Memory: 1 << 40, Pods: 110}}
	room.Free = room.Allocatable.Sub(Resources{MilliCPU: int64(n) * 1000, Pods: int64(n)})
	return f, gpus, demands, []Room{room}, at
}

// TestFirstFitLosesTheGang is kubernetes#138765 with upstream's own
// allocator: claim by claim, the first member takes the whole card (its
// preferred subrequest) and the second finds nothing, though two halves
// would have fit both.
func TestFirstFitLosesTheGang(t *testing.T) {
	f, _, _, rooms, _ := gang(t, 2)
	ctx := context.Background()
	state, _ := f.ResourceClaims().GatherAllocatedState()
	for i, want := range []string{"gpu-0", ""} {
		alloc, err := structured.NewAllocator(ctx, features, *state, f.DeviceClasses(), f.Slices, cel.NewCache(10, cel.Features{EnableConsumableCapacity: true}))
		if err != nil {
			t.Fatal(err)
		}
		res, err := alloc.Allocate(ctx, rooms[0].Node, []*resourceapi.ResourceClaim{f.Claims[fmt.Sprintf("ns/c%d", i)]})
		var got string
		if err == nil && len(res) == 1 {
			got = res[0].Devices.Results[0].Device
			state.AllocatedDevices.Insert(structured.MakeDeviceID(nvidiadra.Driver, "n1", got))
		}
		if got != want {
			t.Errorf("member %d: first fit gave %q, want %q", i, got, want)
		}
	}
}

func TestSolveGangWhole(t *testing.T) {
	f, gpus, demands, rooms, at := gang(t, 2)
	s, err := NewClaimSolver(context.Background(), f, gpus, features)
	if err != nil {
		t.Fatal(err)
	}
	plans := map[types.UID]dra.ClaimPlan{}
	if ok, why := s.Solve(demands, rooms, at, plans); !ok {
		t.Fatalf("Solve: %s", why)
	}
	var got []string
	for _, d := range demands {
		p := plans[d.Pod.UID]
		if p.Node != "n1" || len(p.Devices) != 1 {
			t.Fatalf("plan of %s: %+v, want one device on n1", d.Pod.Name, p)
		}
		got = append(got, p.Devices[0].Device)
	}
	// Each gets half the card: the two 3g.40gb placements.
	slices.Sort(got)
	if want := []string{"gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4"}; !slices.Equal(got, want) {
		t.Errorf("devices %v, want %v", got, want)
	}
	// The pass counts them taken: a third member finds nothing.
	if !s.state.AllocatedDevices.Has(structured.MakeDeviceID(nvidiadra.Driver, "n1", got[0])) {
		t.Error("the solution's devices are not counted as taken for the rest of the pass")
	}
}

func TestSolveGangTooLarge(t *testing.T) {
	// Three members, two halves and one whole card to share out: no way.
	f, gpus, demands, rooms, at := gang(t, 3)
	s, err := NewClaimSolver(context.Background(), f, gpus, features)
	if err != nil {
		t.Fatal(err)
	}
	before := s.state.AllocatedDevices.Len()
	plans := map[types.UID]dra.ClaimPlan{}
	ok, why := s.Solve(demands, rooms, at, plans)
	if ok || why == "" {
		t.Fatalf("Solve = %v, %q; want a refusal that says why", ok, why)
	}
	if len(plans) != 0 || s.state.AllocatedDevices.Len() != before || rooms[0].Free.MilliCPU != 61000 {
		t.Errorf("a failed solve left plans %v, %d devices taken (was %d), free CPU %d", plans, s.state.AllocatedDevices.Len(), before, rooms[0].Free.MilliCPU)
	}
}

func TestSolveWaitsForClaims(t *testing.T) {
	f, gpus, demands, rooms, at := gang(t, 2)
	delete(f.Claims, "ns/c1")
	s, err := NewClaimSolver(context.Background(), f, gpus, features)
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := s.Solve(demands, rooms, at, map[types.UID]dra.ClaimPlan{}); ok || why != "claim ns/c1 of pod p1 is not created yet" {
		t.Errorf("Solve = %v, %q; want it to wait for claim c1", ok, why)
	}
}

func TestSolveLeavesAllToUpstream(t *testing.T) {
	f, gpus, demands, rooms, at := gang(t, 2)
	all := f.Claims["ns/c1"]
	all.Spec.Devices.Requests[0].FirstAvailable[0].AllocationMode = resourceapi.DeviceAllocationModeAll
	s, err := NewClaimSolver(context.Background(), f, gpus, features)
	if err != nil {
		t.Fatal(err)
	}
	plans := map[types.UID]dra.ClaimPlan{}
	if ok, why := s.Solve(demands, rooms, at, plans); !ok {
		t.Fatalf("Solve: %s", why)
	}
	if _, ok := plans[demands[1].Pod.UID]; ok || len(plans) != 1 {
		t.Errorf("plans %v: want one for p0 only, none for p1, whose claim asks for all devices", plans)
	}
}
