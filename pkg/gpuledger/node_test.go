package gpuledger

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/aisched/aisched/pkg/gpu"
)

// Placing pods on paper gives the cards GPUFit would (Usage.Pick) and
// counts shares; Give undoes a Take exactly.
func TestNodeGPUsTakeGive(t *testing.T) {
	n := NodeGPUs{Cards: gpu.NewSet(fourCards())}
	take := func(r gpu.Request, want []int, wantOK bool) {
		t.Helper()
		got, ok := n.Take(r)
		if ok != wantOK || !cmp.Equal(want, got) {
			t.Fatalf("Take(%+v) = %v, %t; want %v, %t", r, got, ok, want, wantOK)
		}
	}
	half := gpu.Request{Count: 1, Milli: 500}
	take(half, []int{0}, true) // the lowest of equally free cards
	take(half, []int{0}, true) // best fit: the card with 500 left
	take(gpu.Request{Count: 2}, []int{1, 2}, true)
	take(gpu.Request{Count: 2}, nil, false) // one untouched card is left
	take(gpu.Request{Count: 1, Milli: 600}, []int{3}, true)
	take(gpu.Request{Count: 1, Milli: 500}, nil, false) // card 3 has 400 left
	if !n.Fits(gpu.Request{}) {
		t.Error("a pod without GPUs does not fit")
	}
	if got := n.FreeMilli(); got != 400 {
		t.Errorf("FreeMilli = %d, want 400 (card 3)", got)
	}
	n.Give(gpu.Request{Count: 2}, []int{1, 2})
	n.Give(half, []int{0})
	if got := n.FreeMilli(); got != 400+2000+500 {
		t.Errorf("FreeMilli after giving back = %d, want 2900", got)
	}
	// A whole card still cannot go on card 0, which holds one half.
	take(gpu.Request{Count: 3}, nil, false)
	n.Give(half, []int{0})
	take(gpu.Request{Count: 3}, []int{0, 1, 2}, true)
	if e := n.Empty(); e.FreeMilli() != 4000 || n.FreeMilli() != 400 {
		t.Errorf("Empty: %d free, the node %d; want 4000 and 400", e.FreeMilli(), n.FreeMilli())
	}
	if (NodeGPUs{}).Fits(gpu.Request{Count: 1, Milli: 1}) {
		t.Error("a share fits a node without cards")
	}
}

// Audit finds every kind of overcommitted card, and nothing in a sound
// cluster.
func TestAudit(t *testing.T) {
	cards := func(node string) *gpu.Set {
		if node == "n" {
			return gpu.NewSet(fourCards())
		}
		return nil
	}
	bound := func(name, assigned string, milli string, count string) *corev1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Node("n").Obj()
		if count != "" {
			p = st.MakePod().Namespace("ns").Name(name).UID(name).Node("n").Req(map[corev1.ResourceName]string{gpu.ResourceName: count}).Obj()
		}
		p.Annotations = map[string]string{gpu.AssignedAnnotation: assigned}
		if milli != "" {
			p.Annotations[gpu.MilliAnnotation] = milli
		}
		return p
	}
	sound := []*corev1.Pod{bound("a", "0", "600", ""), bound("b", "0", "400", ""), bound("w", "1,2", "", "2")}
	if got := Audit(cards, sound); got != nil {
		t.Errorf("sound cluster: %v", got)
	}
	if diff := cmp.Diff(map[string]string{"n/0": "ns/a@600/0,ns/b@400/0", "n/1": "ns/w", "n/2": "ns/w"}, Holders(sound)); diff != "" {
		t.Errorf("Holders (-want,+got):\n%s", diff)
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"whole card twice", bound("x", "1", "", "1"), "pod ns/x holds card 1 of node n whole, which another pod holds"},
		{"whole card on a shared one", bound("x", "0", "", "1"), "pod ns/x holds card 0 of node n whole"},
		{"share on a whole card", bound("x", "2", "100", ""), "pod ns/x shares card 2 of node n, which another pod holds whole"},
		{"shares beyond a card", bound("x", "0", "1", ""), "pod ns/x shares card 0 of node n beyond its compute or memory"},
		{"no such card", bound("x", "7", "", "1"), "pod ns/x holds card 7 of node n, which has no such card"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Audit(cards, append(sound[:3:3], tc.pod))
			if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
				t.Errorf("Audit = %q, want one problem starting %q", got, tc.want)
			}
		})
	}
}
