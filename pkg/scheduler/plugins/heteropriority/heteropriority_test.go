package heteropriority

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
	"github.com/aisched/aisched/pkg/scheduler/podkind"
)

// Two CPU nodes (32 CPU, 128Gi) and two GPU nodes, so a = 2/4 = 0.5:
// "a100" with 8 A100 (64 CPU, 512Gi) and "t4" with 4 T4 (32 CPU, 192Gi).
func testNodes() []*corev1.Node {
	res := func(cpu, mem, gpus string) map[corev1.ResourceName]string {
		r := map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem, corev1.ResourcePods: "110"}
		if gpus != "" {
			r[gpu.ResourceName] = gpus
		}
		return r
	}
	return []*corev1.Node{
		st.MakeNode().Name("cpu-0").Capacity(res("32", "128Gi", "")).Obj(),
		st.MakeNode().Name("cpu-1").Capacity(res("32", "128Gi", "")).Obj(),
		st.MakeNode().Name("a100").Capacity(res("64", "512Gi", "8")).Obj(),
		st.MakeNode().Name("t4").Capacity(res("32", "192Gi", "4")).Obj(),
	}
}

func testInventories() []*aischedv1alpha1.GPUInventory {
	cards := func(n int, g aischedv1alpha1.GPU) []aischedv1alpha1.GPU {
		var out []aischedv1alpha1.GPU
		for i := range n {
			g.Index = int32(i)
			out = append(out, g)
		}
		return out
	}
	return []*aischedv1alpha1.GPUInventory{
		{ObjectMeta: metav1.ObjectMeta{Name: "a100"}, Spec: aischedv1alpha1.GPUInventorySpec{GPUs: cards(8, aischedv1alpha1.GPU{
			Model: "A100", MemoryMiB: 40960, CUDACores: 6912, ComputeCapability: "8.0", MemoryBandwidthGBps: 1555, MaxClockMHz: 1410})}},
		{ObjectMeta: metav1.ObjectMeta{Name: "t4"}, Spec: aischedv1alpha1.GPUInventorySpec{GPUs: cards(4, aischedv1alpha1.GPU{
			Model: "T4", MemoryMiB: 15360, CUDACores: 2560, ComputeCapability: "7.5", MemoryBandwidthGBps: 320, MaxClockMHz: 1590})}},
	}
}

func newPlugin(t *testing.T) *HeteroPriority {
	t.Helper()
	client := fake.NewClientset()
	h, err := frameworkruntime.NewFramework(context.Background(), nil, nil,
		frameworkruntime.WithSnapshotSharedLister(schedcache.NewSnapshot(nil, testNodes())),
		frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(client, 0)))
	if err != nil {
		t.Fatal(err)
	}
	state := gpuledger.NewStandalone(gpuledger.Options{})
	for _, inv := range testInventories() {
		state.ObserveInventory(inv)
	}
	for _, n := range testNodes() {
		state.ObserveNode(n)
	}
	pl, err := New(context.Background(), nil, h, state)
	if err != nil {
		t.Fatal(err)
	}
	return pl.(*HeteroPriority)
}

