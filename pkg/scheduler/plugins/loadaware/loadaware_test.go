package loadaware

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/podload"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// now is the test clock; samples end 2 s before it, over a 10 s window.
var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func node(name, cpu, mem string) *corev1.Node {
	return st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{
		corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem, corev1.ResourcePods: "110"}).Obj()
}

// sample is a NodeMetrics with the same load on every resource.
func sample(name string, age time.Duration, pct int32, perf aischedv1alpha1.Performance) *aischedv1alpha1.NodeMetrics {
	return &aischedv1alpha1.NodeMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: aischedv1alpha1.NodeMetricsStatus{
			SampleTime:  metav1.NewTime(now.Add(-age)),
			Window:      metav1.Duration{Duration: 10 * time.Second},
			Utilization: aischedv1alpha1.Utilization{CPU: ptr.To(pct), Memory: ptr.To(pct), Network: ptr.To(pct), Disk: ptr.To(pct)},
			Performance: perf,
		},
	}
}

func perf(cores int32, mem string, netMbps, diskMBps int64) aischedv1alpha1.Performance {
	return aischedv1alpha1.Performance{Cores: cores, MaxFrequencyMHz: 3000, Memory: ptr.To(resource.MustParse(mem)), NetworkMbps: netMbps, DiskMBps: diskMBps}
}

func newTestPlugin(t *testing.T, args *config.LoadAwareArgs, samples ...*aischedv1alpha1.NodeMetrics) *LoadAware {
	t.Helper()
	if err := config.Decode(Name, nil, args); err != nil {
		t.Fatal(err)
	}
	pl := newPlugin(nil, args, clocktesting.NewFakePassiveClock(now))
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, s := range samples {
		if err := indexer.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	pl.metrics = indexer
	registerMetrics()
	return pl
}

func nodeInfo(n *corev1.Node, pods ...*corev1.Pod) *framework.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(n)
	return ni
}

// loadedNode is a 32-CPU, 128Gi node with four pods: one bound long
// before the sample (4 CPU, 8Gi requested), one bound inside the sample's
// window declaring cpu=8, memory=16Gi, network=125M, disk=10 (2 CPU, 4Gi
// requested), one assumed, not bound yet (1 CPU, 2Gi requested), and one
// put on the node directly an hour ago (16 CPU, 64Gi requested), which the
// sample holds.
func loadedNode() *framework.NodeInfo {
	return nodeInfo(node("n", "32", "128Gi"),
		utiltesting.MakePod("old", "ns").Node("n").Req(corev1.ResourceCPU, "4").Req(corev1.ResourceMemory, "8Gi").BoundAt(now.Add(-time.Minute)).Obj(),
		utiltesting.MakePod("recent", "ns").Node("n").Req(corev1.ResourceCPU, "2").Req(corev1.ResourceMemory, "4Gi").
			Annotation(podload.ExpectedLoadAnnotation, "cpu=8,memory=16Gi,network=125M,disk=10").BoundAt(now.Add(-5*time.Second)).Obj(),
		utiltesting.MakePod("assumed", "ns").Node("n").Req(corev1.ResourceCPU, "1").Req(corev1.ResourceMemory, "2Gi").Obj(),
		startedLongAgo(utiltesting.MakePod("pinned", "ns").Node("n").Req(corev1.ResourceCPU, "16").Req(corev1.ResourceMemory, "64Gi").Obj()),
	)
}

// startedLongAgo marks a pod started an hour before now without the
// PodScheduled condition, like one created with spec.nodeName whose
// kubelet has not reported the condition: it is in the sample already.
func startedLongAgo(p *corev1.Pod) *corev1.Pod {
	p.Status.StartTime = ptr.To(metav1.NewTime(now.Add(-time.Hour)))
	return p
}

