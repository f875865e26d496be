package gpufit

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
)

// The test node "mixed" has cards 0-1 of 16 GiB (T4) and 2-3 of 32 GiB
// (V100); "labels" has only GPU Feature Discovery labels (2 x 40 GiB A100);
// "cpu" has no GPU.
func inventory() *aischedv1alpha1.GPUInventory {
	inv := &aischedv1alpha1.GPUInventory{ObjectMeta: metav1.ObjectMeta{Name: "mixed"}}
	for i, m := range []struct {
		model string
		mem   int64
	}{{"Tesla-T4", 16384}, {"Tesla-T4", 16384}, {"Tesla-V100", 32768}, {"Tesla-V100", 32768}} {
		inv.Spec.GPUs = append(inv.Spec.GPUs, aischedv1alpha1.GPU{Index: int32(i), UUID: "GPU-" + string(rune('a'+i)), Model: m.model, MemoryMiB: m.mem, CUDACores: 2560 * (m.mem / 16384)})
	}
	return inv
}

func nodes() []*corev1.Node {
	gpus := func(n string) map[corev1.ResourceName]string {
		return map[corev1.ResourceName]string{corev1.ResourceCPU: "32", corev1.ResourceMemory: "128Gi", corev1.ResourcePods: "110", gpu.ResourceName: n}
	}
	return []*corev1.Node{
		st.MakeNode().Name("mixed").Capacity(gpus("4")).Obj(),
		st.MakeNode().Name("labels").Capacity(gpus("2")).Label(gpu.GFDCountLabel, "2").Label(gpu.GFDMemoryLabel, "40960").Label(gpu.GFDProductLabel, "NVIDIA-A100-SXM4-40GB").Obj(),
		st.MakeNode().Name("cpu").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "32", corev1.ResourceMemory: "128Gi", corev1.ResourcePods: "110"}).Obj(),
	}
}

func gpuPod(name string, count string, annotations map[string]string) *corev1.Pod {
	p := st.MakePod().Name(name).Namespace("ns").UID(name).Req(map[corev1.ResourceName]string{gpu.ResourceName: count}).Obj()
	p.Annotations = annotations
	return p
}

type fixture struct {
	pl     *GPUFit
	state  *gpuledger.State
	client *fake.Clientset
}

// newFixture builds the plugin over a snapshot of nodes() with the running pods.
func newFixture(t *testing.T, running ...*corev1.Pod) *fixture {
	t.Helper()
	ctx := context.Background()
	state := gpuledger.NewStandalone(gpuledger.Options{})
	state.ObserveInventory(inventory())
	client := fake.NewClientset()
	for _, p := range running {
		state.ObservePod(p)
		if _, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h, err := frameworkruntime.NewFramework(ctx, nil, nil,
		frameworkruntime.WithSnapshotSharedLister(schedcache.NewSnapshot(running, nodes())),
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(client, 0)))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := New(ctx, nil, h, state)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{pl: pl.(*GPUFit), state: state, client: client}
}

func (f *fixture) nodeInfo(t *testing.T, name string) fwk.NodeInfo {
	t.Helper()
	ni, err := f.pl.handle.SnapshotSharedLister().NodeInfos().Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return ni
}

