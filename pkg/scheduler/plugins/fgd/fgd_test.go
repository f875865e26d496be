package fgd

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
)

func cards(n int) []gpu.Card {
	out := make([]gpu.Card, n)
	for i := range out {
		out[i] = gpu.Card{Index: i, Model: "Tesla-T4", MemoryMiB: 15360, Healthy: true}
	}
	return out
}

// testView is a node whose cards have free thousandths of compute and all
// their memory left.
func testView(free []int64, cpuFree int64) nodeView {
	n := nodeView{free: free, compute: slices.Clone(free), mem: make([]int64, len(free)), cards: cards(len(free)), cpuFree: cpuFree}
	for i := range n.mem {
		if free[i] > 0 {
			n.mem[i] = n.cards[i].MemoryMiB
		}
	}
	return n
}

func TestFragment(t *testing.T) {
	// Typical shapes: a CPU pod (freq 0.2), a half-card pod with 4 cores
	// (0.5) and a 2-card pod with 8 cores (0.3).
	types := []Typical{
		{MilliCPU: 1000, Freq: 0.2},
		{MilliCPU: 4000, Milli: 500, Count: 1, Req: gpu.Request{Count: 1, Milli: 500}, Freq: 0.5},
		{MilliCPU: 8000, Milli: 1000, Count: 2, Req: gpu.Request{Count: 2}, Freq: 0.3},
	}
	for _, tc := range []struct {
		name    string
		free    []int64
		cpuFree int64
		want    float64
	}{
		// Free 1000+1000+300+0 = 2300.
		//   CPU pod:       all free GPU            0.2 * 2300 = 460
		//   half card:     fits; card with 300     0.5 * 300  = 150
		//   two cards:     fits; 300 unusable      0.3 * 300  = 90
		{"mixed node", []int64{1000, 1000, 300, 0}, 16000, 700},
		// Only 6 cores: the 2-card pod cannot run, all 2300 count for it.
		//   460 + 150 + 0.3 * 2300 = 1300
		{"too little CPU", []int64{1000, 1000, 300, 0}, 6000, 1300},
		// Free 1000+400: the 2-card pod does not fit (one whole card).
		//   0.2*1400 + 0.5*400 + 0.3*1400 = 280 + 200 + 420 = 900
		{"one whole card", []int64{1000, 400}, 16000, 900},
		{"full node", []int64{0, 0}, 16000, 0},
		{"CPU-only node", nil, 16000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testView(tc.free, tc.cpuFree)
			if got := n.fragment(types); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("fragment = %v, want %v", got, tc.want)
			}
		})
	}
}

// Shares of memory: a card whose memory is mostly taken is fragmented for
// a typical pod that needs more than is left, and a pod that fills it is
// put there. Cards of 15360 MiB.
func TestFragmentMemory(t *testing.T) {
	// Typical: shares of 4096 MiB alone.
	types := []Typical{{Count: 1, GPUMemMiB: 4096, Req: gpu.Request{Count: 1, GPUMemMiB: 4096}, Freq: 1}}
	// Card 0 holds 11520 MiB of shares: 3840 MiB left, free min(1000,
	// 3840*1000/15360 = 250) = 250, too little for 4096: F = 250.
	// Card 1 is untouched.
	n := nodeView{free: []int64{250, 1000}, compute: []int64{1000, 1000}, mem: []int64{3840, 15360}, cards: cards(2), cpuFree: 1000}
	before := n.fragment(types)
	if before != 250 {
		t.Fatalf("fragment = %v, want 250", before)
	}
	// A share of 3840 MiB: on card 0 it takes the rest (free 0, F 0,
	// change +250); on card 1 it leaves 11520 MiB (free 750, still room
	// for 4096) and card 0 as it was (F 250, change 0). Card 0 it is.
	change, card := n.bestCard(types, before, 0, gpu.Request{Count: 1, GPUMemMiB: 3840})
	if card != 0 || change != 250 {
		t.Errorf("bestCard = card %d, change %v; want card 0, +250", card, change)
	}
	if n.free[0] != 250 || n.mem[0] != 3840 || n.compute[0] != 1000 {
		t.Errorf("bestCard changed the view: free %v, compute %v, mem %v", n.free, n.compute, n.mem)
	}
	// A share of 3841 MiB does not fit card 0.
	if _, card := n.bestCard(types, before, 0, gpu.Request{Count: 1, GPUMemMiB: 3841}); card != 1 {
		t.Errorf("3841 MiB went on card %d, want 1", card)
	}
}

