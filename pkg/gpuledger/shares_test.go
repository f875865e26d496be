package gpuledger

import (
	"slices"
	"strconv"
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
	s := NewStandalone(Options{})
	node := gpuNode("n", "4", nil)
	// Card 0: 600 + 400 = 1000, exactly full. Card 1: 300. Card 2: a
	// whole-card pod. Card 3: free.
	a, b, c := sharedPod("a", "600"), sharedPod("b", "400"), sharedPod("c", "300")
	whole := st.MakePod().Name("w").UID("w").Node("n").Req(map[corev1.ResourceName]string{gpu.ResourceName: "1"}).Obj()
	ni := framework.NewNodeInfo(a, b, c, whole)
	ni.SetNode(node)
	s.Assign("a", "n", []int{0}, Share{Milli: 600})
	s.Assign("b", "n", []int{0}, Share{Milli: 400})
	s.Assign("c", "n", []int{1}, Share{Milli: 300})
	s.Assign("w", "n", []int{2}, Share{})
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
			card, ok := pickOne(u, fourCards(), tc.r)
			if ok != tc.wantPicked || card != tc.wantCard {
				t.Errorf("PickShares = card %d, %t; want %d, %t", card, ok, tc.wantCard, tc.wantPicked)
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

// pickOne is PickShares of a share of one card: the card, or ok false.
func pickOne(u Usage, cards []gpu.Card, r gpu.Request) (card int, ok bool) {
	picked, ok := u.PickShares(cards, r, nil)
	if !ok || len(picked) != 1 {
		return 0, false
	}
	return picked[0], true
}

// Ties in PickShares go to the lowest index, whatever the order of cards.
func TestPickSharesTies(t *testing.T) {
	cards := fourCards()
	cards[0], cards[3] = cards[3], cards[0]
	card, ok := pickOne(Usage{}, cards, gpu.Request{Count: 1, Milli: 500})
	if !ok || card != 0 {
		t.Errorf("PickShares on idle cards = %d, %t; want 0, true", card, ok)
	}
}

// A share of each of several cards goes on that many distinct cards, each
// with room for it, the fullest first (best fit); the ledger counts the
// share on each, and a restarted ledger reads the same from the pod.
func TestMultiCardShares(t *testing.T) {
	s := NewStandalone(Options{})
	// Card 0: 600 held. Card 1: 300 held. Card 2: whole. Card 3: free.
	pods := []*corev1.Pod{memPod("a", "600", ""), memPod("b", "300", "")}
	whole := st.MakePod().Name("w").UID("w").Node("n").Req(map[corev1.ResourceName]string{gpu.ResourceName: "1"}).Obj()
	whole.Annotations = map[string]string{gpu.AssignedAnnotation: "2"}
	for i, p := range pods {
		p.Annotations[gpu.AssignedAnnotation] = strconv.Itoa(i)
		s.ObservePod(p)
	}
	s.ObservePod(whole)
	ni := framework.NewNodeInfo(append(pods, whole)...)
	ni.SetNode(gpuNode("n", "4", nil))
	u := s.Usage(ni, "", 0)
	cards := fourCards()
	for _, tc := range []struct {
		name       string
		r          gpu.Request
		wantFree   int64
		wantPicked []int
	}{
		// 400 of each of two: card 0 (400 left), card 1 (700), card 3
		// (1000) have room; the two fullest are 0 and 1.
		{"two cards", gpu.Request{Count: 2, Milli: 400}, 3, []int{0, 1}},
		// 401 of each: card 0 is out; 1 and 3.
		{"two cards, one milli more", gpu.Request{Count: 2, Milli: 401}, 2, []int{1, 3}},
		// Three cards of 401: only two have room.
		{"three cards", gpu.Request{Count: 3, Milli: 401}, 2, nil},
		// Memory alone on three cards: 0, 1 and 3 (card 2 is whole).
		{"memory of three cards", gpu.Request{Count: 3, GPUMemMiB: 1000}, 3, []int{0, 1, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, free := u.Fit(cards, tc.r); free != tc.wantFree {
				t.Errorf("Fit: %d free, want %d", free, tc.wantFree)
			}
			picked, ok := u.Pick(cards, tc.r, nil)
			if ok != (tc.wantPicked != nil) || !slices.Equal(picked, tc.wantPicked) {
				t.Errorf("Pick = %v, %t; want %v", picked, ok, tc.wantPicked)
			}
			n := NodeGPUs{Cards: gpu.NewSet(cards), Usage: u}
			if got := n.Fits(tc.r); got != (tc.wantPicked != nil) {
				t.Errorf("NodeGPUs.Fits = %t, want %t", got, tc.wantPicked != nil)
			}
		})
	}

	// HAMi's default_use: two cards, 3000 MiB and 30% of each, bound to
	// cards 1 and 3, read back as a restarted ledger reads it.
	hami := st.MakePod().Name("h").UID("h").Node("n").
		Req(map[corev1.ResourceName]string{gpu.ResourceName: "2", gpu.HAMiGPUMemResource: "3000", gpu.HAMiGPUCoresResource: "30"}).Obj()
	hami.Annotations = map[string]string{gpu.AssignedAnnotation: "1,3"}
	cardsHeld, share, ok := HoldingOf(hami)
	if !ok || !slices.Equal(cardsHeld, []int{1, 3}) || share != (Share{Milli: 300, MemMiB: 3000}) {
		t.Fatalf("HoldingOf = %v, %+v, %t; want [1 3], {300 3000}, true", cardsHeld, share, ok)
	}
	s.ObservePod(hami)
	ni.AddPod(hami)
	u = s.Usage(ni, "", 0)
	// Its two nvidia.com/gpu are the shared cards, not two cards of
	// unknown pods: cards 0, 1 and 3 have 400 left, 400, 700.
	if u.Unknown != 0 {
		t.Errorf("Unknown = %d with HAMi's form bound, want 0", u.Unknown)
	}
	if _, free := u.Fit(cards, gpu.Request{Count: 3, Milli: 400}); free != 3 {
		t.Errorf("Fit of 400 of three cards beside it: %d free, want 3", free)
	}
	// Card 1: 300 + 300; card 3: 300. Each holds 3000 MiB of hami's.
	for i, want := range map[int]int64{1: 600, 3: 300} {
		if got := u.HeldMilli(i); got != want {
			t.Errorf("card %d: held %d milli, want %d", i, got, want)
		}
		if got := u.HeldMemMiB(i); got != 3000 {
			t.Errorf("card %d: held %d MiB, want 3000", i, got)
		}
	}
	// A record of another number of cards than the pod asks for is no
	// aisched profile's: not believed.
	hami.Annotations[gpu.AssignedAnnotation] = "1"
	if _, _, ok := HoldingOf(hami); ok {
		t.Error("a two-card share bound to one card was believed")
	}
}

// A share of memory in percent is that percent of each chosen card: on
// mixed cards the MiB differ, and on several cards it takes cards of one
// size. The MiB recorded beside the cards is what a restarted ledger
// reads.
func TestPercentShares(t *testing.T) {
	// Cards 0 and 1 of 16384 MiB, 2 and 3 of 32768 MiB.
	cards := fourCards()
	cards[2].MemoryMiB, cards[3].MemoryMiB = 32768, 32768
	s := NewStandalone(Options{})
	// Card 0 holds 12000 MiB; card 2 holds 20000 MiB.
	pods := []*corev1.Pod{memPod("a", "", "12000"), memPod("b", "", "20000")}
	pods[0].Annotations[gpu.AssignedAnnotation] = "0"
	pods[1].Annotations[gpu.AssignedAnnotation] = "2"
	for _, p := range pods {
		s.ObservePod(p)
	}
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(gpuNode("n", "4", nil))
	u := s.Usage(ni, "", 0)
	for _, tc := range []struct {
		name       string
		r          gpu.Request
		wantFree   int64
		wantPicked []int
		wantMiB    int64
	}{
		// 50% is 8192 MiB of cards 0 and 1, 16384 of 2 and 3: card 0
		// (4384 left) and card 2 (12768 left) are out.
		{"half of one card", gpu.Request{Count: 1, GPUMemPercent: 50}, 2, []int{1}, 8192},
		// 25%: 4096 fits card 0 (4384 left, the fullest) too.
		{"a quarter of one card", gpu.Request{Count: 1, GPUMemPercent: 25}, 4, []int{0}, 4096},
		// Half of each of two cards: one card of each size has room, so
		// no size has two.
		{"half of two cards", gpu.Request{Count: 2, GPUMemPercent: 50}, 1, nil, 0},
		// A quarter of two: both small cards (the smaller size first).
		{"a quarter of two cards", gpu.Request{Count: 2, GPUMemPercent: 25}, 2, []int{0, 1}, 4096},
		// 30% of three cards: 4915 MiB of a small card (card 0 is out),
		// 9830 of a large one: no size has three.
		{"30% of three cards", gpu.Request{Count: 3, GPUMemPercent: 30}, 2, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, free := u.Fit(cards, tc.r); free != tc.wantFree {
				t.Errorf("Fit: %d free, want %d", free, tc.wantFree)
			}
			n := NodeGPUs{Cards: gpu.NewSet(cards), Usage: u}
			picked, ok := n.Take(tc.r)
			if ok != (tc.wantPicked != nil) || !slices.Equal(picked, tc.wantPicked) {
				t.Fatalf("Take = %v, %t; want %v", picked, ok, tc.wantPicked)
			}
			if !ok {
				return
			}
			for _, i := range picked {
				if got := n.Usage.HeldMemMiB(i) - u.HeldMemMiB(i); got != tc.wantMiB {
					t.Errorf("card %d: the share holds %d MiB, want %d", i, got, tc.wantMiB)
				}
			}
			n.Give(tc.r, picked)
			for i := range cards {
				if n.Usage.HeldMemMiB(i) != u.HeldMemMiB(i) {
					t.Errorf("card %d after Give: %d MiB held, want %d", i, n.Usage.HeldMemMiB(i), u.HeldMemMiB(i))
				}
			}
		})
	}
	// A bound pod's share in percent holds the MiB recorded with its cards.
	p := st.MakePod().Name("p").UID("p").Node("n").Obj()
	p.Annotations = map[string]string{gpu.HAMiGPUMemPercentAnnotation: "50", gpu.AssignedAnnotation: "3", gpu.AssignedGPUMemAnnotation: "16384"}
	if cards, share, ok := HoldingOf(p); !ok || !slices.Equal(cards, []int{3}) || share != (Share{MemMiB: 16384}) {
		t.Errorf("HoldingOf = %v, %+v, %t; want [3], {0 16384}, true", cards, share, ok)
	}
	delete(p.Annotations, gpu.AssignedGPUMemAnnotation)
	if _, _, ok := HoldingOf(p); ok {
		t.Error("a share in percent without its MiB was believed")
	}
}

// After a restart the shares are rebuilt from the bound pods.
func TestObserveSharedPod(t *testing.T) {
	s := NewStandalone(Options{})
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

// Shares of memory are counted in MiB next to the thousandths of compute:
// a card takes shares while both last, and its free part (FreeOn) is the
// lesser of the two.
func TestMemoryShares(t *testing.T) {
	s := NewStandalone(Options{})
	// Cards of 16384 MiB. Card 0: shares of 8192 + 8192 MiB, memory
	// exactly full, compute untouched. Card 1: 250 thousandths with 4096
	// MiB (a quarter of each). Card 2: 600 thousandths and no memory.
	// Card 3: free.
	pods := []*corev1.Pod{
		memPod("a", "", "8192"), memPod("b", "", "8192"), memPod("c", "250", "4096"), memPod("d", "600", ""),
	}
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(gpuNode("n", "4", nil))
	for i, card := range []int{0, 0, 1, 2} {
		pod := pods[i]
		pod.Annotations[gpu.AssignedAnnotation] = strconv.Itoa(card)
		s.ObservePod(pod)
	}
	u := s.Usage(ni, "", 0)
	cards := fourCards()
	// FreeOn: card 0 min(1000, 0) = 0; card 1 min(750, 12288*1000/16384 =
	// 750) = 750; card 2 min(400, 1000) = 400; card 3 1000.
	for i, want := range []int64{0, 750, 400, 1000} {
		if got := u.FreeOn(&cards[i]); got != want {
			t.Errorf("FreeOn(card %d) = %d, want %d", i, got, want)
		}
	}
	if got := u.FreeMilli(cards); got != 2150 {
		t.Errorf("FreeMilli = %d, want 2150", got)
	}
	for _, tc := range []struct {
		name        string
		r           gpu.Request
		wantCapable int64
		wantFree    int64
		wantCard    int
	}{
		// Card 0's memory is full even though its compute is not: 1 MiB
		// goes on card 2 (400 free, the least of cards 1..3).
		{"one MiB", gpu.Request{Count: 1, GPUMemMiB: 1}, 4, 3, 2},
		// 12288 MiB fits card 1 (exactly its memory left), 2 and 3.
		{"exactly card 1's memory", gpu.Request{Count: 1, GPUMemMiB: 12288}, 4, 3, 2},
		// 12289 MiB: not card 1.
		{"one MiB more", gpu.Request{Count: 1, Milli: 400, GPUMemMiB: 12289}, 4, 2, 2},
		// 401 thousandths and memory: card 1 (750, 12288) and card 3.
		{"compute and memory", gpu.Request{Count: 1, Milli: 401, GPUMemMiB: 100}, 4, 2, 1},
		// More memory than a card has: no card is capable.
		{"more than a card", gpu.Request{Count: 1, GPUMemMiB: 16385}, 0, 0, -1},
		// A whole card: only card 3 is untouched (card 0 holds memory).
		{"whole card", gpu.Request{Count: 1}, 4, 1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			capable, free := u.Fit(cards, tc.r)
			if capable != tc.wantCapable || free != tc.wantFree {
				t.Errorf("Fit = %d capable, %d free; want %d, %d", capable, free, tc.wantCapable, tc.wantFree)
			}
			if !tc.r.Shared() {
				return
			}
			card, ok := pickOne(u, cards, tc.r)
			if !ok {
				card = -1
			}
			if card != tc.wantCard {
				t.Errorf("PickShares = card %d, want %d", card, tc.wantCard)
			}
		})
	}
	// A card held whole takes no share, not even of memory alone.
	whole := st.MakePod().Name("w").UID("w").Node("n").Req(map[corev1.ResourceName]string{gpu.ResourceName: "1"}).Obj()
	whole.Annotations = map[string]string{gpu.AssignedAnnotation: "3"}
	s.ObservePod(whole)
	ni.AddPod(whole)
	if s.Usage(ni, "", 0).Room(&cards[3], gpu.Request{Count: 1, GPUMemMiB: 1}) {
		t.Error("a share of memory fits a card held whole")
	}
}

// memPod is a bound pod that shares a card: milli thousandths of its
// compute and mem MiB of its memory (HAMi's name), either may be "".
func memPod(name, milli, mem string) *corev1.Pod {
	pod := st.MakePod().Name(name).UID(name).Node("n").Obj()
	pod.Annotations = map[string]string{}
	if milli != "" {
		pod.Annotations[gpu.MilliAnnotation] = milli
	}
	if mem != "" {
		pod.Annotations[gpu.HAMiGPUMemAnnotation] = mem
	}
	return pod
}