func TestNodeLoad(t *testing.T) {
	s := &aischedv1alpha1.NodeMetricsStatus{
		SampleTime: metav1.NewTime(now.Add(-2 * time.Second)),
		Window:     metav1.Duration{Duration: 10 * time.Second},
		Utilization: aischedv1alpha1.Utilization{
			CPU: ptr.To[int32](40), Memory: ptr.To[int32](50), Network: ptr.To[int32](10), Disk: ptr.To[int32](20)},
		Performance: perf(32, "128Gi", 10000, 1000),
	}
	noNetwork := s.DeepCopy()
	noNetwork.Utilization.Network = nil
	tests := []struct {
		name       string
		sample     *aischedv1alpha1.NodeMetricsStatus
		want       load
		wantWeight float64
	}{
		{
			// The old pod is in the sample. The recent one adds its declared
			// load: cpu 8/32 = 0.25, memory 16/128 = 0.125, network
			// 125e6*8 / 10e9 = 0.1, disk 0.1; the assumed one its requests:
			// cpu 1/32 = 0.03125, memory 2/128 = 0.015625.
			// cpu 0.4+0.25+0.03125, memory 0.5+0.125+0.015625, network
			// 0.1+0.1, disk 0.2+0.1; L = 1.821875/4.
			name:       "fresh sample plus pods bound since",
			sample:     s,
			want:       load{value: [4]float64{0.68125, 0.640625, 0.2, 0.3}, known: [4]bool{true, true, true, true}},
			wantWeight: 0.45546875,
		},
		{
			// Requests of all pods: cpu (4+2+1+16)/32, memory
			// (8+4+2+64)/128; network and disk unknown, so
			// L = (0.71875+0.609375)/2.
			name:       "no sample: requests",
			want:       load{value: [4]float64{0.71875, 0.609375, 0, 0}, known: [4]bool{true, true, false, false}},
			wantWeight: 0.6640625,
		},
		{
			// Network falls back to unknown; L = (0.68125+0.640625+0.3)/3.
			name:       "sample without network",
			sample:     noNetwork,
			want:       load{value: [4]float64{0.68125, 0.640625, 0, 0.3}, known: [4]bool{true, true, false, true}},
			wantWeight: 0.540625,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := nodeLoad(loadedNode(), tc.sample)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(load{}), cmp.Comparer(approx)); diff != "" {
				t.Errorf("nodeLoad (-want,+got):\n%s", diff)
			}
			if w := got.weighted([4]float64{1, 1, 1, 1}); !approx(w, tc.wantWeight) {
				t.Errorf("L = %v, want %v", w, tc.wantWeight)
			}
		})
	}
}

func approx(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestScore(t *testing.T) {
	// "big": 32 cores, 128Gi, 10 Gb/s, 1000 MB/s; "small": 16 cores,
	// 64Gi, 10 Gb/s, 500 MB/s; both at 3000 MHz and 20% load on every
	// resource, so L = 0.2.
	// S(big) = (1+1+1+1)/4 = 1, score 100*1*0.8 = 80.
	// S(small) = (0.5+0.5+1+0.5)/4 = 0.625, score 100*0.625*0.8 = 50.
	big := sample("big", 2*time.Second, 20, perf(32, "128Gi", 10000, 1000))
	small := sample("small", 2*time.Second, 20, perf(16, "64Gi", 10000, 500))
	nodes := []fwk.NodeInfo{nodeInfo(node("big", "32", "128Gi")), nodeInfo(node("small", "16", "64Gi"))}
	want := map[string]int64{"big": 80, "small": 50}
	if diff := cmp.Diff(want, scores(t, newTestPlugin(t, &config.LoadAwareArgs{}, big, small), nodes)); diff != "" {
		t.Errorf("scores (-want,+got):\n%s", diff)
	}

	// "bare" has no sample: network, disk and frequency are unknown there,
	// so S counts cores and memory alone: big (1+1)/2 = 1, small
	// (0.5+0.5)/2 = 0.5, bare (32 CPU, 128Gi) 1. Bare's load is its
	// requests, none: score 100.
	nodes = append(nodes, nodeInfo(node("bare", "32", "128Gi")))
	want = map[string]int64{"big": 80, "small": 40, "bare": 100}
	if diff := cmp.Diff(want, scores(t, newTestPlugin(t, &config.LoadAwareArgs{}, big, small), nodes)); diff != "" {
		t.Errorf("scores with a node without a sample (-want,+got):\n%s", diff)
	}

	// Weights: only CPU counts; big at 20% CPU scores 80 either way, and a
	// weight change must not move a node with equal loads.
	args := &config.LoadAwareArgs{Weights: &config.LoadWeights{CPU: 1}}
	if got := scores(t, newTestPlugin(t, args, big, small), nodes[:1])["big"]; got != 80 {
		t.Errorf("CPU-only weights: score %d, want 80", got)
	}
}

func scores(t *testing.T, pl *LoadAware, nodes []fwk.NodeInfo) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	cs := framework.NewCycleState()
	pod := utiltesting.MakePod("p", "ns").Req(corev1.ResourceCPU, "1").Obj()
	if st := pl.PreScore(ctx, cs, pod, nodes); !st.IsSuccess() {
		t.Fatal(st)
	}
	out := map[string]int64{}
	for _, ni := range nodes {
		s, st := pl.Score(ctx, cs, pod, ni)
		if !st.IsSuccess() {
			t.Fatal(st)
		}
		out[ni.Node().Name] = s
	}
	return out
}