// A card that fails a shape's model counts as unusable for that shape.
func TestFragmentModels(t *testing.T) {
	types := []Typical{{Milli: 500, Count: 1, Req: gpu.Request{Count: 1, Milli: 500, Models: []string{"a100"}}, Freq: 1, constrained: true}}
	n := testView([]int64{1000, 600}, 1000)
	if got := n.fragment(types); got != 1600 {
		t.Errorf("fragment on cards of another model = %v, want all 1600", got)
	}
}

func TestScoreFunction(t *testing.T) {
	for _, tc := range []struct {
		change float64
		want   int64
	}{
		{0, 50},
		// sigmoid(1) = 0.731 -> 73; sigmoid(-1) = 0.269 -> 26.
		{1000, 73},
		{-1000, 26},
		{1e9, 100},
		{-1e9, 0},
	} {
		if got := score(tc.change); got != tc.want {
			t.Errorf("score(%v) = %d, want %d", tc.change, got, tc.want)
		}
	}
}

func TestWindow(t *testing.T) {
	w := newWindow(4, 75)
	a := shapeOf(1000, gpu.Request{Count: 1, Milli: 500})
	b := shapeOf(2000, gpu.Request{Count: 2})
	c := shapeOf(500, gpu.Request{})
	for i, s := range []shape{a, a, b, c} {
		w.observe(types.UID(fmt.Sprint(i)), s)
	}
	// A retried pod counts once.
	w.observe("0", a)
	// a: 2 of 4 pods; b and c: 1 each, tied, and ties go to fewer cards:
	// c before b. 75% of 4 = 3 pods are covered by a and c.
	got := w.Typical()
	want := []Typical{
		{MilliCPU: 1000, Milli: 500, Count: 1, Req: gpu.Request{Count: 1}, Freq: 2.0 / 3},
		{MilliCPU: 500, Freq: 1.0 / 3},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9), cmp.AllowUnexported(Typical{})); diff != "" {
		t.Errorf("typical (-want,+got):\n%s", diff)
	}
	// The window keeps 4 pods: two more b push out the two oldest a.
	w.observe("4", b)
	w.observe("5", b)
	got = w.Typical()
	if len(got) == 0 || got[0].Count != 2 || math.Abs(got[0].Freq-1) > 1e-9 && math.Abs(got[0].Freq-0.75) > 1e-9 {
		t.Errorf("after the window moved: %+v, want the 2-card shape first", got)
	}
	if _, ok := w.counts[a]; ok {
		t.Errorf("shape a still counted after it left the window: %v", w.counts)
	}
}

// While a window of one shape fills, the typical shapes are the same list,
// the very slice, so that FGD's memos hold from pod to pod; a second shape
// makes a new one.
func TestWindowKeepsList(t *testing.T) {
	w := newWindow(100, 95)
	one := shapeOf(1000, gpu.Request{Count: 1})
	w.observe("0", one)
	first := w.Typical()
	for i := 1; i < 10; i++ {
		w.observe(types.UID(fmt.Sprint(i)), one)
		if got := w.Typical(); &got[0] != &first[0] {
			t.Fatalf("pod %d of the one shape made a new list", i)
		}
	}
	w.observe("x", shapeOf(1000, gpu.Request{Count: 2}))
	if got := w.Typical(); &got[0] == &first[0] {
		t.Error("a second shape kept the list")
	}
}

