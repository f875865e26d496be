package dra

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
	"github.com/aisched/aisched/pkg/gpuledger"
)

func draCards(specs ...gpu.Card) []gpu.Card {
	for i := range specs {
		specs[i].Index = i
		specs[i].UUID = "GPU-" + string(rune('a'+i))
		if specs[i].Model == "" {
			specs[i].Model = "NVIDIA A100-SXM4-80GB"
		}
		if specs[i].ComputeCapability == 0 {
			specs[i].ComputeCapability = 8.0
		}
	}
	return specs
}

// fixture is a card ledger and its DRA ledger, for the tests that feed
// the one and read what the other counts.
type fixture struct {
	*gpuledger.State
	*Ledger
}

// draState is a ledger that has seen the driver's slices of node n1 and
// its device classes.
func draState(t *testing.T, cards []gpu.Card, o nvidiadra.Options) fixture {
	t.Helper()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ledger := gpuledger.NewStandalone(gpuledger.Options{})
	s := fixture{State: ledger, Ledger: New(ledger, "")}
	for _, c := range nvidiadra.DeviceClasses() {
		s.ObserveClass(c)
	}
	for _, sl := range nvidiadra.Slices("n1", cards, o) {
		s.ObserveSlice(sl)
	}
	s.ObserveNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	return s
}

func allocated(uid, name string, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: results}}},
	}
}

func result(device string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: nvidiadra.Driver, Pool: "n1", Device: device}
}

func TestDRACards(t *testing.T) {
	cards := draCards(gpu.Card{MemoryMiB: 40960, Model: "NVIDIA A100-SXM4-40GB", Healthy: true}, gpu.Card{MemoryMiB: 81920, Healthy: false})
	s := draState(t, cards, nvidiadra.Options{})
	got := s.Cards(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	if got.Len() != 2 {
		t.Fatalf("cards %+v, want 2", got)
	}
	want := []gpu.Card{
		{Index: 0, UUID: "GPU-a", Model: "NVIDIA A100-SXM4-40GB", MemoryMiB: 40960, ComputeCapability: 8, Healthy: true},
		// The xid taint marks the card unhealthy.
		{Index: 1, UUID: "GPU-b", Model: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920, ComputeCapability: 8, Healthy: false},
	}
	if diff := cmp.Diff(want, got.Cards, cmp.Comparer(func(a, b gpu.Card) bool {
		return a.Index == b.Index && a.UUID == b.UUID && a.Model == b.Model && a.MemoryMiB == b.MemoryMiB && a.ComputeCapability == b.ComputeCapability && a.Healthy == b.Healthy
	})); diff != "" {
		t.Errorf("cards (-want,+got):\n%s", diff)
	}
	// Another driver's slice and a slice deleted leave no cards.
	other := nvidiadra.Slices("n1", cards, nvidiadra.Options{})[0].DeepCopy()
	other.Name, other.Spec.Driver = "other", "nic.example.com"
	s.ObserveSlice(other)
	for _, sl := range nvidiadra.Slices("n1", cards, nvidiadra.Options{}) {
		s.ForgetSlice(sl)
	}
	if got := s.Cards(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}); got != nil {
		t.Errorf("cards after the slices were deleted: %+v", got.Cards)
	}
}