// TestStale: a sample older than the TTL is ignored. "idle" claims 0% but
// its sample is 2 minutes old and its pods request 24 of 32 CPUs and 96 of
// 128Gi, so it scores 100*(1-0.75) = 25 (S = 1, both nodes alike); "busy"
// is fresh at 40%: 60. The stale episode is counted once.
func TestStale(t *testing.T) {
	p := perf(32, "128Gi", 10000, 1000)
	pl := newTestPlugin(t, &config.LoadAwareArgs{}, sample("idle", 2*time.Minute, 0, p), sample("busy", 2*time.Second, 40, p))
	idle := nodeInfo(node("idle", "32", "128Gi"),
		utiltesting.MakePod("a", "ns").Node("idle").Req(corev1.ResourceCPU, "24").Req(corev1.ResourceMemory, "96Gi").BoundAt(now.Add(-time.Hour)).Obj())
	busy := nodeInfo(node("busy", "32", "128Gi"))
	before, err := testutil.GetCounterMetricValue(staleSamples)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		want := map[string]int64{"idle": 25, "busy": 60}
		if diff := cmp.Diff(want, scores(t, pl, []fwk.NodeInfo{idle, busy})); diff != "" {
			t.Errorf("scores (-want,+got):\n%s", diff)
		}
	}
	after, err := testutil.GetCounterMetricValue(staleSamples)
	if err != nil {
		t.Fatal(err)
	}
	if after-before != 1 {
		t.Errorf("stale samples counted %v times in three cycles, want once", after-before)
	}
}

