package gpuclaims

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
	"github.com/aisched/aisched/pkg/gpuledger"
	"github.com/aisched/aisched/pkg/gpuledger/dra"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// handle is the part of a framework handle upstream's plugin reads.
type handle struct {
	fwk.Handle
	dra     fwk.SharedDRAManager
	client  kubernetes.Interface
	factory informers.SharedInformerFactory
}

func (h *handle) SharedDRAManager() fwk.SharedDRAManager                 { return h.dra }
func (h *handle) SharedInformerFactory() informers.SharedInformerFactory { return h.factory }
func (h *handle) ClientSet() kubernetes.Interface                        { return h.client }
func (h *handle) ProfileName() string                                    { return "test" }

const node = "n1"

// cluster is one node n1 with the cards given, published by NVIDIA's
// driver with the options, the claims given, and a ledger that has seen
// them all.
func cluster(t *testing.T, cards []gpu.Card, o nvidiadra.Options, claims ...*resourceapi.ResourceClaim) (*utiltesting.FakeDRA, ledgers) {
	t.Helper()
	for i := range cards {
		cards[i].Index, cards[i].UUID, cards[i].Model = i, fmt.Sprintf("GPU-%d", i), "NVIDIA A100-SXM4-80GB"
	}
	slices := nvidiadra.Slices(node, cards, o)
	f := utiltesting.NewFakeDRA(slices, nvidiadra.DeviceClasses(), claims...)
	gpus := newLedgers()
	for _, c := range nvidiadra.DeviceClasses() {
		gpus.ObserveClass(c)
	}
	for _, s := range slices {
		gpus.ObserveSlice(s)
	}
	for _, c := range claims {
		gpus.ObserveClaim(c)
	}
	gpus.ObserveNode(nodeObj())
	return f, gpus
}

// ledgers are a card ledger and its DRA ledger, fed and read as one.
type ledgers struct {
	*gpuledger.State
	*dra.Ledger
}

func newLedgers() ledgers {
	cards := gpuledger.NewStandalone(gpuledger.Options{})
	return ledgers{State: cards, Ledger: dra.New(cards, "")}
}

func nodeObj() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{corev1.LabelHostname: node}}}
}

type planner map[string]dra.ClaimPlan

func (p planner) ClaimPlan(pod *corev1.Pod) (dra.ClaimPlan, bool) {
	plan, ok := p[pod.Name]
	return plan, ok
}

// newPlugin builds GPUClaims on the fake DRA manager; steer false builds
// upstream's plugin alone, for comparison.
func newPlugin(t *testing.T, f *utiltesting.FakeDRA, gpus ledgers, plans Planner, steer bool) fwk.Plugin {
	t.Helper()
	client := fake.NewClientset()
	h := &handle{dra: f, client: client, factory: informers.NewSharedInformerFactory(client, 0)}
	pl, err := New(context.Background(), nil, h, gpus.State, gpus.Ledger, plans)
	if err != nil {
		t.Fatal(err)
	}
	if !steer {
		return pl.(*GPUClaims).DynamicResources
	}
	return pl
}

// schedule runs the pod through PreFilter, Filter on n1 and Reserve, and
// returns the devices its claim got.
func schedule(t *testing.T, pl fwk.Plugin, f *utiltesting.FakeDRA, pod *corev1.Pod) (*fwk.PreFilterResult, []string, *fwk.Status) {
	t.Helper()
	ctx := context.Background()
	cs := framework.NewCycleState()
	res, status := pl.(fwk.PreFilterPlugin).PreFilter(ctx, cs, pod, nil)
	if !status.IsSuccess() {
		return res, nil, status
	}
	ni := framework.NewNodeInfo()
	ni.SetNode(nodeObj())
	if status := pl.(fwk.FilterPlugin).Filter(ctx, cs, pod, ni); !status.IsSuccess() {
		return res, nil, status
	}
	if status := pl.(fwk.ReservePlugin).Reserve(ctx, cs, pod, node); !status.IsSuccess() {
		return res, nil, status
	}
	var got []string
	for _, c := range f.Claims {
		if a := f.Pending[c.UID]; a != nil {
			for _, r := range a.Devices.Results {
				got = append(got, r.Device)
			}
		}
	}
	return res, got, nil
}

