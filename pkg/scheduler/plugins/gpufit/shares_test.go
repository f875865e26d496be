package gpufit

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
)

// sharePod asks for a share in annotations, with no nvidia.com/gpu.
func sharePod(name string, annotations map[string]string) *corev1.Pod {
	p := st.MakePod().Name(name).Namespace("ns").UID(name).Obj()
	p.Annotations = annotations
	return p
}

// Shares of several cards: Filter wants that many cards with room, and
// Reserve and Bind give that many distinct cards, the share of memory in
// percent recorded in MiB of the card chosen.
func TestMultiCardShares(t *testing.T) {
	ctx := context.Background()
	// "mixed": cards 0-1 of 16384 MiB, 2-3 of 32768 MiB.
	tests := []struct {
		name            string
		held            map[int]gpuledger.Share // card -> a share of it another pod holds
		pod             *corev1.Pod
		wantFilter      fwk.Code
		wantAnnotations map[string]string
	}{
		{
			name:            "300 thousandths of each of two cards",
			pod:             sharePod("p", map[string]string{gpu.MilliAnnotation: "300", gpu.CardsAnnotation: "2"}),
			wantFilter:      fwk.Success,
			wantAnnotations: map[string]string{gpu.AssignedAnnotation: "0,1", gpu.AssignedUUIDsAnnotation: "GPU-a,GPU-b"},
		},
		{
			// Only the V100s have 20000 MiB.
			name:       "20000 MiB of each of three cards",
			pod:        sharePod("p", map[string]string{gpu.GPUMemAnnotation: "20000", gpu.KAINumDevicesAnnotation: "3"}),
			wantFilter: fwk.UnschedulableAndUnresolvable,
		},
		{
			// Card 2 holds 800: of the three cards with 300 left, the
			// fullest two are 2 and 0.
			name:            "around a card mostly held",
			held:            map[int]gpuledger.Share{2: {Milli: 800}},
			pod:             sharePod("p", map[string]string{gpu.MilliAnnotation: "200", gpu.CardsAnnotation: "2"}),
			wantFilter:      fwk.Success,
			wantAnnotations: map[string]string{gpu.AssignedAnnotation: "0,2", gpu.AssignedUUIDsAnnotation: "GPU-a,GPU-c"},
		},
		{
			// Every card has room for a quarter of itself; 50% of card 2
			// is held, so the fullest is 2: 8192 MiB of it.
			name:            "a quarter of a card's memory",
			held:            map[int]gpuledger.Share{2: {MemMiB: 16384}},
			pod:             sharePod("p", map[string]string{gpu.HAMiGPUMemPercentAnnotation: "25"}),
			wantFilter:      fwk.Success,
			wantAnnotations: map[string]string{gpu.AssignedAnnotation: "2", gpu.AssignedUUIDsAnnotation: "GPU-c", gpu.AssignedGPUMemAnnotation: "8192"},
		},
		{
			// Half of each of two cards: the small cards (the smallest
			// size with two), 8192 MiB of each.
			name:            "half of two cards' memory",
			pod:             sharePod("p", map[string]string{gpu.HAMiGPUMemPercentAnnotation: "50", gpu.CardsAnnotation: "2"}),
			wantFilter:      fwk.Success,
			wantAnnotations: map[string]string{gpu.AssignedAnnotation: "0,1", gpu.AssignedUUIDsAnnotation: "GPU-a,GPU-b", gpu.AssignedGPUMemAnnotation: "8192"},
		},
		{
			// 60% of cards 0 and 2 is held: one card of each size has half
			// left, no size two.
			name:       "half of two cards' memory, one of each size left",
			held:       map[int]gpuledger.Share{0: {MemMiB: 9831}, 2: {MemMiB: 19661}},
			pod:        sharePod("p", map[string]string{gpu.HAMiGPUMemPercentAnnotation: "50", gpu.CardsAnnotation: "2"}),
			wantFilter: fwk.Unschedulable,
		},
		{
			// No size has three cards.
			name:       "half of three cards' memory",
			pod:        sharePod("p", map[string]string{gpu.HAMiGPUMemPercentAnnotation: "50", gpu.CardsAnnotation: "3"}),
			wantFilter: fwk.UnschedulableAndUnresolvable,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var running []*corev1.Pod
			for card := range tc.held {
				name := fmt.Sprintf("holder-%d", card)
				running = append(running, st.MakePod().Name(name).Namespace("ns").UID(name).Node("mixed").Obj())
			}
			f := newFixture(t, running...)
			for card, share := range tc.held {
				f.state.Assign(types.UID(fmt.Sprintf("holder-%d", card)), "mixed", []int{card}, share)
			}
			cs := framework.NewCycleState()
			if _, s := f.pl.PreFilter(ctx, cs, tc.pod, nil); !s.IsSuccess() {
				t.Fatal(s)
			}
			if s := f.pl.Filter(ctx, cs, tc.pod, f.nodeInfo(t, "mixed")); s.Code() != tc.wantFilter {
				t.Fatalf("Filter = %v (%s), want %v", s.Code(), s.Message(), tc.wantFilter)
			}
			if tc.wantFilter != fwk.Success {
				return
			}
			if s := f.pl.Reserve(ctx, cs, tc.pod, "mixed"); !s.IsSuccess() {
				t.Fatalf("Reserve: %v", s)
			}
			if _, err := f.client.CoreV1().Pods("ns").Create(ctx, tc.pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var binding *corev1.Binding
			f.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
				if action.GetSubresource() != "binding" {
					return false, nil, nil
				}
				binding = action.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
				return true, binding, nil
			})
			if s := f.pl.Bind(ctx, cs, tc.pod, "mixed"); !s.IsSuccess() {
				t.Fatal(s)
			}
			if binding == nil {
				t.Fatal("no binding")
			}
			if diff := cmp.Diff(tc.wantAnnotations, binding.Annotations); diff != "" {
				t.Errorf("binding annotations (-want,+got):\n%s", diff)
			}
			// What the ledger holds is what the bound pod's record says.
			bound := tc.pod.DeepCopy()
			bound.Spec.NodeName = "mixed"
			bound.Annotations = binding.Annotations
			for k, v := range tc.pod.Annotations {
				bound.Annotations[k] = v
			}
			cards, share, ok := gpuledger.HoldingOf(bound)
			_, held, _ := f.state.Held(tc.pod.UID)
			if !ok || !cmp.Equal(cards, held) {
				t.Errorf("the bound pod's record reads %v, %t; the ledger holds %v", cards, ok, held)
			}
			if want := tc.wantAnnotations[gpu.AssignedGPUMemAnnotation]; want != "" && share.MemMiB != 8192 {
				t.Errorf("the bound pod's record holds %d MiB of each card, want 8192", share.MemMiB)
			}
		})
	}
}