func TestPreFilter(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name     string
		pod      *corev1.Pod
		wantCode fwk.Code
		wantMsg  string
	}{
		{"CPU pod skips the plugin", st.MakePod().Name("c").Obj(), fwk.Skip, ""},
		{"GPU pod", gpuPod("g", "1", nil), fwk.Success, ""},
		{"invalid annotation", gpuPod("g", "1", map[string]string{gpu.OKSMemoryAnnotation: "32GB"}), fwk.UnschedulableAndUnresolvable, `oks/gpu-memory="32GB"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, s := f.pl.PreFilter(context.Background(), framework.NewCycleState(), tc.pod, nil)
			if s.Code() != tc.wantCode || !strings.Contains(s.Message(), tc.wantMsg) {
				t.Errorf("status %v %q, want %v containing %q", s.Code(), s.Message(), tc.wantCode, tc.wantMsg)
			}
		})
	}
}

func TestFilter(t *testing.T) {
	big := map[string]string{gpu.MemoryAnnotation: "30Gi"}
	tests := []struct {
		name     string
		running  []*corev1.Pod
		held     map[string][]int // pod name -> cards held on node "mixed"
		pod      *corev1.Pod
		node     string
		wantCode fwk.Code
	}{
		{name: "two big cards free", pod: gpuPod("p", "2", big), node: "mixed", wantCode: fwk.Success},
		{name: "only two cards are big enough", pod: gpuPod("p", "3", big), node: "mixed", wantCode: fwk.UnschedulableAndUnresolvable},
		{name: "no GPUs on a CPU node", pod: gpuPod("p", "1", nil), node: "cpu", wantCode: fwk.UnschedulableAndUnresolvable},
		{
			name:    "a big card is held by a pod placed by aisched",
			running: []*corev1.Pod{gpuPod("a", "1", nil)}, held: map[string][]int{"a": {2}},
			pod: gpuPod("p", "2", big), node: "mixed", wantCode: fwk.Unschedulable,
		},
		{
			name:    "small cards held do not matter",
			running: []*corev1.Pod{gpuPod("a", "2", nil)}, held: map[string][]int{"a": {0, 1}},
			pod: gpuPod("p", "2", big), node: "mixed", wantCode: fwk.Success,
		},
		{
			// Another scheduler's pod holds one card we cannot name: the
			// worst case is that it holds a big one.
			name:    "unknown holder counts against the big cards",
			running: []*corev1.Pod{gpuPod("x", "1", nil)},
			pod:     gpuPod("p", "2", big), node: "mixed", wantCode: fwk.Unschedulable,
		},
		{name: "labels fallback", pod: gpuPod("p", "2", map[string]string{gpu.MemoryAnnotation: "40Gi"}), node: "labels", wantCode: fwk.Success},
		{name: "labels fallback, card too small", pod: gpuPod("p", "1", map[string]string{gpu.MemoryAnnotation: "48Gi"}), node: "labels", wantCode: fwk.UnschedulableAndUnresolvable},
		{name: "model constraint", pod: gpuPod("p", "1", map[string]string{gpu.ModelsAnnotation: "Tesla V100"}), node: "mixed", wantCode: fwk.Success},
		{name: "model not on node", pod: gpuPod("p", "1", map[string]string{gpu.ModelsAnnotation: "H100"}), node: "mixed", wantCode: fwk.UnschedulableAndUnresolvable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range tc.running {
				p.Spec.NodeName = "mixed"
			}
			f := newFixture(t, tc.running...)
			for name, cards := range tc.held {
				f.state.Assign(types.UID(name), "mixed", cards, gpuledger.Share{})
			}
			cs := framework.NewCycleState()
			if _, s := f.pl.PreFilter(context.Background(), cs, tc.pod, nil); !s.IsSuccess() {
				t.Fatal(s)
			}
			s := f.pl.Filter(context.Background(), cs, tc.pod, f.nodeInfo(t, tc.node))
			if s.Code() != tc.wantCode {
				t.Errorf("Filter = %v (%s), want %v", s.Code(), s.Message(), tc.wantCode)
			}
		})
	}
}

func TestReserveUnreserveBind(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	// Best fit: a pod without a memory constraint gets the small cards, a
	// pod that needs 30Gi the big ones.
	small, big := gpuPod("small", "2", nil), gpuPod("big", "1", map[string]string{gpu.MemoryAnnotation: "30Gi"})
	for _, p := range []*corev1.Pod{small, big} {
		if _, err := f.client.CoreV1().Pods("ns").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	reserve := func(p *corev1.Pod) fwk.CycleState {
		t.Helper()
		cs := framework.NewCycleState()
		if _, s := f.pl.PreFilter(ctx, cs, p, nil); !s.IsSuccess() {
			t.Fatal(s)
		}
		if s := f.pl.Reserve(ctx, cs, p, "mixed"); !s.IsSuccess() {
			t.Fatalf("Reserve %s: %v", p.Name, s)
		}
		return cs
	}
	cs := reserve(small)
	reserve(big)
	for name, want := range map[string][]int{"small": {0, 1}, "big": {2}} {
		if _, got, _ := f.state.Held(types.UID(name)); !cmp.Equal(want, got) {
			t.Errorf("pod %s holds %v, want %v", name, got, want)
		}
	}

	var binding *corev1.Binding
	f.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "binding" {
			return false, nil, nil
		}
		binding = action.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
		return true, binding, nil
	})
	if s := f.pl.Bind(ctx, cs, small, "mixed"); !s.IsSuccess() {
		t.Fatal(s)
	}
	wantAnnotations := map[string]string{gpu.AssignedAnnotation: "0,1", gpu.AssignedUUIDsAnnotation: "GPU-a,GPU-b"}
	if binding == nil || binding.Target.Name != "mixed" || binding.UID != small.UID || !cmp.Equal(wantAnnotations, binding.Annotations) {
		t.Errorf("binding %+v, want one to node mixed for the pod's UID with annotations %v", binding, wantAnnotations)
	}

	f.pl.Unreserve(ctx, cs, small, "other-node") // not where it was reserved: no effect
	if _, _, ok := f.state.Held("small"); !ok {
		t.Error("Unreserve on another node released the cards")
	}
	f.pl.Unreserve(ctx, cs, small, "mixed")
	if _, _, ok := f.state.Held("small"); ok {
		t.Error("Unreserve did not release the cards")
	}

	cpuPod := st.MakePod().Name("c").Obj()
	ccs := framework.NewCycleState()
	f.pl.PreFilter(ctx, ccs, cpuPod, nil)
	if s := f.pl.Reserve(ctx, ccs, cpuPod, "cpu"); !s.IsSuccess() {
		t.Errorf("Reserve of a CPU pod: %v", s)
	}
	if s := f.pl.Bind(ctx, ccs, cpuPod, "cpu"); !s.IsSkip() {
		t.Errorf("Bind of a CPU pod: %v, want Skip (left to DefaultBinder)", s)
	}
}

// After a restart the cards of bound pods come back from their
// annotations, so they are not given away again.
func TestRestartRebuildsFromBoundPods(t *testing.T) {
	bound := gpuPod("old", "2", map[string]string{gpu.AssignedAnnotation: "2,3"})
	bound.Spec.NodeName = "mixed"
	f := newFixture(t, bound)
	f.state.ObservePod(bound)
	p := gpuPod("p", "1", map[string]string{gpu.MemoryAnnotation: "30Gi"})
	cs := framework.NewCycleState()
	f.pl.PreFilter(context.Background(), cs, p, nil)
	if s := f.pl.Filter(context.Background(), cs, p, f.nodeInfo(t, "mixed")); s.Code() != fwk.Unschedulable {
		t.Errorf("Filter = %v, want Unschedulable: both big cards are held by the bound pod", s)
	}

	// An unbound pod's annotation (a failed bind) holds nothing; an ended pod neither.
	f = newFixture(t)
	unbound := gpuPod("u", "2", map[string]string{gpu.AssignedAnnotation: "2,3"})
	f.state.ObservePod(unbound)
	ended := bound.DeepCopy()
	ended.Status.Phase = corev1.PodSucceeded
	f.state.ObservePod(bound)
	f.state.ObservePod(ended)
	for _, uid := range []types.UID{"u", "old"} {
		if _, _, ok := f.state.Held(uid); ok {
			t.Errorf("pod %s holds cards", uid)
		}
	}
}

func TestQueueingHints(t *testing.T) {
	f := newFixture(t)
	logger := klog.Background()
	pod := gpuPod("p", "1", nil)
	hint := func(fn func(klog.Logger, *corev1.Pod, interface{}, interface{}) (fwk.QueueingHint, error), oldObj, newObj interface{}) fwk.QueueingHint {
		t.Helper()
		h, err := fn(logger, pod, oldObj, newObj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if got := hint(f.pl.afterPodDeleted, gpuPod("gone", "1", nil), nil); got != fwk.Queue {
		t.Errorf("GPU pod deleted: %v, want Queue", got)
	}
	if got := hint(f.pl.afterPodDeleted, st.MakePod().Name("cpu").Obj(), nil); got != fwk.QueueSkip {
		t.Errorf("CPU pod deleted: %v, want QueueSkip", got)
	}
	if got := hint(f.pl.afterNodeChanged, nil, nodes()[2]); got != fwk.QueueSkip {
		t.Errorf("CPU node added: %v, want QueueSkip", got)
	}
	if got := hint(f.pl.afterNodeChanged, nil, nodes()[1]); got != fwk.Queue {
		t.Errorf("GPU node added: %v, want Queue", got)
	}
	fixed := gpuPod("p", "1", map[string]string{gpu.MemoryAnnotation: "8Gi"})
	broken := gpuPod("p", "1", map[string]string{gpu.MemoryAnnotation: "x"})
	if got := hint(f.pl.afterOwnUpdate, broken, fixed); got != fwk.Queue {
		t.Errorf("annotation fixed: %v, want Queue", got)
	}
	if got := hint(f.pl.afterOwnUpdate, fixed, fixed.DeepCopy()); got != fwk.QueueSkip {
		t.Errorf("unrelated update: %v, want QueueSkip", got)
	}
	other := gpuPod("other", "1", nil)
	other.Spec.NodeName = "mixed"
	located := other.DeepCopy()
	located.Annotations = map[string]string{gpu.LocatedAnnotation: "0"}
	if got := hint(f.pl.afterLocated, other, located); got != fwk.Queue {
		t.Errorf("another scheduler's pod located: %v, want Queue", got)
	}
	if got := hint(f.pl.afterLocated, located, located.DeepCopy()); got != fwk.QueueSkip {
		t.Errorf("a located pod updated otherwise: %v, want QueueSkip", got)
	}
}

// On a node of cards all alike, Filter decides from the counts alone
// unless another scheduler's pod holds cards not located yet.
func TestFilterInterchangeableUnlocated(t *testing.T) {
	ctx := context.Background()
	state := gpuledger.NewStandalone(gpuledger.Options{})
	inv := &aischedv1alpha1.GPUInventory{ObjectMeta: metav1.ObjectMeta{Name: "t4"}}
	for i := range 2 {
		inv.Spec.GPUs = append(inv.Spec.GPUs, aischedv1alpha1.GPU{Index: int32(i), UUID: fmt.Sprintf("GPU-%d", i), Model: "Tesla-T4", MemoryMiB: 15360})
	}
	state.ObserveInventory(inv)
	node := st.MakeNode().Name("t4").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "16", corev1.ResourcePods: "110", gpu.ResourceName: "2"}).Obj()
	other := gpuPod("other", "1", nil)
	other.Spec.NodeName = "t4"
	state.ObservePod(other)
	h, err := frameworkruntime.NewFramework(ctx, nil, nil, frameworkruntime.WithSnapshotSharedLister(schedcache.NewSnapshot([]*corev1.Pod{other}, []*corev1.Node{node})))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := New(ctx, nil, h, state)
	if err != nil {
		t.Fatal(err)
	}
	ni, err := h.SnapshotSharedLister().NodeInfos().Get("t4")
	if err != nil {
		t.Fatal(err)
	}
	pod := gpuPod("p", "1", nil)
	cs := framework.NewCycleState()
	if _, s := pl.(*GPUFit).PreFilter(ctx, cs, pod, nil); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := pl.(*GPUFit).Filter(ctx, cs, pod, ni); s.Code() != fwk.Unschedulable || s.Message() != reasonUnlocated {
		t.Errorf("Filter = %v, want Unschedulable %q", s, reasonUnlocated)
	}
}

func TestSignPod(t *testing.T) {
	f := newFixture(t)
	a, _ := f.pl.SignPod(context.Background(), gpuPod("a", "1", map[string]string{gpu.MemoryAnnotation: "16Gi"}))
	b, _ := f.pl.SignPod(context.Background(), gpuPod("b", "1", map[string]string{gpu.MemoryAnnotation: "32Gi"}))
	if cmp.Equal(a, b) {
		t.Errorf("pods with different per-card memory sign alike: %v", a)
	}
	if _, s := f.pl.SignPod(context.Background(), gpuPod("c", "1", map[string]string{gpu.MemoryAnnotation: "x"})); s.Code() != fwk.Unschedulable {
		t.Errorf("invalid request signed: %v, want a refusal", s)
	}
}

// TestFilterReasons checks what a rejected node says: a node that could
// never serve the pod names the constraint, the pod's key and value, and
// its closest card, and is UnschedulableAndUnresolvable even when full
// (preemption must not try it); a node with too few free cards says so
// and is Unschedulable.
func TestFilterReasons(t *testing.T) {
	full := []*corev1.Pod{gpuPod("a", "4", nil)}
	tests := []struct {
		name     string
		running  []*corev1.Pod
		pod      *corev1.Pod
		node     string
		wantCode fwk.Code
		wantMsg  string
	}{
		{name: "more cards than the node has", pod: gpuPod("p", "9", nil), node: "mixed",
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: "node(s) have 4 GPUs, fewer than the pod's 9"},
		{name: "more memory than any card, node free", pod: gpuPod("p", "1", map[string]string{gpu.MemoryAnnotation: "80Gi"}), node: "mixed",
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: `node(s) have no GPU with gpu.aisched.io/memory="80Gi": the largest has 32 GiB`},
		{name: "more memory than any card, node full", running: full, pod: gpuPod("p", "1", map[string]string{gpu.MemoryAnnotation: "80Gi"}), node: "mixed",
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: `node(s) have no GPU with gpu.aisched.io/memory="80Gi": the largest has 32 GiB`},
		{name: "GFD labels, card too small", pod: gpuPod("p", "1", map[string]string{gpu.MemoryAnnotation: "48Gi"}), node: "labels",
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: `node(s) have no GPU with gpu.aisched.io/memory="48Gi": the largest has 40 GiB`},
		{name: "HAMi's card type not on the node", pod: gpuPod("p", "1", map[string]string{gpu.HAMiUseTypeAnnotation: "A100"}), node: "mixed",
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: `node(s) have no GPU of nvidia.com/use-gputype="A100": their cards are Tesla-T4, Tesla-V100`},
		{name: "too few cards big enough", pod: gpuPod("p", "3", map[string]string{gpu.MemoryAnnotation: "30Gi"}), node: "mixed",
			wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: `node(s) have 2 GPUs that meet gpu.aisched.io/memory="30Gi", fewer than the pod's 3`},
		{name: "cards that would serve, all held", running: full, pod: gpuPod("p", "1", nil), node: "mixed",
			wantCode: fwk.Unschedulable, wantMsg: reasonNotEnough},
		// Another scheduler's pod holds a card the agent has not located:
		// any card chosen may be its.
		{name: "a card of another scheduler's pod not located", running: []*corev1.Pod{gpuPod("b", "1", nil)}, pod: gpuPod("p", "1", nil), node: "mixed",
			wantCode: fwk.Unschedulable, wantMsg: reasonUnlocated},
		{name: "a card of another scheduler's pod located", running: []*corev1.Pod{gpuPod("b", "1", map[string]string{gpu.LocatedAnnotation: "0"})},
			pod: gpuPod("p", "1", nil), node: "mixed", wantCode: fwk.Success},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range tc.running {
				p.Spec.NodeName = "mixed"
			}
			f := newFixture(t, tc.running...)
			cs := framework.NewCycleState()
			if _, s := f.pl.PreFilter(context.Background(), cs, tc.pod, nil); !s.IsSuccess() {
				t.Fatal(s)
			}
			s := f.pl.Filter(context.Background(), cs, tc.pod, f.nodeInfo(t, tc.node))
			if s.Code() != tc.wantCode || s.Message() != tc.wantMsg {
				t.Errorf("Filter = %v %q, want %v %q", s.Code(), s.Message(), tc.wantCode, tc.wantMsg)
			}
		})
	}
}