func TestDRAMIGParts(t *testing.T) {
	cards := draCards(gpu.Card{MemoryMiB: 81920, Healthy: true})
	for _, tc := range []struct {
		name    string
		opts    nvidiadra.Options
		device  string
		wantMem int64
		// wantPart is the device's part of its card.
		wantPart gpuledger.Share
	}{
		// Static MIG: the card is known by its MIG devices only; its
		// memory is theirs together (10+10+20 GiB), and a part is the
		// device's memory over the card's: 10/40 = 250 thousandths.
		{name: "static", opts: nvidiadra.Options{MIG: []string{"1g.10gb", "1g.10gb", "2g.20gb"}}, device: "gpu-0-mig-1g10gb-19-0",
			wantMem: 40960, wantPart: gpuledger.Share{Milli: 250, MemMiB: 10240}},
		// Dynamic MIG: the counter set gives the card's 98
		// multiprocessors; 1g takes 14 of them: 142 thousandths.
		{name: "dynamic", opts: nvidiadra.Options{DynamicMIG: true}, device: "gpu-0-mig-1g10gb-19-3",
			wantMem: 81920, wantPart: gpuledger.Share{Milli: 142, MemMiB: 10240}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := draState(t, cards, tc.opts)
			v, ok := s.View("n1")
			if !ok || v.Cards.Len() != 1 {
				t.Fatalf("view %+v, %v; want one card", v, ok)
			}
			if got := v.Cards.Cards[0].MemoryMiB; got != tc.wantMem {
				t.Errorf("card memory %d MiB, want %d", got, tc.wantMem)
			}
			d := v.Devices[DeviceRef{Pool: "n1", Device: tc.device}]
			if d == nil || !d.MIG || d.Card != 0 {
				t.Fatalf("device %s: %+v, want a MIG device of card 0", tc.device, d)
			}
			if d.Part != tc.wantPart {
				t.Errorf("part %+v, want %+v", d.Part, tc.wantPart)
			}
			// A claim on the MIG device holds its part of the card.
			s.ObserveClaim(allocated("c1", "mig", result(tc.device)))
			u := s.DRAUsage("n1")
			if !u.Used(0) || u.Whole(0) || u.HeldMilli(0) != tc.wantPart.Milli || u.HeldMemMiB(0) != tc.wantPart.MemMiB {
				t.Errorf("usage: used %v whole %v milli %d mem %d, want the part %+v", u.Used(0), u.Whole(0), u.HeldMilli(0), u.HeldMemMiB(0), tc.wantPart)
			}
		})
	}
}

// DRAUsage is what claims hold of a node's cards, for tests.
func (l *Ledger) DRAUsage(node string) gpuledger.Usage {
	v, _ := l.View(node)
	return v.Usage
}

func TestDRAHoldings(t *testing.T) {
	cards := draCards(gpu.Card{MemoryMiB: 40960, Healthy: true}, gpu.Card{MemoryMiB: 81920, Healthy: true})
	s := draState(t, cards, nvidiadra.Options{ConsumableShares: "1000"})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}

	// A share of card 1: 4 GiB and 250 of its 1000 shares.
	shared := result("gpu-1")
	shared.ShareID = ptr.To(types.UID("s1"))
	shared.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("4Gi"), "shares": resource.MustParse("250")}
	s.ObserveClaim(allocated("c1", "share", shared))
	// Card 0 whole, pending (the scheduler's Reserve).
	s.AssumeClaim("c2", "ns/whole", &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{result("gpu-0")}}})
	u := s.UsageOf("n1", nil, 0)
	if !u.Whole(0) || !u.Used(1) || u.Whole(1) || u.HeldMilli(1) != 250 || u.HeldMemMiB(1) != 4096 {
		t.Errorf("usage: card 0 whole %v; card 1 used %v whole %v milli %d mem %d; want card 0 whole, card 1 250/4096",
			u.Whole(0), u.Used(1), u.Whole(1), u.HeldMilli(1), u.HeldMemMiB(1))
	}
	if got := s.NodeGPUs(node, nil, 0).FreeMilli(); got != 750 {
		// Card 0 held whole, card 1 has 750 of 1000 left.
		t.Errorf("free %d thousandths, want 750", got)
	}
	holders := s.Holders("n1")
	if len(holders[0]) != 1 || !holders[0][0].Pending || holders[1][0].Claim != "ns/share" {
		t.Errorf("holders %+v", holders)
	}
	// The pending allocation is dropped at Unreserve; the share is dropped
	// once the claim is deallocated.
	s.ForgetAssumed("c2")
	dealloc := allocated("c1", "share")
	dealloc.Status.Allocation = nil
	s.ObserveClaim(dealloc)
	if u := s.UsageOf("n1", nil, 0); u.Count() != 0 {
		t.Errorf("usage after unreserve and deallocation holds %d cards, want none", u.Count())
	}
	// An allocation written replaces a pending one, and ForgetAssumed
	// leaves it.
	s.AssumeClaim("c3", "ns/c3", &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{result("gpu-0")}}})
	s.ObserveClaim(allocated("c3", "c3", result("gpu-0")))
	s.ForgetAssumed("c3")
	if u := s.UsageOf("n1", nil, 0); !u.Whole(0) {
		t.Error("an allocated claim was forgotten by ForgetAssumed")
	}
}