// Shapes given in args are the typical pods from the start, weighted, and
// the pods seen change nothing.
func TestFixedWindow(t *testing.T) {
	w := newFixedWindow([]config.FGDTypicalPod{
		{MilliCPU: 1000, GPUMilli: 500, GPUCount: 1, Weight: 6},
		{MilliCPU: 2000, GPUMilli: 1000, GPUCount: 2, Models: []string{"Tesla V100"}, Weight: 3},
		{MilliCPU: 1000, GPUMemMiB: 4000, GPUCount: 1, Weight: 2},
		{MilliCPU: 500, Weight: 1},
	}, 90)
	w.observe("x", shapeOf(8000, gpu.Request{Count: 8}))
	// 90% of the weight 12 is 10.8: the share (6), the two-card shape (3)
	// and the memory share (2) cover it, with frequencies 6/11, 3/11 and
	// 2/11; the CPU shape is left out. Models are normalised as
	// ParseRequest does.
	want := []Typical{
		{MilliCPU: 1000, Milli: 500, Count: 1, Req: gpu.Request{Count: 1}, Freq: 6.0 / 11},
		{MilliCPU: 2000, Milli: 1000, Count: 2, Req: gpu.Request{Count: 2, Models: []string{"tesla-v100"}}, Freq: 3.0 / 11, constrained: true},
		{MilliCPU: 1000, GPUMemMiB: 4000, Count: 1, Req: gpu.Request{Count: 1}, Freq: 2.0 / 11},
	}
	if diff := cmp.Diff(want, w.Typical(), cmpopts.EquateApprox(0, 1e-9), cmp.AllowUnexported(Typical{})); diff != "" {
		t.Errorf("typical (-want,+got):\n%s", diff)
	}
}

// Score tries a shared pod on every card, and ProposeCard proposes the
// best to GPUFit's Reserve. The node has card 0 free and card 1 with 300
// left; the pod asks 300.
func TestScoreChoosesCard(t *testing.T) {
	state := gpuledger.NewStandalone(gpuledger.Options{})
	node := st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "32", gpu.ResourceName: "2"}).Obj()
	node.Labels = map[string]string{gpu.GFDCountLabel: "2", gpu.GFDMemoryLabel: "15360", gpu.GFDProductLabel: "Tesla-T4"}
	state.ObserveNode(node)
	held := st.MakePod().Name("h").UID("h").Node("n").Obj()
	held.Annotations = map[string]string{gpu.MilliAnnotation: "700"}
	state.Assign("h", "n", []int{1}, gpuledger.Share{Milli: 700})
	ni := framework.NewNodeInfo(held)
	ni.SetNode(node)

	pl := &FGD{state: state, shapes: newWindow(100, 100)}
	// Typical: pods of 300 milli.
	for i := range 10 {
		pl.shapes.observe(types.UID(fmt.Sprint(i)), shapeOf(1000, gpu.Request{Count: 1, Milli: 300}))
	}
	pod := st.MakePod().Name("p").UID("p").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj()
	pod.Annotations = map[string]string{gpu.MilliAnnotation: "300"}
	cs := framework.NewCycleState()
	if _, s := pl.PreFilter(context.Background(), cs, pod, nil); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := pl.PreScore(context.Background(), cs, pod, nil); !s.IsSuccess() {
		t.Fatal(s)
	}
	got, s := pl.Score(context.Background(), cs, pod, ni)
	if !s.IsSuccess() {
		t.Fatal(s)
	}
	// With 300-milli pods typical, nothing is ever a fragment: F = 0
	// before and after either card, change 0 -> 50, and the first card
	// tried (0) keeps the tie.
	if got != 50 {
		t.Errorf("score = %d, want 50", got)
	}
	req := gpu.Request{Count: 1, Milli: 300}
	card, ok := pl.ProposeCard(context.Background(), cs, pod, req, ni)
	if !ok || card != 0 {
		t.Errorf("proposed card = %d, %t; want 0 (first of equals)", card, ok)
	}

	// With 400-milli pods typical, card 1 (300 free) is already useless
	// to them; putting the pod there (free 0) removes that fragment:
	// before F = 300 (card 1), on card 1 F = 0 -> change 300 -> 57;
	// on card 0 F = 300 + 0 (700 left fits 400) -> change 0 -> 50.
	// (99 of them; the pod itself, learnt at PreFilter, is the 100th:
	// F before = 0.99 * 300 = 297, change 297 -> int(100 sigmoid(0.297)) = 57.)
	pl.shapes = newWindow(100, 100)
	for i := range 99 {
		pl.shapes.observe(types.UID(fmt.Sprint("x", i)), shapeOf(1000, gpu.Request{Count: 1, Milli: 400}))
	}
	// Without scoring (one feasible node), the proposal is made on demand.
	cs = framework.NewCycleState()
	_, _ = pl.PreFilter(context.Background(), cs, pod, nil)
	if card, ok := pl.ProposeCard(context.Background(), cs, pod, req, ni); !ok || card != 1 {
		t.Errorf("card proposed without scoring = %d, %t; want 1", card, ok)
	}
	_ = pl.PreScore(context.Background(), cs, pod, nil)
	got, _ = pl.Score(context.Background(), cs, pod, ni)
	if got != 57 {
		t.Errorf("score = %d, want 57", got)
	}
	if card, _ := pl.ProposeCard(context.Background(), cs, pod, req, ni); card != 1 {
		t.Errorf("proposed card = %d, want 1", card)
	}
}