// claim is a claim with one request, defaulted as the apiserver does.
func claim(name string, e *resourceapi.ExactDeviceRequest) *resourceapi.ResourceClaim {
	e.AllocationMode, e.Count = resourceapi.DeviceAllocationModeExactCount, max(e.Count, 1)
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: e}}}}}
}

func podWith(name, claim string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
		Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}}}
}

func memoryAtLeast(q string) []resourceapi.DeviceSelector {
	return []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: fmt.Sprintf("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('%s')) >= 0", q)}}}
}

func TestChoice(t *testing.T) {
	// Cards 0: 80 GiB, 1 and 2: 40 GiB.
	cards := func() []gpu.Card {
		return []gpu.Card{{MemoryMiB: 81920, Healthy: true}, {MemoryMiB: 40960, Healthy: true}, {MemoryMiB: 40960, Healthy: true}}
	}
	share := func(uid, device, mem string) *resourceapi.ResourceClaim {
		c := claim(uid, &resourceapi.ExactDeviceRequest{DeviceClassName: nvidiadra.GPUClass})
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: nvidiadra.Driver, Pool: node, Device: device, ShareID: ptr.To(types.UID(uid + "-share")),
			ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(mem)}}}}}
		return c
	}
	for _, tc := range []struct {
		name   string
		opts   nvidiadra.Options
		claims []*resourceapi.ResourceClaim
		// wantUpstream is what DynamicResources alone gives: the first
		// device that fits, in slice order; want is GPUClaims' choice.
		wantUpstream, want string
	}{
		// 30 GiB fits every card: first fit takes the 80 GiB card, best
		// fit a 40 GiB one.
		{name: "memory selector", claims: []*resourceapi.ResourceClaim{
			claim("c", &resourceapi.ExactDeviceRequest{DeviceClassName: nvidiadra.GPUClass, Selectors: memoryAtLeast("30Gi")})},
			wantUpstream: "gpu-0", want: "gpu-1"},
		// 50 GiB fits only the 80 GiB card: both give it.
		{name: "only one fits", claims: []*resourceapi.ResourceClaim{
			claim("c", &resourceapi.ExactDeviceRequest{DeviceClassName: nvidiadra.GPUClass, Selectors: memoryAtLeast("50Gi")})},
			wantUpstream: "gpu-0", want: "gpu-0"},
		// A share of 4 GiB: card 2 is shared already, so it packs there;
		// first fit takes card 0.
		{name: "shares pack", opts: nvidiadra.Options{ConsumableShares: nvidiadra.SharingMemory}, claims: []*resourceapi.ResourceClaim{
			share("old", "gpu-2", "8Gi"),
			claim("c", &resourceapi.ExactDeviceRequest{DeviceClassName: nvidiadra.GPUClass,
				Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("4Gi")}}})},
			wantUpstream: "gpu-0", want: "gpu-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, steer := range []bool{false, true} {
				f, gpus := cluster(t, cards(), tc.opts, tc.claims...)
				_, got, status := schedule(t, newPlugin(t, f, gpus, nil, steer), f, podWith("p", "c"))
				if !status.IsSuccess() {
					t.Fatalf("steer %v: %v", steer, status)
				}
				want := tc.wantUpstream
				if steer {
					want = tc.want
				}
				if len(got) != 1 || got[0] != want {
					t.Errorf("steer %v: the claim got %v, want %s", steer, got, want)
				}
				if steer && f.Listed == 0 {
					t.Error("upstream's plugin did not list the slices through its handle's DRA manager")
				}
			}
		})
	}
}

