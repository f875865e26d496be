package coscheduling

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
	"github.com/aisched/aisched/pkg/podgroup"
)

var t0 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func newPlugin() *Coscheduling {
	gpus := gpuledger.NewStandalone(gpuledger.Options{})
	return &Coscheduling{groups: podgroup.New(), gpus: gpus, nodeGPUs: gpuledger.NewNodeMemo[struct{}, gpuledger.NodeGPUs](gpus)}
}

func queued(t testing.TB, name string, prio int32, created, queuedAt time.Time, group string) *framework.QueuedPodInfo {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), CreationTimestamp: metav1.NewTime(created)},
		Spec:       corev1.PodSpec{Priority: &prio},
	}
	if group != "" {
		pod.Labels = map[string]string{podgroup.NameLabel: group, podgroup.MinAvailableLabel: "2"}
	}
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		t.Fatal(err)
	}
	return &framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: queuedAt}}
}

func TestLess(t *testing.T) {
	pl := newPlugin()
	// Group g was created at t0 (its first member); its second member is
	// created later, after the regular pod r.
	g1 := queued(t, "g1", 0, t0, t0.Add(5*time.Second), "g")
	r := queued(t, "r", 0, t0.Add(time.Second), t0.Add(time.Second), "")
	g2 := queued(t, "g2", 0, t0.Add(2*time.Second), t0.Add(2*time.Second), "g")
	h := queued(t, "h1", 0, t0, t0, "h")
	high := queued(t, "high", 10, t0.Add(time.Hour), t0.Add(time.Hour), "")
	pl.Less(g1, g1) // g's time is learnt from g1
	for _, tc := range []struct {
		name string
		a, b fwk.QueuedEntityInfo
		want bool
	}{
		{"higher priority first", high, g1, true},
		{"lower priority last", g1, high, false},
		// g2 counts with g's creation time t0, before r's t0+1s.
		{"group member against a later regular pod", g2, r, true},
		{"regular pod against an earlier group", r, g2, false},
		// Same group time t0: group key g before h.
		{"equal group times: increasing group key", g2, h, true},
		{"equal group times, reversed", h, g2, false},
		// Same group: queue time.
		{"same group: queue time", g2, g1, true},
	} {
		if got := pl.Less(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: Less = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestLessIsStrictWeakOrder checks irreflexivity, asymmetry, transitivity
// and transitivity of incomparability on random queues.
func TestLessIsStrictWeakOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		pl := newPlugin()
		var items []fwk.QueuedEntityInfo
		for i := range 12 {
			group := ""
			if g := rng.IntN(4); g > 0 {
				group = fmt.Sprintf("g%d", g)
			}
			created := t0.Add(time.Duration(rng.IntN(3)) * time.Second)
			queuedAt := t0.Add(time.Duration(rng.IntN(3)) * time.Second)
			items = append(items, queued(t, fmt.Sprintf("p%d-%d", round, i), int32(rng.IntN(2)), created, queuedAt, group))
		}
		// Learn every group's time first: the order is defined on stable keys.
		for _, it := range items {
			pl.sortKey(it)
		}
		less := pl.Less
		equiv := func(a, b fwk.QueuedEntityInfo) bool { return !less(a, b) && !less(b, a) }
		for _, a := range items {
			if less(a, a) {
				t.Fatalf("Less(a, a) for %s", name(a))
			}
			for _, b := range items {
				if less(a, b) && less(b, a) {
					t.Fatalf("Less both ways for %s and %s", name(a), name(b))
				}
				for _, c := range items {
					if less(a, b) && less(b, c) && !less(a, c) {
						t.Fatalf("not transitive: %s < %s < %s", name(a), name(b), name(c))
					}
					if equiv(a, b) && equiv(b, c) && !equiv(a, c) {
						t.Fatalf("incomparability not transitive: %s ~ %s ~ %s", name(a), name(b), name(c))
					}
				}
			}
		}
	}
}

func name(e fwk.QueuedEntityInfo) string { return e.(*framework.QueuedPodInfo).Pod.Name }

func podReq(name string, cpu string, gpus int64) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
		}}}},
	}
	if gpus > 0 {
		q := *resource.NewQuantity(gpus, resource.DecimalSI)
		p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = q
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": q}
	}
	return p
}

// sharePod asks for milli thousandths of one card.
func sharePod(name string, milli int) *corev1.Pod {
	p := podReq(name, "1", 0)
	p.Annotations = map[string]string{gpu.MilliAnnotation: fmt.Sprint(milli)}
	return p
}

// nodeInfo is a node of gpus 16 GiB T4 cards, known from GPU Feature
// Discovery labels, with pods on it.
func nodeInfo(name, cpu string, gpus int64, pods ...*corev1.Pod) fwk.NodeInfo {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		gpu.GFDCountLabel: fmt.Sprint(gpus), gpu.GFDMemoryLabel: "16384", gpu.GFDProductLabel: "Tesla-T4",
	}}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
		"nvidia.com/gpu":      *resource.NewQuantity(gpus, resource.DecimalSI),
	}}}
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(n)
	return ni
}