func TestNormalizeExact(t *testing.T) {
	pl := &FGD{exact: true}
	// Changes in millionths: 300 (best), -5, 300, 0, -5.
	scores := fwk.NodeScoreList{{Name: "a", Score: 300}, {Name: "b", Score: -5}, {Name: "c", Score: 300}, {Name: "d", Score: 0}, {Name: "e", Score: -5}}
	if s := pl.NormalizeScore(context.Background(), nil, nil, scores); s != nil {
		t.Fatal(s)
	}
	want := fwk.NodeScoreList{{Name: "a", Score: 100}, {Name: "b", Score: 98}, {Name: "c", Score: 100}, {Name: "d", Score: 99}, {Name: "e", Score: 98}}
	if diff := cmp.Diff(want, scores); diff != "" {
		t.Errorf("ranked (-want,+got):\n%s", diff)
	}
	// The paper's scores are left alone.
	paper := fwk.NodeScoreList{{Name: "a", Score: 57}}
	_ = (&FGD{}).NormalizeScore(context.Background(), nil, nil, paper)
	if paper[0].Score != 57 {
		t.Errorf("paper score normalised to %d", paper[0].Score)
	}
}

func TestSignPod(t *testing.T) {
	pl := &FGD{}
	pod := func(cpu string, annotations map[string]string) *corev1.Pod {
		p := st.MakePod().Name("p").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu}).Obj()
		p.Annotations = annotations
		return p
	}
	sign := func(p *corev1.Pod) []fwk.SignFragment {
		t.Helper()
		f, s := pl.SignPod(context.Background(), p)
		if !s.IsSuccess() {
			t.Fatalf("%v: %v", p.Annotations, s)
		}
		return f
	}
	a := sign(pod("1", map[string]string{gpu.MilliAnnotation: "300"}))
	if b := sign(pod("1", map[string]string{gpu.MilliAnnotation: "300"})); !cmp.Equal(a, b) {
		t.Errorf("alike pods sign %v and %v", a, b)
	}
	for name, p := range map[string]*corev1.Pod{
		"more CPU":       pod("2", map[string]string{gpu.MilliAnnotation: "300"}),
		"a larger share": pod("1", map[string]string{gpu.MilliAnnotation: "500"}),
		"a memory share": pod("1", map[string]string{gpu.MilliAnnotation: "300", gpu.GPUMemAnnotation: "4000"}),
		"no GPU":         pod("1", nil),
	} {
		if b := sign(p); cmp.Equal(a, b) {
			t.Errorf("%s: signs as the 300-milli pod: %v", name, b)
		}
	}
	if _, s := pl.SignPod(context.Background(), pod("1", map[string]string{gpu.MilliAnnotation: "1000"})); s.Code() != fwk.Unschedulable {
		t.Errorf("invalid share: %v, want Unschedulable (not batched)", s)
	}
}

