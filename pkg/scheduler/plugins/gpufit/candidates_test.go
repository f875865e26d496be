package gpufit

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
)

// candidateNodes returns n NodeInfos of 8 cards each, node i holding
// held(i) whole cards (pods of one card each, priority 0, known to the
// ledger) and, where shared(i), a pod sharing one more card.
func candidateNodes(state *gpuledger.State, n int, held func(int) int, shared func(int) bool) []fwk.NodeInfo {
	var out []fwk.NodeInfo
	for i := range n {
		name := fmt.Sprintf("n%03d", i)
		node := st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "32", gpu.ResourceName: "8"}).
			Label(gpu.GFDCountLabel, "8").Label(gpu.GFDMemoryLabel, "40960").Label(gpu.GFDProductLabel, "NVIDIA-A100-SXM4-40GB").Obj()
		var pods []*corev1.Pod
		for c := range held(i) {
			p := st.MakePod().Name(fmt.Sprintf("%s-%d", name, c)).UID(fmt.Sprintf("%s-%d", name, c)).Node(name).Req(map[corev1.ResourceName]string{gpu.ResourceName: "1"}).Obj()
			state.AssignPod(p, name, []int{c}, gpuledger.Share{})
			pods = append(pods, p)
		}
		if shared != nil && shared(i) {
			p := st.MakePod().Name(name + "-s").UID(name + "-s").Node(name).Obj()
			state.AssignPod(p, name, []int{7}, gpuledger.Share{Milli: 500})
			pods = append(pods, p)
		}
		ni := framework.NewNodeInfo(pods...)
		ni.SetNode(node)
		out = append(out, ni)
	}
	return out
}

// names lists the nodes whose index passes keep.
func names(n int, keep func(int) bool) sets.Set[string] {
	out := sets.New[string]()
	for i := range n {
		if keep(i) {
			out.Insert(fmt.Sprintf("n%03d", i))
		}
	}
	return out
}

// GPUFit's PreFilter lists the nodes with room for a GPU pod, so that the
// scheduler does not filter the full ones, unless that is not worth it or
// could keep preemption from freeing cards.
func TestCandidates(t *testing.T) {
	none := func(int) int { return 0 }
	full := func(i int) int {
		if i%5 < 2 {
			return 8 // 40 of 100 full
		}
		return i % 8
	}
	for _, tc := range []struct {
		name     string
		nodes    int
		held     func(int) int
		shared   func(int) bool
		req      gpu.Request
		priority int32
		never    bool
		// want nil: every node.
		want sets.Set[string]
		// wantReject is the reason the pod is rejected with, if it is.
		wantReject string
	}{
		{name: "one card: the nodes with a card free", nodes: 100, held: full, req: gpu.Request{Count: 1},
			want: names(100, func(i int) bool { return full(i) <= 7 })},
		{name: "four cards: the nodes with four free", nodes: 100, held: full, req: gpu.Request{Count: 4},
			want: names(100, func(i int) bool { return full(i) <= 4 })},
		{name: "few nodes left out: every node", nodes: 100, held: func(i int) int { return 8 * min(i/80, 1) }, req: gpu.Request{Count: 1}},
		{name: "none with room: rejected", nodes: 100, held: func(int) int { return 8 }, req: gpu.Request{Count: 1}, wantReject: reasonNoRoomWhole},
		{name: "none with room for the share: rejected", nodes: 100, held: func(int) int { return 8 }, req: gpu.Request{Count: 1, Milli: 300}, wantReject: reasonNoRoomShare},
		{name: "none with room, a pod that may preempt a holder: every node", nodes: 100, held: func(int) int { return 8 }, req: gpu.Request{Count: 1}, priority: 1},
		{name: "small cluster: every node", nodes: 99, held: full, req: gpu.Request{Count: 1}},
		{name: "empty cluster: every node", nodes: 100, held: none, req: gpu.Request{Count: 1}},
		// Pods of priority 0 hold cards: a pod of priority 1 may preempt
		// them on the full nodes.
		{name: "a holder of lower priority: every node", nodes: 100, held: full, req: gpu.Request{Count: 1}, priority: 1},
		{name: "a holder of lower priority, a pod that never preempts", nodes: 100, held: full, req: gpu.Request{Count: 1}, priority: 1, never: true,
			want: names(100, func(i int) bool { return full(i) <= 7 })},
		// A share fits a card not held whole with its share left: a node
		// with seven cards held and a share of the eighth is listed, a
		// full node is not.
		{name: "a share", nodes: 100, held: func(i int) int { return []int{7, 8, 8, 0, 0}[i%5] }, shared: func(i int) bool { return i%5 == 0 }, req: gpu.Request{Count: 1, Milli: 250},
			want: names(100, func(i int) bool { return i%5 >= 3 || i%5 == 0 })},
		{name: "a share larger than what the shared cards have left", nodes: 100, held: func(i int) int { return []int{7, 8, 8, 0, 0}[i%5] }, shared: func(i int) bool { return i%5 == 0 }, req: gpu.Request{Count: 1, Milli: 600},
			want: names(100, func(i int) bool { return i%5 >= 3 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := gpuledger.NewStandalone(gpuledger.Options{})
			pl := &GPUFit{state: state}
			nodes := candidateNodes(state, tc.nodes, tc.held, tc.shared)
			pod := st.MakePod().Name("p").UID("p").Priority(tc.priority).Obj()
			if tc.never {
				pod.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever)
			}
			res, status := pl.candidates(pod, tc.req, nodes)
			var got sets.Set[string]
			if res != nil {
				got = res.NodeNames
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("candidates (-want,+got):\n%s", diff)
			}
			switch {
			case tc.wantReject == "" && status != nil:
				t.Errorf("status %v, want none", status)
			case tc.wantReject != "" && (status.Code() != fwk.UnschedulableAndUnresolvable || status.Message() != tc.wantReject):
				t.Errorf("status %v, want UnschedulableAndUnresolvable %q", status, tc.wantReject)
			}
		})
	}
}