func TestPlaceable(t *testing.T) {
	ps := podReq("ps", "1", 0)
	workers := []*corev1.Pod{podReq("w0", "1", 2), podReq("w1", "1", 2), podReq("w2", "1", 2), podReq("w3", "1", 2)}
	job := append([]*corev1.Pod{ps}, workers...)
	tainted := nodeInfo("tainted", "8", 4)
	tainted.Node().Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
	for _, tc := range []struct {
		name  string
		pods  []*corev1.Pod
		nodes []fwk.NodeInfo
		want  int
	}{
		// The TFJob: 4 GPUs hold PS + 2 workers, not the whole job.
		{"TFJob, 4 GPUs", job, []fwk.NodeInfo{nodeInfo("a", "8", 4)}, 3},
		{"TFJob, 8 GPUs", job, []fwk.NodeInfo{nodeInfo("a", "8", 4), nodeInfo("b", "8", 4)}, 5},
		// Fragmentation: 4 free GPUs in total, one per node; 2-GPU workers fit nowhere.
		{"fragmented", workers, []fwk.NodeInfo{nodeInfo("a", "8", 1), nodeInfo("b", "8", 1), nodeInfo("c", "8", 1), nodeInfo("d", "8", 1)}, 0},
		// Used resources count: a node with 3 of 4 GPUs taken holds no worker.
		{"used GPUs", workers[:1], []fwk.NodeInfo{nodeInfo("a", "8", 4, podReq("x", "1", 3))}, 0},
		{"CPU is short", []*corev1.Pod{podReq("big", "6", 0), podReq("big2", "6", 0)}, []fwk.NodeInfo{nodeInfo("a", "8", 0)}, 1},
		{"tainted node", workers[:1], []fwk.NodeInfo{tainted}, 0},
		// Best fit keeps the 4-GPU node for the 4-GPU pod.
		{"best fit", []*corev1.Pod{podReq("two", "1", 2), podReq("four", "1", 4)}, []fwk.NodeInfo{nodeInfo("a", "8", 4), nodeInfo("b", "8", 2)}, 2},
		// Shares count: two cards hold four halves, but only two shares
		// of 600 (a card cannot hold 1200 thousandths).
		{"halves of two cards", []*corev1.Pod{sharePod("h0", 500), sharePod("h1", 500), sharePod("h2", 500), sharePod("h3", 500)}, []fwk.NodeInfo{nodeInfo("a", "8", 2)}, 4},
		{"shares that do not fit", []*corev1.Pod{sharePod("s0", 600), sharePod("s1", 600), sharePod("s2", 600)}, []fwk.NodeInfo{nodeInfo("a", "8", 2)}, 2},
		{"a share on a CPU node", []*corev1.Pod{sharePod("s0", 100)}, []fwk.NodeInfo{nodeInfo("a", "8", 0)}, 0},
		// A whole card is not given beside a share: one card is taken by
		// the share, the 2-GPU pod needs two untouched cards.
		{"whole cards beside a share", []*corev1.Pod{sharePod("s", 100), podReq("two", "1", 2)}, []fwk.NodeInfo{nodeInfo("a", "8", 2)}, 1},
	} {
		if got := newPlugin().placeable(tc.pods, tc.nodes, len(tc.pods)); got != tc.want {
			t.Errorf("%s: placeable = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestSignPod(t *testing.T) {
	pl := newPlugin()
	sign := func(pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
		t.Helper()
		return pl.SignPod(context.Background(), pod)
	}
	pod := func(prio int32, cpu string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: labels},
			Spec: corev1.PodSpec{Priority: &prio, Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)},
			}}}},
		}
	}
	a, s := sign(pod(0, "1", nil))
	if !s.IsSuccess() || len(a) != 1 {
		t.Fatalf("a pod without a group: %v %v, want one fragment", a, s)
	}
	if b, _ := sign(pod(0, "1", nil)); !cmp.Equal(a, b) {
		t.Errorf("alike pods sign %v and %v", a, b)
	}
	for name, p := range map[string]*corev1.Pod{
		"higher priority": pod(10, "1", nil),
		"larger request":  pod(0, "2", nil),
		"group of one":    pod(0, "1", map[string]string{podgroup.NameLabel: "g", podgroup.MinAvailableLabel: "1"}),
	} {
		if b, s := sign(p); !s.IsSuccess() || cmp.Equal(a, b) {
			t.Errorf("%s: %v %v, want a success that differs from %v", name, b, s, a)
		}
	}
	if _, s := sign(pod(0, "1", map[string]string{podgroup.NameLabel: "g", podgroup.MinAvailableLabel: "2"})); s.Code() != fwk.Unschedulable {
		t.Errorf("gang member: %v, want Unschedulable (not batched)", s)
	}
	if _, s := sign(pod(0, "1", map[string]string{podgroup.NameLabel: "g", podgroup.MinAvailableLabel: "x"})); s.Code() != fwk.Unschedulable {
		t.Errorf("malformed group label: %v, want Unschedulable (not batched)", s)
	}
}
