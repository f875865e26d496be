package pccbalance

import (
	"context"
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/scheduler/workload"
)

const gpuName corev1.ResourceName = "nvidia.com/gpu"

func TestPearson(t *testing.T) {
	tests := []struct {
		name string
		x, y []float64
		want float64
	}{
		{"proportional", []float64{1, 2, 3}, []float64{2, 4, 6}, 1},
		{"opposite", []float64{1, 2, 3}, []float64{3, 2, 1}, -1},
		{"constant x", []float64{1, 1, 1}, []float64{1, 2, 3}, 0},
		{"all zero", []float64{0, 0, 0}, []float64{0, 0, 0}, 0},
		// x=(1,0,0), y=(0,1,0): mean 1/3 each; sxy = -1/9-1/9+... = -1/3,
		// sxx = syy = 2/3, rho = -(1/3)/(2/3) = -0.5.
		{"one-hot", []float64{1, 0, 0}, []float64{0, 1, 0}, -0.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Pearson(tc.x, tc.y); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("Pearson = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestScore(t *testing.T) {
	node := func(name string) *corev1.Node {
		return st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{
			corev1.ResourceCPU: "8", corev1.ResourceMemory: "16Gi", gpuName: "4", corev1.ResourcePods: "110",
		}).Obj()
	}
	// Every node has 8 CPU, 16Gi and 4 GPUs. The pod asks 1 CPU and 1Gi:
	// p = (1/8, 1/16, 0) = (0.125, 0.0625, 0).
	pod := st.MakePod().Name("p").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi"}).Obj()
	tests := []struct {
		name       string
		running    []*corev1.Pod
		wantAbs    int64
		wantSigned int64
	}{
		{
			// n = (0, 0, 0) has no variance: rho = 0, abs 100, signed 50.
			name: "empty node", wantAbs: 100, wantSigned: 50,
		},
		{
			// n = (4/8, 4/16, 0) = (0.5, 0.25, 0) = 4p: rho = 1, abs 0, signed 0.
			name:    "busy like the pod",
			running: []*corev1.Pod{st.MakePod().Name("a").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "4Gi"}).Obj()},
			wantAbs: 0, wantSigned: 0,
		},
		{
			// n = (0, 0, 1). dp = (1/16, 0, -1/16), dn = (-1/3, -1/3, 2/3):
			// sxy = -1/48 - 2/48 = -1/16, sxx = 2/256, syy = 6/9,
			// rho = -0.0625 / sqrt(0.0078125 * 0.6667) = -0.866;
			// abs (1 - 0.866) * 100 = 13.4 -> 13, signed (1 + 0.866) / 2 * 100 = 93.3 -> 93.
			name:    "GPUs busy, CPU idle",
			running: []*corev1.Pod{st.MakePod().Name("g").Req(map[corev1.ResourceName]string{gpuName: "4"}).Obj()},
			wantAbs: 13, wantSigned: 93,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ni := framework.NewNodeInfo(tc.running...)
			ni.SetNode(node("n"))
			for mode, want := range map[config.PCCBalanceMode]int64{config.PCCBalanceAbs: tc.wantAbs, config.PCCBalanceSigned: tc.wantSigned} {
				pl := newPlugin(t, `{"mode":"`+string(mode)+`"}`)
				cs := framework.NewCycleState()
				if s := pl.PreScore(context.Background(), cs, pod, nil); !s.IsSuccess() {
					t.Fatal(s)
				}
				got, s := pl.Score(context.Background(), cs, pod, ni)
				if !s.IsSuccess() {
					t.Fatal(s)
				}
				if got != want {
					t.Errorf("mode %s: score %d, want %d", mode, got, want)
				}
				// Without PreScore (the scheduler's batching path) the score is the same.
				if got, _ := pl.Score(context.Background(), framework.NewCycleState(), pod, ni); got != want {
					t.Errorf("mode %s without PreScore: score %d, want %d", mode, got, want)
				}
			}
		})
	}
}