func TestDRADeviceOrder(t *testing.T) {
	// Cards: 0 is 80 GiB, 1 and 2 are 40 GiB, 3 is 40 GiB and unhealthy.
	cards := draCards(gpu.Card{MemoryMiB: 81920, Healthy: true}, gpu.Card{MemoryMiB: 40960, Healthy: true},
		gpu.Card{MemoryMiB: 40960, Healthy: true}, gpu.Card{MemoryMiB: 40960, Healthy: false})
	s := draState(t, cards, nvidiadra.Options{ConsumableShares: "memory"})
	order := func() []string {
		v, _ := s.View("n1")
		var devs []*Device
		for _, d := range v.Devices {
			devs = append(devs, d)
		}
		slices.SortFunc(devs, v.CompareDevices)
		var out []string
		for _, d := range devs {
			out = append(out, d.Device)
		}
		return out
	}
	// Free cards smallest first, the unhealthy one last.
	if diff := cmp.Diff([]string{"gpu-1", "gpu-2", "gpu-0", "gpu-3"}, order()); diff != "" {
		t.Errorf("order of free cards (-want,+got):\n%s", diff)
	}
	// A share on card 0 puts it first: the next share packs there.
	shared := result("gpu-0")
	shared.ShareID = ptr.To(types.UID("s1"))
	shared.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("8Gi")}
	s.ObserveClaim(allocated("c1", "share", shared))
	if diff := cmp.Diff([]string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}, order()); diff != "" {
		t.Errorf("order with a share on card 0 (-want,+got):\n%s", diff)
	}
}

func draPod(claims ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "p"}}
	for _, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
	}
	return p
}

func claimFor(name string, reqs ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs}}}
}

func exactly(name, class, expr string, count int64, capacity map[resourceapi.QualifiedName]resource.Quantity) resourceapi.DeviceRequest {
	e := &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	if expr != "" {
		e.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}
	}
	if capacity != nil {
		e.Capacity = &resourceapi.CapacityRequirements{Requests: capacity}
	}
	return resourceapi.DeviceRequest{Name: name, Exactly: e}
}