func TestScore(t *testing.T) {
	pod := func(cpu, mem, gpus string, annotations map[string]string) *corev1.Pod {
		r := map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem}
		if gpus != "" {
			r[gpu.ResourceName] = gpus
		}
		p := st.MakePod().Name("p").UID("p").Req(r).Obj()
		p.Annotations = annotations
		return p
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want map[string]int64
	}{
		{
			// lr on an empty 32-CPU/128Gi node: ((32-4)/32 + (128-16)/128) / 2 * 100 = 87.5.
			// CPU node: 100*0.5 + 0.5*87.5 = 93.75 -> 94.
			// a100: lr = ((64-4)/64 + (512-16)/512) / 2 * 100 = (93.75 + 96.875) / 2 = 95.3125; 0.5*95.3125 = 47.66 -> 48.
			// t4: lr = ((32-4)/32 + (192-16)/192) / 2 * 100 = (87.5 + 91.667) / 2 = 89.583; 0.5*89.583 = 44.79 -> 45.
			name: "CPU pod prefers CPU nodes",
			pod:  pod("4", "16Gi", "", nil),
			want: map[string]int64{"cpu-0": 94, "a100": 48, "t4": 45},
		},
		{
			// Cluster bests: cc 8.0, bandwidth 1555, clock 1590.
			// a100: S_card = (8/8 + 1555/1555 + 1410/1590) / 3 = 0.96226;
			//   waste: cards 7/8, memory 40960/40960, cores 6912/6912, cpu 56/64, mem 480/512
			//   = (0.875 + 1 + 1 + 0.875 + 0.9375) / 5 = 0.9375, S_sim = 0.0625;
			//   100 * (0.96226 + 0.0625) / 2 = 51.24 -> 51.
			// t4: S_card = (7.5/8 + 320/1555 + 1590/1590) / 3 = 0.71443;
			//   waste: 3/4, 1, 1, 24/32, 160/192 = (0.75 + 1 + 1 + 0.75 + 0.8333) / 5 = 0.86667, S_sim = 0.13333;
			//   100 * (0.71443 + 0.13333) / 2 = 42.39 -> 42.
			name: "GPU pod without per-card constraint",
			pod:  pod("8", "32Gi", "1", nil),
			want: map[string]int64{"a100": 51, "t4": 42},
		},
		{
			// The 15Gi constraint makes the T4 cards fit exactly:
			// t4 memory waste (15360-15360)/15360 = 0: (0.75 + 0 + 1 + 0.75 + 0.8333) / 5 = 0.66667,
			//   S_sim = 0.33333, 100 * (0.71443 + 0.33333) / 2 = 52.39 -> 52.
			// a100 memory waste (40960-15360)/40960 = 0.625: (0.875 + 0.625 + 1 + 0.875 + 0.9375) / 5 = 0.8625,
			//   S_sim = 0.1375, 100 * (0.96226 + 0.1375) / 2 = 54.99 -> 55.
			name: "GPU pod with a memory constraint",
			pod:  pod("8", "32Gi", "1", map[string]string{gpu.MemoryAnnotation: "15Gi"}),
			want: map[string]int64{"a100": 55, "t4": 52},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pl := newPlugin(t)
			cs := framework.NewCycleState()
			if s := pl.PreScore(context.Background(), cs, tc.pod, nil); !s.IsSuccess() {
				t.Fatal(s)
			}
			for node, want := range tc.want {
				ni, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(node)
				if err != nil {
					t.Fatal(err)
				}
				got, s := pl.Score(context.Background(), cs, tc.pod, ni)
				if !s.IsSuccess() {
					t.Fatal(s)
				}
				if got != want {
					t.Errorf("node %s: score %d, want %d", node, got, want)
				}
				// The batching path scores without PreScore; same result.
				if again, _ := pl.Score(context.Background(), framework.NewCycleState(), tc.pod, ni); again != got {
					t.Errorf("node %s without PreScore: score %d, want %d", node, again, got)
				}
			}
		})
	}
}

// A CPU node outranks a GPU node whatever their load: the CPU node's score
// is at least 100a, the GPU node's at most 100a.
func TestCPUPodScoreOrder(t *testing.T) {
	for _, a := range []float64{0.1, 0.5, 0.9} {
		for _, lrCPU := range []float64{0, 1, 50, 100} {
			for _, lrGPU := range []float64{0, 50, 99, 100} {
				cpuScore, gpuScore := cpuPodScore(a, false, lrCPU), cpuPodScore(a, true, lrGPU)
				if cpuScore < gpuScore {
					t.Errorf("a=%v: CPU node (lr %v) scores %d < GPU node (lr %v) %d", a, lrCPU, cpuScore, lrGPU, gpuScore)
				}
			}
		}
	}
}

// With cpuPodScore: Tier a CPU pod ranks CPU nodes 100 and GPU nodes 0,
// whatever their load, and a plugin for some pod kinds skips the others.
func TestTierAndPodKinds(t *testing.T) {
	pl := newPlugin(t)
	pl.tier = true
	pl.kinds = podkind.NewSet([]config.PodKind{config.PodKindCPU}, pl.state)
	cpu := st.MakePod().Name("c").UID("c").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "4"}).Obj()
	cs := framework.NewCycleState()
	if s := pl.PreScore(context.Background(), cs, cpu, nil); !s.IsSuccess() {
		t.Fatal(s)
	}
	for node, want := range map[string]int64{"cpu-0": 100, "cpu-1": 100, "a100": 0, "t4": 0} {
		ni, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(node)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := pl.Score(context.Background(), cs, cpu, ni); got != want {
			t.Errorf("%s: %d, want %d", node, got, want)
		}
	}
	whole := st.MakePod().Name("g").UID("g").Req(map[corev1.ResourceName]string{gpu.ResourceName: "1"}).Obj()
	if s := pl.PreScore(context.Background(), framework.NewCycleState(), whole, nil); !s.IsSkip() {
		t.Errorf("a whole-card pod with podKinds [CPU]: %v, want Skip", s)
	}
}