// The memos change nothing: over a random walk of node states, pod shapes
// and typical mixes, a plugin that keeps its memos scores (and chooses
// cards) exactly as a fresh plugin computing everything, and a repeat of
// the same pod on the same state is answered from the memo. The NodeInfo
// is one object updated in place, as the scheduler's snapshot keeps it,
// and some steps leave it as it was while the ledger changes (a pod's
// cards released before the scheduler's cache saw it go).
func TestMemoScoresAsFresh(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	state := gpuledger.NewStandalone(gpuledger.Options{})
	node := st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "64", gpu.ResourceName: "8"}).Obj()
	node.Labels = map[string]string{gpu.GFDCountLabel: "8", gpu.GFDMemoryLabel: "16384", gpu.GFDProductLabel: "Tesla-T4"}
	state.ObserveNode(node)
	shapes := []gpu.Request{{Count: 1}, {Count: 2}, {Count: 1, Milli: 300}, {Count: 1, Milli: 500}, {Count: 1, GPUMemMiB: 4000}, {Count: 1, Milli: 200, GPUMemMiB: 8000},
		{Count: 2, Milli: 300}, {}}
	annotate := func(p *corev1.Pod, r gpu.Request) {
		p.Annotations = map[string]string{}
		if r.Milli > 0 {
			p.Annotations[gpu.MilliAnnotation] = fmt.Sprint(r.Milli)
		}
		if r.GPUMemMiB > 0 {
			p.Annotations[gpu.GPUMemAnnotation] = fmt.Sprint(r.GPUMemMiB)
		}
		if r.Shared() && r.Count > 1 {
			p.Annotations[gpu.CardsAnnotation] = fmt.Sprint(r.Count)
		}
	}
	window := newWindow(20, 100)
	memoized := &FGD{state: state, shapes: window}
	var held []*corev1.Pod
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	hits, quick := 0, 0
	for step := range 300 {
		switch op := rng.IntN(4); {
		case op == 0 && len(held) > 0: // a pod leaves
			i := rng.IntN(len(held))
			state.ForgetPod(held[i])
			held = slices.Delete(held, i, i+1)
		case op == 1: // a pod of a random shape is placed on a random card
			r := shapes[rng.IntN(len(shapes)-1)]
			p := st.MakePod().Name(fmt.Sprint("h", step)).UID(fmt.Sprint("h", step)).Node("n").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj()
			share := gpuledger.Share{Milli: r.Milli, MemMiB: r.GPUMemMiB}
			cards := rng.Perm(8)[:r.Count]
			if !r.Shared() {
				p.Spec.Containers[0].Resources.Requests[gpu.ResourceName] = resource.MustParse(fmt.Sprint(r.Count))
			}
			annotate(p, r)
			state.Assign(p.UID, "n", cards, share)
			held = append(held, p)
		case op == 2: // the workload moves
			r := shapes[rng.IntN(len(shapes))]
			window.observe(types.UID(fmt.Sprint("w", step)), shapeOf(int64(1000*rng.IntN(3)), r))
		}
		if rng.IntN(4) > 0 {
			// The snapshot catches up: the same object, a new generation.
			*ni = *framework.NewNodeInfo(held...)
			ni.SetNode(node)
		}
		r := shapes[rng.IntN(len(shapes))]
		pod := st.MakePod().Name("p").UID(fmt.Sprint("p", step)).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "2"}).Obj()
		if !r.Shared() && r.Count > 0 {
			pod.Spec.Containers[0].Resources.Requests[gpu.ResourceName] = resource.MustParse(fmt.Sprint(r.Count))
		}
		annotate(pod, r)
		score := func(pl *FGD) (int64, int, bool) {
			cs := framework.NewCycleState()
			if s := pl.PreScore(context.Background(), cs, pod, nil); !s.IsSuccess() {
				t.Fatalf("step %d: PreScore: %v", step, s)
			}
			got, s := pl.Score(context.Background(), cs, pod, ni)
			if !s.IsSuccess() {
				t.Fatalf("step %d: Score: %v", step, s)
			}
			req, err := gpu.ParseRequest(pod)
			if err != nil {
				t.Fatal(err)
			}
			card, ok := pl.ProposeCard(context.Background(), cs, pod, req, ni)
			return got, card, ok && card >= 0
		}
		fresh := &FGD{state: state, shapes: window}
		want, wantCard, wantChosen := score(fresh)
		for range 2 {
			if m, ok := memoized.memos.byNode.Load(ni); ok && m.(*memo).current(ni) {
				quick++
			}
			got, card, chosen := score(memoized)
			if got != want || chosen != wantChosen || chosen && card != wantCard {
				t.Fatalf("step %d, pod %+v: memoized score %d card %d (%t), fresh %d card %d (%t)", step, r, got, card, chosen, want, wantCard, wantChosen)
			}
		}
		if m, _ := memoized.memos.byNode.Load(ni); m.(*memo).scored {
			hits++
		}
	}
	if hits == 0 || quick == 0 {
		t.Errorf("the memo held a score %d times and was current %d times, want both", hits, quick)
	}
}