func TestDRARequestOf(t *testing.T) {
	cards := draCards(gpu.Card{MemoryMiB: 40960, Model: "NVIDIA A100-SXM4-40GB", Healthy: true}, gpu.Card{MemoryMiB: 81920, Healthy: true})
	mem := "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('50Gi')) >= 0"
	for _, tc := range []struct {
		name  string
		opts  nvidiadra.Options
		claim *resourceapi.ResourceClaim
		want  gpu.Request
	}{
		{name: "two whole GPUs", claim: claimFor("c", exactly("gpu", nvidiadra.GPUClass, "", 2, nil)),
			want: gpu.Request{Count: 2, MemoryMiB: 40960}},
		// Only the 80 GiB card has 50 GiB: its memory and model.
		{name: "memory selector", claim: claimFor("c", exactly("gpu", nvidiadra.GPUClass, mem, 1, nil)),
			want: gpu.Request{Count: 1, MemoryMiB: 81920, Models: []string{"nvidia-a100-sxm4-80gb"}}},
		// 250 of 1000 shares and 4 GiB.
		{name: "consumable share", opts: nvidiadra.Options{ConsumableShares: "1000"},
			claim: claimFor("c", exactly("gpu", nvidiadra.GPUClass, "", 1, map[resourceapi.QualifiedName]resource.Quantity{
				"shares": resource.MustParse("250"), "memory": resource.MustParse("4Gi")})),
			want: gpu.Request{Count: 1, Milli: 250, GPUMemMiB: 4096}},
		// The smallest MIG device the selector allows, 1g.5gb of the 40 GiB
		// card: 14 of its 98 multiprocessors, 5 GiB.
		{name: "MIG", opts: nvidiadra.Options{DynamicMIG: true},
			claim: claimFor("c", exactly("mig", nvidiadra.MIGClass, "device.attributes['gpu.nvidia.com'].profile.startsWith('1g')", 1, nil)),
			want:  gpu.Request{Count: 1, Milli: 142, GPUMemMiB: 5120}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := draState(t, cards, tc.opts)
			s.ObserveClaim(tc.claim)
			got, err := s.RequestOf(draPod("c"))
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tc.want) {
				t.Errorf("request %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDRANeverFits(t *testing.T) {
	cards := draCards(gpu.Card{MemoryMiB: 40960, Healthy: true}, gpu.Card{MemoryMiB: 81920, Healthy: true})
	s := draState(t, cards, nvidiadra.Options{})
	for _, tc := range []struct {
		name  string
		claim *resourceapi.ResourceClaim
		want  string
	}{
		{name: "fits on one shape", claim: claimFor("c", exactly("gpu", nvidiadra.GPUClass, "", 1, nil))},
		// The node's two cards are of two shapes: only together do they
		// hold the request.
		{name: "fits on two shapes", claim: claimFor("c", exactly("gpu", nvidiadra.GPUClass, "", 2, nil))},
		{name: "no device that large", claim: claimFor("c", exactly("big", nvidiadra.GPUClass,
			"device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('100Gi')) >= 0", 1, nil)),
			want: "claim ns/c, request big: no device of the cluster matches big (class gpu.nvidia.com and its selectors)"},
		{name: "more than a node has", claim: claimFor("c", exactly("many", nvidiadra.GPUClass, "", 3, nil)),
			want: "claim ns/c, request many: many asks for 3 devices; no node has more than 2 that match"},
		// A selector on the UUID is the allocator's to judge.
		{name: "per-device attribute", claim: claimFor("c", exactly("one", nvidiadra.GPUClass,
			"device.attributes['gpu.nvidia.com'].uuid == 'GPU-none'", 1, nil))},
		// MIG devices do not exist here: the class selects none of the
		// driver's devices, so the ledger does not judge it.
		{name: "no MIG in the cluster", claim: claimFor("c", exactly("mig", nvidiadra.MIGClass, "", 1, nil))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.ObserveClaim(tc.claim)
			got := s.NeverFits(draPod("c"))
			if got != tc.want {
				t.Errorf("NeverFits = %q, want %q", got, tc.want)
			}
			if tc.want != "" && !strings.Contains(got, "request") {
				t.Error("the message does not name the request")
			}
		})
	}
}

// ChangedSince names the nodes whose view changed after a generation,
// and says when it no longer knows them all.
func TestDRAChangedSince(t *testing.T) {
	s := draState(t, draCards(gpu.Card{MemoryMiB: 40960, Healthy: true}), nvidiadra.Options{})
	if nodes, _, ok := s.ChangedSince(0); !ok || !slices.Contains(nodes, "n1") {
		t.Errorf("since 0: %v, %v; want n1, whose slice came", nodes, ok)
	}
	_, g, _ := s.ChangedSince(0)
	if nodes, now, ok := s.ChangedSince(g); !ok || len(nodes) != 0 || now != g {
		t.Errorf("since now: %v, %d, %v; want nothing, %d", nodes, now, ok, g)
	}
	s.ObserveClaim(allocated("c1", "c1", result("gpu-0")))
	nodes, now, ok := s.ChangedSince(g)
	if !ok || !slices.Equal(nodes, []string{"n1"}) || now <= g {
		t.Errorf("after a claim on n1: %v, %d, %v; want n1 and a later generation than %d", nodes, now, ok, g)
	}
	// More changes than the ledger keeps: a reader at g must read again.
	for i := range maxChanges {
		s.ObserveClaim(allocated("c1", "c1", result(fmt.Sprintf("gpu-%d", i%2))))
	}
	if _, _, ok := s.ChangedSince(g); ok {
		t.Errorf("%d changes later: ok, want the reader told to read every node", maxChanges)
	}
	if _, _, ok := s.ChangedSince(now + 1<<40); ok {
		t.Errorf("a generation from the future: ok, want the reader told to read every node")
	}
}