func TestReserveRecordsInLedger(t *testing.T) {
	f, gpus := cluster(t, []gpu.Card{{MemoryMiB: 40960, Healthy: true}}, nvidiadra.Options{},
		claim("c", &resourceapi.ExactDeviceRequest{DeviceClassName: nvidiadra.GPUClass}))
	pl := newPlugin(t, f, gpus, nil, true)
	if _, _, status := schedule(t, pl, f, podWith("p", "c")); !status.IsSuccess() {
		t.Fatal(status)
	}
	if u := gpus.UsageOf(node, nil, 0); !u.Whole(0) {
		t.Error("the pending allocation is not in the ledger after Reserve")
	}
	pl.(fwk.ReservePlugin).Unreserve(context.Background(), framework.NewCycleState(), podWith("p", "c"), node)
	if u := gpus.UsageOf(node, nil, 0); u.Used(0) {
		t.Error("the pending allocation is still in the ledger after Unreserve")
	}
}

func TestPlan(t *testing.T) {
	cards := []gpu.Card{{MemoryMiB: 40960, Healthy: true}, {MemoryMiB: 40960, Healthy: true}, {MemoryMiB: 40960, Healthy: true}}
	f, gpus := cluster(t, cards, nvidiadra.Options{}, claim("c", &resourceapi.ExactDeviceRequest{DeviceClassName: nvidiadra.GPUClass}))
	plans := planner{"p": {Node: node, Devices: []dra.DeviceRef{{Pool: node, Device: "gpu-2"}}}}
	res, got, status := schedule(t, newPlugin(t, f, gpus, plans, true), f, podWith("p", "c"))
	if !status.IsSuccess() {
		t.Fatal(status)
	}
	if len(got) != 1 || got[0] != "gpu-2" {
		t.Errorf("the claim got %v, want the planned gpu-2 (best fit alone gives gpu-0)", got)
	}
	if res == nil || !res.NodeNames.Equal(sets.New(node)) {
		t.Errorf("PreFilter result %+v, want only the planned node", res)
	}
}

func TestNeverFits(t *testing.T) {
	f, gpus := cluster(t, []gpu.Card{{MemoryMiB: 40960, Healthy: true}}, nvidiadra.Options{},
		claim("c", &resourceapi.ExactDeviceRequest{DeviceClassName: nvidiadra.GPUClass, Selectors: memoryAtLeast("100Gi")}))
	_, _, status := schedule(t, newPlugin(t, f, gpus, nil, true), f, podWith("p", "c"))
	if status.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(status.Message(), "claim ns/c, request gpu") {
		t.Errorf("status %v, want UnschedulableAndUnresolvable naming claim ns/c and request gpu", status)
	}
}

// The steerer's cache of ordered slices keeps a slice's copy while its
// node's view is unchanged, orders it again when the view changes, and
// drops the copies of slices no longer
// listed (an updated slice is a new object) instead of growing.
func TestSteeredCache(t *testing.T) {
	// The smaller card goes first: the slice is reordered, a copy.
	f, gpus := cluster(t, []gpu.Card{{MemoryMiB: 81920}, {MemoryMiB: 40960}}, nvidiadra.Options{})
	s := newSteerer(gpus.Ledger, f)
	list := func() []*resourceapi.ResourceSlice {
		t.Helper()
		defer s.begin(podWith("p", "c"), nil)()
		out, err := s.ResourceSlices().ListWithDeviceTaintRules()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := list()
	if first[0] == f.Slices[0] {
		t.Fatalf("the slice is not reordered: %v", first[0].Spec.Devices)
	}
	if again := list(); again[0] != first[0] {
		t.Errorf("the same slice, its node unchanged: a new copy, want the cached one")
	}
	// A claim takes a card of the node: its slice is ordered again.
	taken := claim("c", &resourceapi.ExactDeviceRequest{DeviceClassName: nvidiadra.GPUClass})
	taken.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: nvidiadra.Driver, Pool: node, Device: "gpu-1"}}}}
	gpus.ObserveClaim(taken)
	if after := list(); after[0] == first[0] {
		t.Errorf("the node's view changed: the cached copy, want the slice ordered again")
	}
	for range 10 {
		for i, sl := range f.Slices {
			f.Slices[i] = sl.DeepCopy()
		}
		list()
		if n := len(s.ordered); n > 2*len(f.Slices)+1 {
			t.Fatalf("%d slices cached for %d listed, want at most twice as many", n, len(f.Slices))
		}
	}
}