func TestNewRejectsBadArgs(t *testing.T) {
	_, err := New(context.Background(), &runtime.Unknown{Raw: []byte(`{"mode":"square"}`)}, nil, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "pluginConfig[PCCBalance].args.mode") {
		t.Errorf("New with mode square: %v, want an error naming the field", err)
	}
}

func TestSignPod(t *testing.T) {
	pl := newPlugin(t, "")
	a := st.MakePod().Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj()
	b := st.MakePod().Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "2"}).Obj()
	fa, _ := pl.SignPod(context.Background(), a)
	fb, _ := pl.SignPod(context.Background(), b)
	if len(fa) != 1 || len(fb) != 1 || fa[0].Key != fb[0].Key {
		t.Fatalf("fragments %v and %v", fa, fb)
	}
	if equalInts(fa[0].Value.([]int64), fb[0].Value.([]int64)) {
		t.Errorf("pods with different CPU requests sign alike: %v", fa[0].Value)
	}
}

func newPlugin(t *testing.T, args string) *PCCBalance {
	t.Helper()
	var obj runtime.Object
	if args != "" {
		obj = &runtime.Unknown{Raw: []byte(args)}
	}
	pl, err := New(context.Background(), obj, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pl.(*PCCBalance)
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A plugin for some pod kinds skips the others at PreScore, so the
// framework does not score them with it.
func TestPodKinds(t *testing.T) {
	pl := newPlugin(t, `{"podKinds":["CPU"]}`)
	cpu := st.MakePod().Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj()
	whole := st.MakePod().Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", "nvidia.com/gpu": "1"}).Obj()
	if s := pl.PreScore(context.Background(), framework.NewCycleState(), cpu, nil); !s.IsSuccess() {
		t.Errorf("CPU pod: %v, want success", s)
	}
	if s := pl.PreScore(context.Background(), framework.NewCycleState(), whole, nil); !s.IsSkip() {
		t.Errorf("whole-card pod: %v, want Skip", s)
	}
	fc, _ := pl.SignPod(context.Background(), cpu)
	fw, _ := pl.SignPod(context.Background(), whole)
	if len(fc) != 2 || fc[1].Value == fw[1].Value {
		t.Errorf("signs %v and %v: want the ranked kind in them", fc, fw)
	}
}

// With cpuPodsOnGPUNodes: WithoutGPUWork, a CPU pod ranks GPU nodes alike
// (0) once a GPU pod arrived, and as usual before and on CPU nodes.
func TestCPUPodsOnGPUNodes(t *testing.T) {
	work := workload.New()
	pl, err := New(context.Background(), &runtime.Unknown{Raw: []byte(`{"cpuPodsOnGPUNodes":"WithoutGPUWork"}`)}, nil, work, nil)
	if err != nil {
		t.Fatal(err)
	}
	gpuNode := framework.NewNodeInfo(st.MakePod().Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "4"}).Obj())
	gpuNode.SetNode(st.MakeNode().Name("g").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "16Gi", gpuName: "4"}).Obj())
	cpuNode := framework.NewNodeInfo(st.MakePod().Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "4"}).Obj())
	cpuNode.SetNode(st.MakeNode().Name("c").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "16Gi"}).Obj())
	pod := st.MakePod().Name("p").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "4Gi"}).Obj()
	score := func(ni *framework.NodeInfo) int64 {
		t.Helper()
		cs := framework.NewCycleState()
		if s := pl.(*PCCBalance).PreScore(context.Background(), cs, pod, nil); !s.IsSuccess() {
			t.Fatal(s)
		}
		got, _ := pl.(*PCCBalance).Score(context.Background(), cs, pod, ni)
		return got
	}
	before := score(gpuNode)
	if before == 0 {
		t.Fatal("the GPU node scores 0 before any GPU work: the test cannot tell")
	}
	work.Observe(true)
	if got := score(gpuNode); got != 0 {
		t.Errorf("GPU node with GPU work arriving: %d, want 0", got)
	}
	if got := score(cpuNode); got != before {
		t.Errorf("CPU node: %d, want %d as on a GPU node before GPU work", got, before)
	}
}
