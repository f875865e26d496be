package gpustate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/aisched/aisched/pkg/gpu"
)

// sharedPod is a bound pod that holds milli of one card.
func sharedPod(name string, milli string) *corev1.Pod {
	pod := st.MakePod().Name(name).UID(name).Node("n").Obj()
	pod.Annotations = map[string]string{gpu.MilliAnnotation: milli}
	return pod
}

func fourCards() []gpu.Card {
	cards := make([]gpu.Card, 4)
	for i := range cards {
		cards[i] = gpu.Card{Index: i, Model: "tesla-t4", MemoryMiB: 16384, Healthy: true}
	}
	return cards
}

func TestSharedUsage(t *testing.T) {
	s := NewStandalone()
	node := gpuNode("n", "4", nil)
	// Card 0: 600 + 400 = 1000, exactly full. Card 1: 300. Card 2: a
	// whole-card pod. Card 3: free.
	a, b, c := sharedPod("a", "600"), sharedPod("b", "400"), sharedPod("c", "300")
	whole := st.MakePod().Name("w").UID("w").Node("n").Req(map[corev1.ResourceName]string{gpu.ResourceName: "1"}).Obj()
	ni := framework.NewNodeInfo(a, b, c, whole)
	ni.SetNode(node)
	s.Assign("a", "n", []int{0}, 600)
	s.Assign("b", "n", []int{0}, 400)
	s.Assign("c", "n", []int{1}, 300)
	s.Assign("w", "n", []int{2}, 0)
	if !s.HasShared("n") || s.HasShared("m") {
		t.Errorf("HasShared: n %t, m %t; want true, false", s.HasShared("n"), s.HasShared("m"))
	}

	u := s.Usage(ni, "", 0)
	for i, want := range []int64{1000, 300, 1000, 0} {
		if got := u.HeldMilli(i); got != want {
			t.Errorf("card %d: held %d milli, want %d", i, got, want)
		}
	}
	// Free: 0 + 700 + 0 + 1000.
	if got := u.FreeMilli(fourCards()); got != 1700 {
		t.Errorf("FreeMilli = %d, want 1700", got)
	}
	for _, tc := range []struct {
		name        string
		r           gpu.Request
		wantFree    int64
		wantCard    int
		wantPicked  bool
		wantCapable int64
	}{
		// 700 fits card 1 (700 left) and card 3 (1000): best fit is card 1.
		{"share that fits the shared card", gpu.Request{Count: 1, Milli: 700}, 2, 1, true, 4},
		// 701 only fits the free card.
		{"share one milli too large for it", gpu.Request{Count: 1, Milli: 701}, 1, 3, true, 4},
		// A whole card: only card 3 is untouched.
		{"whole card", gpu.Request{Count: 1}, 1, 0, false, 4},
		{"model that no card is", gpu.Request{Count: 1, Milli: 100, Models: []string{"a100"}}, 0, 0, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			capable, free := u.Fit(fourCards(), tc.r)
			if capable != tc.wantCapable || free != tc.wantFree {
				t.Errorf("Fit = %d capable, %d free; want %d, %d", capable, free, tc.wantCapable, tc.wantFree)
			}
			if !tc.r.Shared() {
				return
			}
			card, ok := u.PickShared(fourCards(), tc.r)
			if ok != tc.wantPicked || card != tc.wantCard {
				t.Errorf("PickShared = card %d, %t; want %d, %t", card, ok, tc.wantCard, tc.wantPicked)
			}
		})
	}

	// Leaving out the pod being placed frees its share.
	if got := s.Usage(ni, "c", 0).HeldMilli(1); got != 0 {
		t.Errorf("card 1 without pod c: held %d, want 0", got)
	}
	// Releasing the last shares of the node clears HasShared.
	for _, uid := range []string{"a", "b", "c"} {
		s.Release(k8stypes.UID(uid), "")
	}
	if s.HasShared("n") {
		t.Error("HasShared after every share was released")
	}
}

// Ties in PickShared go to the lowest index, whatever the order of cards.
func TestPickSharedTies(t *testing.T) {
	cards := fourCards()
	cards[0], cards[3] = cards[3], cards[0]
	card, ok := Usage{}.PickShared(cards, gpu.Request{Count: 1, Milli: 500})
	if !ok || card != 0 {
		t.Errorf("PickShared on idle cards = %d, %t; want 0, true", card, ok)
	}
}

// After a restart the shares are rebuilt from the bound pods.
func TestObserveSharedPod(t *testing.T) {
	s := NewStandalone()
	pod := sharedPod("p", "250")
	pod.Annotations[gpu.AssignedAnnotation] = "3"
	s.ObservePod(pod)
	ni := framework.NewNodeInfo(pod)
	ni.SetNode(gpuNode("n", "4", nil))
	if got := s.Usage(ni, "", 0).HeldMilli(3); got != 250 {
		t.Errorf("rebuilt share of card 3: %d milli, want 250", got)
	}
	bad := sharedPod("q", "lots")
	bad.Annotations[gpu.AssignedAnnotation] = "1"
	s.ObservePod(bad)
	if _, _, ok := s.Held("q"); ok {
		t.Error("a pod with a malformed share was believed")
	}
	s.ForgetPod(pod)
	if s.HasShared("n") {
		t.Error("HasShared after the pod was deleted")
	}
}
