package nodesim

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
)

func draNode(o nvidiadra.Options) Node {
	cards := []gpu.Card{{Index: 0, UUID: "GPU-0", Model: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920, Healthy: true},
		{Index: 1, UUID: "GPU-1", Model: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920, Healthy: true}}
	return Node{Object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, Slices: nvidiadra.Slices("n1", cards, o)}
}

// claimOn is claim name, allocated the devices and reserved for pod.
func claimOn(name, pod string, devices ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod, UID: types.UID(pod)}}}}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: nvidiadra.Driver, Pool: "n1", Device: d})
	}
	return c
}

func shareOf(c *resourceapi.ResourceClaim, mem string) *resourceapi.ResourceClaim {
	r := &c.Status.Allocation.Devices.Results[0]
	r.ShareID = ptr.To(types.UID(c.Name + "-share"))
	r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(mem)}
	return c
}

func draPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)}}
}

func TestPrepareClaims(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts nvidiadra.Options
		// first is prepared for pod a, then second for pod b.
		first, second *resourceapi.ResourceClaim
		wantErr       string
	}{
		{name: "two cards", first: claimOn("c1", "a", "gpu-0"), second: claimOn("c2", "b", "gpu-1")},
		{name: "one card twice", first: claimOn("c1", "a", "gpu-0"), second: claimOn("c2", "b", "gpu-0"),
			wantErr: "device gpu-0 of node n1: given twice"},
		{name: "not reserved for the pod", first: claimOn("c1", "a", "gpu-0"), second: claimOn("c2", "x", "gpu-1"),
			wantErr: "claim ns/c2 is not reserved for the pod"},
		{name: "no such device", first: claimOn("c1", "a", "gpu-0"), second: claimOn("c2", "b", "gpu-7"),
			wantErr: "names device n1/gpu-7, which node n1 does not have"},
		// 40 + 30 GiB of an 80 GiB card are fine; 40 + 50 are not.
		{name: "shares within the card", opts: nvidiadra.Options{ConsumableShares: nvidiadra.SharingMemory},
			first: shareOf(claimOn("c1", "a", "gpu-0"), "40Gi"), second: shareOf(claimOn("c2", "b", "gpu-0"), "30Gi")},
		{name: "shares beyond the card", opts: nvidiadra.Options{ConsumableShares: nvidiadra.SharingMemory},
			first: shareOf(claimOn("c1", "a", "gpu-0"), "40Gi"), second: shareOf(claimOn("c2", "b", "gpu-0"), "50Gi"),
			wantErr: "given beyond its memory"},
		// 4g.40gb at 0 holds memory slices 0-3; 1g.10gb at 1 wants slice 1.
		{name: "overlapping MIG placements", opts: nvidiadra.Options{DynamicMIG: true},
			first: claimOn("c1", "a", "gpu-0-mig-4g40gb-5-0"), second: claimOn("c2", "b", "gpu-0-mig-1g10gb-19-1"),
			wantErr: "counter memory-slice-1 of gpu-0-counter-set"},
		{name: "MIG placements side by side", opts: nvidiadra.Options{DynamicMIG: true},
			first: claimOn("c1", "a", "gpu-0-mig-4g40gb-5-0"), second: claimOn("c2", "b", "gpu-0-mig-3g40gb-9-4")},
		// The card whole and one of its partitions.
		{name: "card and partition", opts: nvidiadra.Options{DynamicMIG: true},
			first: claimOn("c1", "a", "gpu-0"), second: claimOn("c2", "b", "gpu-0-mig-1g10gb-19-6"),
			wantErr: "counter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := draNode(tc.opts)
			p := newPrepared()
			if err := p.prepare(n, "ns/a", draPod("a"), []*resourceapi.ResourceClaim{tc.first}, false); err != nil {
				t.Fatalf("first claim: %v", err)
			}
			err := p.prepare(n, "ns/b", draPod("b"), []*resourceapi.ResourceClaim{tc.second}, false)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("second claim: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("second claim: %v, want an error with %q", err, tc.wantErr)
			}
			// Once pod a ends, its devices are free for b's claim.
			p.unprepare("ns/a")
			if tc.wantErr != "" && !strings.Contains(tc.wantErr, "reserved") && !strings.Contains(tc.wantErr, "does not have") {
				if err := p.prepare(n, "ns/b", draPod("b"), []*resourceapi.ResourceClaim{tc.second}, false); err != nil {
					t.Errorf("second claim after the first was released: %v", err)
				}
			}
		})
	}
}

func TestPreparedHolders(t *testing.T) {
	n := draNode(nvidiadra.Options{})
	p := newPrepared()
	shared := claimOn("c1", "a", "gpu-1")
	shared.Status.ReservedFor = append(shared.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: "b", UID: "b"})
	for _, pod := range []string{"a", "b"} {
		// One claim for two pods is prepared once.
		if err := p.prepare(n, "ns/"+pod, draPod(pod), []*resourceapi.ResourceClaim{shared}, false); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.Holders(); len(got) != 1 || got["n1/gpu-1"] != "ns/c1" {
		t.Errorf("holders %v, want n1/gpu-1 held by ns/c1", got)
	}
	p.unprepare("ns/a")
	if got := p.Holders(); got["n1/gpu-1"] != "ns/c1" {
		t.Errorf("holders after one of two pods ended: %v, want the claim still held", got)
	}
	p.unprepare("ns/b")
	if got := p.Holders(); len(got) != 0 {
		t.Errorf("holders after both pods ended: %v, want none", got)
	}
}