// TestBurst places 12 pods one after the other, each declaring cpu=4,
// memory=16Gi, network=125M, disk=10, each on the best-scored node, the
// way the scheduler assumes them, while the samples stay as they were: an
// idle node at 0% and three at 30%. Each pod adds 0.25*(4/32 + 16/128 +
// 0.1 + 0.1) = 0.1125 to a node's L (ties go to the first node):
//
//	idle 0 -> 100, 0.1125 -> 89, 0.225 -> 78, 0.3375 -> 66 (3 pods)
//	b, c, d 0.3 -> 70 each take one: 0.4125 -> 59
//	idle 66 takes its 4th: 0.45 -> 55
//	b, c, d at 59 each take one: 0.525 -> 48 (47.5 rounded)
//	idle 55 takes its 5th: 0.5625 -> 44; b at 48 takes the 12th
//
// Without the pods bound since the sample, the idle node would take all 12.
func TestBurst(t *testing.T) {
	p := perf(32, "128Gi", 10000, 1000)
	names := []string{"idle", "b", "c", "d"}
	samples := []*aischedv1alpha1.NodeMetrics{sample("idle", 2*time.Second, 0, p)}
	for _, n := range names[1:] {
		samples = append(samples, sample(n, 2*time.Second, 30, p))
	}
	pl := newTestPlugin(t, &config.LoadAwareArgs{}, samples...)
	var nodes []fwk.NodeInfo
	for _, n := range names {
		nodes = append(nodes, nodeInfo(node(n, "32", "128Gi")))
	}
	placed := map[string]int{}
	for i := range 12 {
		got := scores(t, pl, nodes)
		best := 0
		for j, ni := range nodes {
			if got[ni.Node().Name] > got[nodes[best].Node().Name] {
				best = j
			}
		}
		pod := utiltesting.MakePod("p"+strings.Repeat("x", i), "ns").Node(names[best]).
			Annotation(podload.ExpectedLoadAnnotation, "cpu=4,memory=16Gi,network=125M,disk=10").Obj()
		nodes[best].(*framework.NodeInfo).AddPod(pod)
		placed[names[best]]++
	}
	want := map[string]int{"idle": 5, "b": 3, "c": 2, "d": 2}
	if diff := cmp.Diff(want, placed); diff != "" {
		t.Errorf("placements (-want,+got):\n%s", diff)
	}
}

func TestFilter(t *testing.T) {
	p := perf(32, "128Gi", 10000, 1000)
	args := &config.LoadAwareArgs{Thresholds: &config.LoadThresholds{CPU: 60}}
	pl := newTestPlugin(t, args, sample("n", 2*time.Second, 50, p), sample("stale", time.Hour, 99, p))
	ctx := context.Background()
	pod := utiltesting.MakePod("p", "ns").Obj()

	// 50% measured plus the recent pod's 8 CPUs (0.25) and the assumed
	// pod's 1 (0.03125): 78% > 60%.
	st := pl.Filter(ctx, nil, pod, loadedNode())
	if st.Code() != fwk.Unschedulable || !strings.Contains(st.Message(), "node cpu load 78% is above the threshold 60%") {
		t.Errorf("Filter on a loaded node: %v, want Unschedulable naming cpu 78%% and the threshold 60%%", st)
	}
	// Without the pods bound since the sample: 50% passes.
	if st := pl.Filter(ctx, nil, pod, nodeInfo(node("n", "32", "128Gi"))); !st.IsSuccess() {
		t.Errorf("Filter at 50%%: %v, want success", st)
	}
	// A stale sample says nothing: the node passes.
	if st := pl.Filter(ctx, nil, pod, nodeInfo(node("stale", "32", "128Gi"))); !st.IsSuccess() {
		t.Errorf("Filter on a stale node: %v, want success", st)
	}
}

func TestPreFilter(t *testing.T) {
	ctx := context.Background()
	bad := utiltesting.MakePod("p", "ns").Annotation(podload.ExpectedLoadAnnotation, "cpu=lots").Obj()
	pl := newTestPlugin(t, &config.LoadAwareArgs{})
	_, st := pl.PreFilter(ctx, nil, bad, nil)
	if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), podload.ExpectedLoadAnnotation) {
		t.Errorf("PreFilter of a bad annotation: %v, want UnschedulableAndUnresolvable naming the annotation", st)
	}
	good := utiltesting.MakePod("p", "ns").Obj()
	if _, st := pl.PreFilter(ctx, nil, good, nil); st.Code() != fwk.Skip {
		t.Errorf("PreFilter without thresholds: %v, want Skip", st)
	}
	filtering := newTestPlugin(t, &config.LoadAwareArgs{Thresholds: &config.LoadThresholds{Disk: 80}})
	if _, st := filtering.PreFilter(ctx, nil, good, nil); !st.IsSuccess() {
		t.Errorf("PreFilter with a threshold: %v, want success", st)
	}
}