// A pod with a share of each of several cards takes the cards GPUFit
// gives (the ledger's best fit), and FGD scores that placement; it
// proposes no card. Cards 0 and 3 are free, card 1 holds 700 and card 2
// 500; typical pods take 400 of one card.
func TestScoreMultiCardShare(t *testing.T) {
	state := gpuledger.NewStandalone(gpuledger.Options{})
	node := st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "32", gpu.ResourceName: "4"}).Obj()
	node.Labels = map[string]string{gpu.GFDCountLabel: "4", gpu.GFDMemoryLabel: "15360", gpu.GFDProductLabel: "Tesla-T4"}
	state.ObserveNode(node)
	var held []*corev1.Pod
	for card, milli := range map[int]int64{1: 700, 2: 500} {
		name := fmt.Sprint("h", card)
		p := st.MakePod().Name(name).UID(name).Node("n").Obj()
		p.Annotations = map[string]string{gpu.MilliAnnotation: fmt.Sprint(milli)}
		state.Assign(p.UID, "n", []int{card}, gpuledger.Share{Milli: milli})
		held = append(held, p)
	}
	ni := framework.NewNodeInfo(held...)
	ni.SetNode(node)
	pl := &FGD{state: state, shapes: newWindow(100, 100)}
	for i := range 10 {
		pl.shapes.observe(types.UID(fmt.Sprint(i)), shapeOf(1000, gpu.Request{Count: 1, Milli: 400}))
	}
	pod := st.MakePod().Name("p").UID("p").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj()
	pod.Annotations = map[string]string{gpu.MilliAnnotation: "300", gpu.CardsAnnotation: "2"}
	cs := framework.NewCycleState()
	if s := pl.PreScore(context.Background(), cs, pod, nil); !s.IsSuccess() {
		t.Fatal(s)
	}
	got, s := pl.Score(context.Background(), cs, pod, ni)
	if !s.IsSuccess() {
		t.Fatal(s)
	}
	// The ledger gives cards 1 and 2 (300 and 500 free, the fullest with
	// room). Before: card 1's 300 is useless to a 400 pod, F = 300.
	// After: card 1 has 0 and card 2 200, useless: F = 200. Change +100:
	// 100 * sigmoid(0.1) = 52.49 -> 52. (On the free cards 0 and 3 F
	// would stay 300: 50.)
	if got != 52 {
		t.Errorf("score = %d, want 52", got)
	}
	req, err := gpu.ParseRequest(pod)
	if err != nil {
		t.Fatal(err)
	}
	if card, ok := pl.ProposeCard(context.Background(), cs, pod, req, ni); ok {
		t.Errorf("proposed card %d for a share of two cards; want no proposal", card)
	}
}

// A typical share of memory in percent needs that percent of each card:
// on cards of 15360 MiB half is 7680, so a card with 7000 left is a
// fragment for it.
func TestFragmentMemoryPercent(t *testing.T) {
	types := []Typical{{Count: 1, GPUMemPercent: 50, Req: gpu.Request{Count: 1, GPUMemPercent: 50}, Freq: 1}}
	// Card 0: 7000 MiB left, free min(1000, 7000*1000/15360 = 455) = 455.
	n := nodeView{free: []int64{455, 1000}, compute: []int64{1000, 1000}, mem: []int64{7000, 15360}, cards: cards(2), cpuFree: 1000}
	if got := n.fragment(types); got != 455 {
		t.Errorf("fragment = %v, want 455", got)
	}
	// A share of 30%: 4608 MiB on card 0 leaves 2392 (free 155), on card
	// 1 10752 (700, still room for half: 7680). Card 0 removes 300 of
	// fragment (455 -> 155); card 1 removes none.
	change, card := n.bestCard(types, 455, 0, gpu.Request{Count: 1, GPUMemPercent: 30})
	if card != 0 || change != 300 {
		t.Errorf("bestCard = card %d, change %v; want card 0, +300", card, change)
	}
}