// The list follows the nodes as the snapshot updates them in place: a node
// filled since the last cycle is left out, one emptied is back.
func TestCandidatesFollowNodes(t *testing.T) {
	state := gpuledger.NewStandalone(gpuledger.Options{})
	pl := &GPUFit{state: state}
	// 30 of 100 nodes full.
	nodes := candidateNodes(state, 100, func(i int) int { return 8 * min(1, i/70) }, nil)
	pod := st.MakePod().Name("p").UID("p").Obj()
	list := func() sets.Set[string] {
		res, _ := pl.candidates(pod, gpu.Request{Count: 1}, nodes)
		if res == nil {
			t.Fatal("no list")
		}
		return res.NodeNames
	}
	if got := list(); got.Len() != 70 || got.Has("n070") {
		t.Fatalf("%d nodes listed (n070 %t), want the 70 with cards free", got.Len(), got.Has("n070"))
	}
	filler := st.MakePod().Name("f").UID("f").Node("n000").Req(map[corev1.ResourceName]string{gpu.ResourceName: "8"}).Obj()
	nodes[0].(*framework.NodeInfo).AddPod(filler)
	if err := nodes[70].(*framework.NodeInfo).RemovePod(klog.Background(), nodes[70].GetPods()[0].GetPod()); err != nil {
		t.Fatal(err)
	}
	if got := list(); got.Has("n000") || !got.Has("n070") || got.Len() != 70 {
		t.Errorf("after n000 filled and n070 freed a card: %d listed, n000 %t, n070 %t", got.Len(), got.Has("n000"), got.Has("n070"))
	}
}

// The list follows the ledger too: a share released before the scheduler's
// snapshot saw its pod go leaves room on its card at once.
func TestCandidatesFollowLedger(t *testing.T) {
	state := gpuledger.NewStandalone(gpuledger.Options{})
	pl := &GPUFit{state: state}
	// 40 of 100 nodes full; n099 holds seven cards and a share of the eighth.
	held := func(i int) int {
		switch {
		case i < 40:
			return 8
		case i == 99:
			return 7
		}
		return 0
	}
	nodes := candidateNodes(state, 100, held, func(i int) bool { return i == 99 })
	pod := st.MakePod().Name("p").UID("p").Obj()
	share := gpu.Request{Count: 1, Milli: 600}
	res, _ := pl.candidates(pod, share, nodes)
	if res == nil || res.NodeNames.Has("n099") {
		t.Fatalf("n099's last card has 500 left, a 600 share is listed there: %v", res)
	}
	// The share of n099 leaves; the NodeInfo still lists it.
	state.Release("n099-s", "")
	if res, _ := pl.candidates(pod, share, nodes); res == nil || !res.NodeNames.Has("n099") {
		t.Errorf("the share of n099 released: n099 not listed")
	}
}
