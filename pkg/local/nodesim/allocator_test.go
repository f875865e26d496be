package nodesim

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aisched/aisched/pkg/gpu"
)

func testNode(cidr string, cpu string, pods int64) *corev1.Node {
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:  resource.MustParse(cpu),
		corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Spec:       corev1.NodeSpec{PodCIDR: cidr},
		Status: corev1.NodeStatus{
			Allocatable: alloc,
			Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.16.0.1"}},
		},
	}
}

func TestAllocatorIPs(t *testing.T) {
	l := newAllocator()
	// A /30 has two usable addresses: .1 and .2.
	if err := l.addNode(testNode("10.0.0.0/30", "10", 10)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, key := range []string{"a", "b"} {
		ip, rej := l.admit(key, claim{uid: types.UID("uid-" + key), node: "n"}, false)
		if rej != nil {
			t.Fatalf("admit %s: %v", key, rej)
		}
		got = append(got, ip)
	}
	if diff := cmp.Diff([]string{"10.0.0.1", "10.0.0.2"}, got); diff != "" {
		t.Errorf("IPs (-want,+got):\n%s", diff)
	}
	if _, rej := l.admit("c", claim{uid: "uid-c", node: "n"}, false); rej == nil || rej.Reason != "PodIPsExhausted" {
		t.Errorf("third pod in a /30: %v, want PodIPsExhausted", rej)
	}
	l.release("a")
	if ip, rej := l.admit("c", claim{uid: "uid-c", node: "n"}, false); rej != nil || ip != "10.0.0.1" {
		t.Errorf("after release: ip %q, %v; want the freed 10.0.0.1", ip, rej)
	}
	// Asking for a taken address gives another; asking for a free one gives it.
	l.release("b")
	if ip, _ := l.admit("d", claim{uid: "uid-d", node: "n", ip: "10.0.0.1"}, true); ip != "10.0.0.2" {
		t.Errorf("want of a taken IP gave %q, want 10.0.0.2", ip)
	}
}

func TestAllocatorResources(t *testing.T) {
	l := newAllocator()
	if err := l.addNode(testNode("10.0.0.0/24", "4", 10)); err != nil {
		t.Fatal(err)
	}
	req := func(cpu string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
	if _, rej := l.admit("a", claim{uid: "1", node: "n", requests: req("3")}, false); rej != nil {
		t.Fatal(rej)
	}
	_, rej := l.admit("b", claim{uid: "2", node: "n", requests: req("1500m")}, false)
	want := &rejection{Reason: "OutOfcpu", Message: "Node didn't have enough resource: cpu, requested: 1500m, used: 3, capacity: 4"}
	if diff := cmp.Diff(want, rej); diff != "" {
		t.Errorf("rejection (-want,+got):\n%s", diff)
	}
	// Re-admitting the same key replaces its old claim instead of adding to it.
	if _, rej := l.admit("a", claim{uid: "1", node: "n", requests: req("4")}, false); rej != nil {
		t.Errorf("re-admit with 4 CPUs: %v, want success", rej)
	}
	// A resource the node does not have at all cannot be granted.
	_, rej = l.admit("c", claim{uid: "3", node: "n", requests: corev1.ResourceList{gpu.ResourceName: resource.MustParse("1")}}, false)
	if rej == nil || rej.Reason != "OutOfnvidia.com/gpu" {
		t.Errorf("GPU on a CPU node: %v, want OutOfnvidia.com/gpu", rej)
	}
}

func TestAllocatorCards(t *testing.T) {
	l := newAllocator()
	node := testNode("10.0.0.0/24", "64", 10)
	node.Status.Allocatable[gpu.ResourceName] = resource.MustParse("4")
	if err := l.addNode(node); err != nil {
		t.Fatal(err)
	}
	gpus := func(n string) corev1.ResourceList {
		return corev1.ResourceList{gpu.ResourceName: resource.MustParse(n)}
	}
	tests := []struct {
		name       string
		key        string
		claim      claim
		wantReason string
	}{
		{name: "assigned cards", key: "a", claim: claim{uid: "a", node: "n", requests: gpus("2"), cards: []int{2, 3}}},
		{name: "card taken", key: "b", claim: claim{uid: "b", node: "n", requests: gpus("1"), cards: []int{3}}, wantReason: "UnexpectedAdmissionError"},
		{name: "card out of range", key: "b", claim: claim{uid: "b", node: "n", requests: gpus("1"), cards: []int{4}}, wantReason: "UnexpectedAdmissionError"},
		{name: "count mismatch", key: "b", claim: claim{uid: "b", node: "n", requests: gpus("2"), cards: []int{0}}, wantReason: "UnexpectedAdmissionError"},
		// No annotation: the lowest free cards, 0 and 1.
		{name: "device plugin picks", key: "c", claim: claim{uid: "c", node: "n", requests: gpus("2")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, rej := l.admit(tc.key, tc.claim, false)
			switch {
			case tc.wantReason == "" && rej != nil:
				t.Fatalf("rejected: %v", rej)
			case tc.wantReason != "" && (rej == nil || rej.Reason != tc.wantReason):
				t.Fatalf("rejection %v, want %s", rej, tc.wantReason)
			}
		})
	}
	if diff := cmp.Diff(map[string]string{"n/0": "c", "n/1": "c", "n/2": "a", "n/3": "a"}, l.Holders()); diff != "" {
		t.Errorf("card holders (-want,+got):\n%s", diff)
	}
	l.release("a")
	if _, rej := l.admit("b", claim{uid: "b", node: "n", requests: gpus("1"), cards: []int{3}}, false); rej != nil {
		t.Errorf("card 3 after its holder left: %v", rej)
	}
}

// The allocator plays a sharing device layer: shares of cards up to their
// compute and memory, never beside a whole-card pod, a share of each of
// several cards on that many distinct cards.
func TestAllocatorShares(t *testing.T) {
	l := newAllocator()
	node := testNode("10.0.0.0/24", "64", 20)
	node.Status.Allocatable[gpu.ResourceName] = resource.MustParse("3")
	node.Labels = map[string]string{gpu.GFDMemoryLabel: "16384"}
	if err := l.addNode(node); err != nil {
		t.Fatal(err)
	}
	whole := corev1.ResourceList{gpu.ResourceName: resource.MustParse("1")}
	shared := func(uid string, sh share, cards ...int) claim {
		return claim{uid: types.UID(uid), node: "n", cards: cards, share: sh, shareCards: int64(len(cards))}
	}
	tests := []struct {
		name, key  string
		claim      claim
		wantReason string
	}{
		{name: "a share", key: "s1", claim: shared("s1", share{milli: 600, memMiB: 8192}, 0)},
		{name: "a second share that fits", key: "s2", claim: shared("s2", share{milli: 400, memMiB: 4096}, 0)},
		{name: "compute left short", key: "s3", claim: shared("s3", share{milli: 1}, 0), wantReason: "UnexpectedAdmissionError"},
		{name: "memory left short", key: "s3", claim: shared("s3", share{memMiB: 16385}, 1), wantReason: "UnexpectedAdmissionError"},
		{name: "a whole card on a shared one", key: "w", claim: claim{uid: "w", node: "n", requests: whole, cards: []int{0}}, wantReason: "UnexpectedAdmissionError"},
		{name: "a whole card", key: "w", claim: claim{uid: "w", node: "n", requests: whole, cards: []int{1}}},
		{name: "a share on a whole card", key: "s4", claim: shared("s4", share{milli: 100}, 1), wantReason: "UnexpectedAdmissionError"},
		{name: "a share of two cards, one held whole", key: "s5", claim: shared("s5", share{milli: 100}, 1, 2), wantReason: "UnexpectedAdmissionError"},
		{name: "a share of two cards bound to one", key: "s5", claim: claim{uid: "s5", node: "n", cards: []int{2}, share: share{milli: 100}, shareCards: 2}, wantReason: "UnexpectedAdmissionError"},
		{name: "a share of one card twice", key: "s5", claim: shared("s5", share{milli: 100}, 2, 2), wantReason: "UnexpectedAdmissionError"},
		// Card 0 has 4096 MiB left, card 2 all.
		{name: "a share of each of two cards", key: "s5", claim: shared("s5", share{memMiB: 2048}, 0, 2)},
		{name: "a share in percent without its MiB", key: "s6", claim: claim{uid: "s6", node: "n", cards: []int{2}, share: share{memMiB: 1}, shareCards: 1, badShare: "no MiB"},
			wantReason: "UnexpectedAdmissionError"},
		// Placed by a scheduler that does not share cards: no card.
		{name: "a share with no card named", key: "s6", claim: claim{uid: "s6", node: "n", share: share{milli: 100}, shareCards: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, rej := l.admit(tc.key, tc.claim, false)
			switch {
			case tc.wantReason == "" && rej != nil:
				t.Fatalf("rejected: %v", rej)
			case tc.wantReason != "" && (rej == nil || rej.Reason != tc.wantReason):
				t.Fatalf("rejection %v, want %s", rej, tc.wantReason)
			}
		})
	}
	want := map[string]string{"n/0": "s1@600/8192,s2@400/4096,s5@0/2048", "n/1": "w", "n/2": "s5@0/2048"}
	if diff := cmp.Diff(want, l.Holders()); diff != "" {
		t.Errorf("holders (-want,+got):\n%s", diff)
	}
	l.release("s1")
	if _, rej := l.admit("s3", claim{uid: "s3", node: "n", cards: []int{0}, share: share{milli: 600}, shareCards: 1}, false); rej != nil {
		t.Errorf("a share after another left: %v", rej)
	}
}
