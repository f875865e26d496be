package fgdbaseline

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
)

// The paper's maxima: 128 cores and 8 cards.
const maxCPU, maxGPU = 128000.0, 8000.0

func TestBestFitScore(t *testing.T) {
	for _, tc := range []struct {
		name                             string
		cpuFree, gpuFree, cpuReq, gpuReq int64
		want                             int64
	}{
		// Left 0 and 0: 100 * (1 - 0) = 100.
		{"exact fit", 8000, 1000, 8000, 1000, 100},
		// Left 64000 CPU and 4000 GPU: 1 - (0.5*0.5 + 0.5*0.5) = 0.5.
		{"half left", 72000, 4500, 8000, 500, 50},
		// Left 128000 and 8000: 1 - (0.5 + 0.5) = 0.
		{"everything left", 136000, 9000, 8000, 1000, 0},
		// Left 1000 CPU and 0 GPU: 1 - 0.5*1000/128000 = 0.99609...,
		// truncated to 99.
		{"truncated", 9000, 470, 8000, 470, 99},
		{"does not fit", 1000, 1000, 8000, 0, 0},
		{"GPU does not fit", 9000, 400, 8000, 470, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := BestFitScore(tc.cpuFree, tc.gpuFree, tc.cpuReq, tc.gpuReq, maxCPU, maxGPU); got != tc.want {
				t.Errorf("BestFitScore = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestDotProdScore(t *testing.T) {
	for _, tc := range []struct {
		name                             string
		cpuFree, gpuFree, cpuReq, gpuReq int64
		want                             int64
	}{
		// dot = 1*1 + 1*1 = 2: 100 * (1 - 1) = 0.
		{"full node, full pod", 128000, 8000, 128000, 8000, 0},
		// dot = (64000/128000)(32000/128000) + (4000/8000)(1000/8000)
		//     = 0.125 + 0.0625 = 0.1875: 100 * (1 - 0.09375) = 90.625 -> 90.
		{"half-free node", 64000, 4000, 32000, 1000, 90},
		// A CPU pod on a node without GPUs: dot = 0.5*0.25 = 0.125 ->
		// 100 * 0.9375 = 93.
		{"CPU only", 64000, 0, 32000, 0, 93},
		{"CPU does not fit", 1000, 8000, 2000, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DotProdScore(tc.cpuFree, tc.gpuFree, tc.cpuReq, tc.gpuReq, maxCPU, maxGPU); got != tc.want {
				t.Errorf("DotProdScore = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestBestFitNormalizeScore(t *testing.T) {
	pl := &BestFit{}
	scores := fwk.NodeScoreList{{Name: "a", Score: 40}, {Name: "b", Score: 90}, {Name: "c", Score: 65}, {Name: "d", Score: -10}}
	if st := pl.NormalizeScore(context.Background(), nil, nil, scores); st != nil {
		t.Fatal(st)
	}
	// Lowest -10, highest 90: (s+10)*100/100.
	want := fwk.NodeScoreList{{Name: "a", Score: 50}, {Name: "b", Score: 100}, {Name: "c", Score: 75}, {Name: "d", Score: 0}}
	if diff := cmp.Diff(want, scores); diff != "" {
		t.Errorf("normalized (-want,+got):\n%s", diff)
	}
	equal := fwk.NodeScoreList{{Name: "a", Score: 70}, {Name: "b", Score: 70}}
	_ = pl.NormalizeScore(context.Background(), nil, nil, equal)
	if equal[0].Score != 0 || equal[1].Score != 0 {
		t.Errorf("equal scores normalized to %v, want all 0 as the paper's", equal)
	}
}

// Score reads the node's free CPU from its pods and its free GPU from the
// shared card state, shares included.
func TestScoreReadsNode(t *testing.T) {
	state := gpuledger.NewStandalone(gpuledger.Options{})
	node := st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "64", gpu.ResourceName: "4"}).Obj()
	node.Labels = map[string]string{gpu.GFDCountLabel: "4", gpu.GFDMemoryLabel: "16384", gpu.GFDProductLabel: "Tesla-T4"}
	whole := st.MakePod().Name("w").UID("w").Node("n").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "16", gpu.ResourceName: "1"}).Obj()
	shared := st.MakePod().Name("s").UID("s").Node("n").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "8"}).Obj()
	shared.Annotations = map[string]string{gpu.MilliAnnotation: "500"}
	state.Assign("w", "n", []int{0}, gpuledger.Share{})
	state.Assign("s", "n", []int{1}, gpuledger.Share{Milli: 500})
	ni := framework.NewNodeInfo(whole, shared)
	ni.SetNode(node)
	pod := st.MakePod().Name("p").UID("p").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "8"}).Obj()
	pod.Annotations = map[string]string{gpu.MilliAnnotation: "500"}

	v := vectors{state: state, maxCPU: maxCPU, maxGPU: maxGPU, gpuFree: gpuledger.NewNodeMemo[struct{}, int64](state)}
	cpu, g := v.free(ni, true)
	// CPU 64000 - 24000; GPU 4000 - 1000 - 500.
	if cpu != 40000 || g != 2500 {
		t.Fatalf("free = %d CPU, %d GPU; want 40000, 2500", cpu, g)
	}
	// The share leaves; the ledger knows before the NodeInfo changes: the
	// free GPU is read again, not remembered.
	state.ForgetPod(shared)
	if _, g := v.free(ni, true); g != 3000 {
		t.Fatalf("after the share left, free GPU %d, want 3000", g)
	}
	state.Assign("s", "n", []int{1}, gpuledger.Share{Milli: 500})
	bf := &BestFit{v}
	got, status := bf.Score(context.Background(), framework.NewCycleState(), pod, ni)
	// Left 32000 and 2000: 1 - (0.5*0.25 + 0.5*0.25) = 0.75.
	if !status.IsSuccess() || got != 75 {
		t.Errorf("BestFit.Score = %d, %v; want 75", got, status)
	}
	dp := &DotProd{v}
	got, _ = dp.Score(context.Background(), framework.NewCycleState(), pod, ni)
	// dot = (40000/128000)(8000/128000) + (2500/8000)(500/8000)
	//     = 0.01953125 + 0.01953125 = 0.0390625 -> 100 * 0.98046875 = 98.
	if got != 98 {
		t.Errorf("DotProd.Score = %d, want 98", got)
	}
}
