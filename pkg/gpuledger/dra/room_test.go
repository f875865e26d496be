package dra

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
)

// A node is short of a pod's claims only when a judged request cannot
// have its count of free devices of the shapes it selects.
func TestDRAShort(t *testing.T) {
	cards := draCards(gpu.Card{MemoryMiB: 40960, Healthy: true}, gpu.Card{MemoryMiB: 81920, Healthy: true})
	large := "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('50Gi')) >= 0"
	admin := exactly("gpu", nvidiadra.GPUClass, "", 1, nil)
	admin.Exactly.AdminAccess = ptr.To(true)
	for _, tc := range []struct {
		name  string
		opts  nvidiadra.Options
		req   resourceapi.DeviceRequest
		held  []string
		short bool
		// judged false: the need is zero, no node is ever short.
		unjudged bool
	}{
		{name: "one of two free", req: exactly("gpu", nvidiadra.GPUClass, "", 1, nil), held: []string{"gpu-1"}},
		{name: "none free", req: exactly("gpu", nvidiadra.GPUClass, "", 1, nil), held: []string{"gpu-0", "gpu-1"}, short: true},
		// Two devices of two shapes count together.
		{name: "two free of two shapes", req: exactly("gpu", nvidiadra.GPUClass, "", 2, nil)},
		{name: "two asked, one free", req: exactly("gpu", nvidiadra.GPUClass, "", 2, nil), held: []string{"gpu-0"}, short: true},
		// Only the 80 GiB card is selected: the free 40 GiB one does not count.
		{name: "the selected shape held", req: exactly("gpu", nvidiadra.GPUClass, large, 1, nil), held: []string{"gpu-1"}, short: true},
		// An admin may take a held device; a per-device selector, a
		// capacity request and all devices are the allocator's to judge.
		{name: "admin access", req: admin, held: []string{"gpu-0", "gpu-1"}, unjudged: true},
		{name: "per-device attribute", req: exactly("gpu", nvidiadra.GPUClass, "device.attributes['gpu.nvidia.com'].uuid == 'GPU-a'", 1, nil),
			held: []string{"gpu-0", "gpu-1"}, unjudged: true},
		{name: "capacity", opts: nvidiadra.Options{ConsumableShares: "1000"},
			req:  exactly("gpu", nvidiadra.GPUClass, "", 1, map[resourceapi.QualifiedName]resource.Quantity{"shares": resource.MustParse("250")}),
			held: []string{"gpu-0", "gpu-1"}, unjudged: true},
		// A device that takes several claims is never counted held.
		{name: "shareable devices", opts: nvidiadra.Options{ConsumableShares: "1000"}, req: exactly("gpu", nvidiadra.GPUClass, "", 1, nil),
			held: []string{"gpu-0", "gpu-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := draState(t, cards, tc.opts)
			for _, d := range tc.held {
				s.ObserveClaim(allocated("held-"+d, "held-"+d, result(d)))
			}
			s.ObserveClaim(claimFor("c", tc.req))
			need := s.NeedOf(draPod("c"))
			if need.IsZero() != tc.unjudged {
				t.Fatalf("need zero = %v, want %v", need.IsZero(), tc.unjudged)
			}
			if got := s.Short(need, "n1", nil); got != tc.short {
				t.Errorf("short = %v, want %v", got, tc.short)
			}
			// Counted against another account of the allocations, in
			// which nothing is held: never short.
			if s.Short(need, "n1", func(DeviceRef) bool { return false }) {
				t.Error("short with every device free")
			}
			// A node the driver publishes nothing of is short of every
			// judged request.
			if got := s.Short(need, "n2", nil); got == tc.unjudged {
				t.Errorf("node without devices short = %v, want %v", got, !tc.unjudged)
			}
		})
	}
}

// The need of a pod whose claims are allocated is zero, and two pods
// asking alike have the same key.
func TestDRANeedKey(t *testing.T) {
	s := draState(t, draCards(gpu.Card{MemoryMiB: 40960, Healthy: true}), nvidiadra.Options{})
	s.ObserveClaim(claimFor("a", exactly("gpu", nvidiadra.GPUClass, "", 1, nil)))
	s.ObserveClaim(claimFor("b", exactly("gpu", nvidiadra.GPUClass, "", 1, nil)))
	s.ObserveClaim(claimFor("two", exactly("gpu", nvidiadra.GPUClass, "", 2, nil)))
	a, b, two := s.NeedOf(draPod("a")), s.NeedOf(draPod("b")), s.NeedOf(draPod("two"))
	if a.Key() != b.Key() || a.Key() == two.Key() {
		t.Errorf("keys %q, %q, %q: want the first two equal, the third apart", a.Key(), b.Key(), two.Key())
	}
	s.ObserveClaim(allocated("a", "a", result("gpu-0")))
	if !s.NeedOf(draPod("a")).IsZero() {
		t.Error("an allocated claim still needs devices")
	}
}

// A node whose cards only a DRA driver publishes is a GPU node, though its
// allocatable shows none; a node without cards is not.
func TestGPUNodeDRA(t *testing.T) {
	s := draState(t, draCards(gpu.Card{MemoryMiB: 40960, Healthy: true}), nvidiadra.Options{})
	for _, tc := range []struct {
		node string
		want bool
	}{{"n1", true}, {"n2", false}} {
		ni := framework.NewNodeInfo()
		ni.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: tc.node}})
		if got := s.GPUNode(ni); got != tc.want {
			t.Errorf("GPUNode(%s) = %v, want %v", tc.node, got, tc.want)
		}
	}
}
