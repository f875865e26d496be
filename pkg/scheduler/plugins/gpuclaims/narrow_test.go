package gpuclaims

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// profileHandle is a handle with the profile's percentageOfNodesToScore
// that records the pods it is asked to activate.
type profileHandle struct {
	*handle
	percentage *int32
	activated  []string
}

func (h *profileHandle) PercentageOfNodesToScore() *int32 { return h.percentage }

func (h *profileHandle) Activate(_ klog.Logger, pods map[string]*corev1.Pod) {
	for k := range pods {
		h.activated = append(h.activated, k)
	}
}

// narrowCluster is n nodes of two cards each: nodes 0-9 with gpu-0 held
// (in use, with room), nodes 10-19 with both held (full), the rest empty.
func narrowCluster(t *testing.T, n int) (*utiltesting.FakeDRA, ledgers, []fwk.NodeInfo) {
	t.Helper()
	var slices []*resourceapi.ResourceSlice
	var nodes []fwk.NodeInfo
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		cards := []gpu.Card{{Index: 0, UUID: name + "-0", Model: "NVIDIA A100-SXM4-40GB", MemoryMiB: 40960, Healthy: true},
			{Index: 1, UUID: name + "-1", Model: "NVIDIA A100-SXM4-40GB", MemoryMiB: 40960, Healthy: true}}
		slices = append(slices, nvidiadra.Slices(name, cards, nvidiadra.Options{})...)
		ni := framework.NewNodeInfo()
		ni.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		nodes = append(nodes, ni)
	}
	f := utiltesting.NewFakeDRA(slices, nvidiadra.DeviceClasses())
	gpus := newLedgers()
	for _, c := range nvidiadra.DeviceClasses() {
		gpus.ObserveClass(c)
	}
	for _, s := range slices {
		gpus.ObserveSlice(s)
	}
	for i := range 20 {
		devices := []string{"gpu-0"}
		if i >= 10 {
			devices = append(devices, "gpu-1")
		}
		held := claim(fmt.Sprintf("held-%d", i), &resourceapi.ExactDeviceRequest{DeviceClassName: nvidiadra.GPUClass, Count: int64(len(devices))})
		held.Status.Allocation = &resourceapi.AllocationResult{}
		for _, d := range devices {
			held.Status.Allocation.Devices.Results = append(held.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
				Request: "gpu", Driver: nvidiadra.Driver, Pool: fmt.Sprintf("n%d", i), Device: d})
		}
		f.AddClaim(held)
		gpus.ObserveClaim(held)
	}
	return f, gpus, nodes
}

func narrowPlugin(t *testing.T, f *utiltesting.FakeDRA, gpus ledgers, percentage *int32, empty int64) (*GPUClaims, *profileHandle) {
	t.Helper()
	client := fake.NewClientset()
	h := &profileHandle{handle: &handle{dra: f, client: client, factory: informers.NewSharedInformerFactory(client, 0)}, percentage: percentage}
	var args runtime.Object
	if empty >= 0 {
		args = &runtime.Unknown{Raw: []byte(fmt.Sprintf(`{"emptyNodesToTry": %d}`, empty))}
	}
	pl, err := New(context.Background(), args, h, gpus.State, gpus.Ledger, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pl.(*GPUClaims), h
}

// inRange counts the names of res among n<from> .. n<to-1>.
func inRange(res *fwk.PreFilterResult, from, to int) int {
	c := 0
	for i := from; i < to; i++ {
		if res.NodeNames.Has(fmt.Sprintf("n%d", i)) {
			c++
		}
	}
	return c
}

// A pod whose claims ask for a whole GPU is tried on the nodes in use
// with room and a window of empty nodes that moves on each cycle, never on
// a full node; not on a profile that sets its share of nodes, not when it
// could preempt a pod, not with emptyNodesToTry 0, not where the list
// would not halve the nodes tried; and once a narrowed cycle found no
// node, the pod is sent back to the queue and tried on every node.
func TestNarrowing(t *testing.T) {
	ask := claim("c", &resourceapi.ExactDeviceRequest{DeviceClassName: nvidiadra.GPUClass})
	setup := func(n int, percentage *int32, empty int64) (*GPUClaims, *profileHandle, []fwk.NodeInfo) {
		f, gpus, nodes := narrowCluster(t, n)
		f.AddClaim(ask)
		gpus.ObserveClaim(ask)
		pl, h := narrowPlugin(t, f, gpus, percentage, empty)
		return pl, h, nodes
	}
	adaptive := ptr.To[int32](0)

	pl, h, nodes := setup(1000, adaptive, -1)
	cs := framework.NewCycleState()
	res, status := pl.PreFilter(context.Background(), cs, podWith("p", "c"), nodes)
	if !status.IsSuccess() || res.AllNodes() {
		t.Fatalf("1,000 nodes: %v, %v; want a list", res, status)
	}
	if inUse, full, empty := inRange(res, 0, 10), inRange(res, 10, 20), inRange(res, 20, 1000); inUse != 10 || full != 0 || empty != 100 {
		t.Fatalf("listed %d of the 10 nodes in use with room, %d of the 10 full, %d empty; want 10, 0, 100", inUse, full, empty)
	}
	first := res.NodeNames

	// The next cycle lists the next empty nodes.
	res, _ = pl.PreFilter(context.Background(), framework.NewCycleState(), podWith("q", "c"), nodes)
	if res.AllNodes() || inRange(res, 0, 10) != 10 || inRange(res, 20, 1000) != 100 {
		t.Fatalf("second cycle: %v; want the 10 in use and 100 empty", res)
	}
	if again := res.NodeNames.Intersection(first).Len(); again != 10 {
		t.Errorf("second cycle lists %d nodes of the first; want only the 10 in use", again)
	}

	// No node of the list fits: the pod goes back to the queue, and is
	// tried on every node next time.
	_, status = pl.PostFilter(context.Background(), cs, podWith("p", "c"), framework.NewDefaultNodeToStatus())
	if status.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(status.Message(), "of the 110 tried first") {
		t.Errorf("PostFilter of a narrowed cycle: %v; want UnschedulableAndUnresolvable (the PostFilter plugins after it skipped) naming the 110 nodes tried", status)
	}
	if len(h.activated) != 1 || h.activated[0] != "ns/p" {
		t.Errorf("activated %v; want ns/p", h.activated)
	}
	cs = framework.NewCycleState()
	res, _ = pl.PreFilter(context.Background(), cs, podWith("p", "c"), nodes)
	if !res.AllNodes() {
		t.Errorf("after a narrowed cycle found nothing: %d nodes listed; want every node", res.NodeNames.Len())
	}
	if _, err := cs.Read(narrowKey); err == nil {
		t.Errorf("a cycle on every node is recorded as narrowed")
	}
	h.activated = nil
	if _, status := pl.PostFilter(context.Background(), cs, podWith("p", "c"), framework.NewDefaultNodeToStatus()); len(h.activated) != 0 || strings.Contains(status.Message(), "tried first") {
		t.Errorf("PostFilter of a cycle on every node: %v, activated %v; want upstream's, nothing activated", status, h.activated)
	}

	// A pod that could preempt a pod bound with a lower priority.
	high := podWith("high", "c")
	high.Spec.Priority = ptr.To[int32](10)
	pl.gpus.ObservePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "low", Namespace: "ns", UID: "low"}, Spec: corev1.PodSpec{NodeName: "n500"}})
	if res, _ := pl.PreFilter(context.Background(), framework.NewCycleState(), high, nodes); !res.AllNodes() {
		t.Errorf("a pod that could preempt: %d nodes listed; want every node", res.NodeNames.Len())
	}
	high.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever)
	if res, _ := pl.PreFilter(context.Background(), framework.NewCycleState(), high, nodes); res.AllNodes() {
		t.Errorf("a pod that never preempts: every node; want a list")
	}
	pl.gpus.ForgetPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "low", Namespace: "ns", UID: "low"}, Spec: corev1.PodSpec{NodeName: "n500"}})
	high.Spec.PreemptionPolicy = nil
	if res, _ := pl.PreFilter(context.Background(), framework.NewCycleState(), high, nodes); res.AllNodes() {
		t.Errorf("the lower-priority pod deleted: every node; want a list")
	}

	// Upstream's PreFilter listed nodes of its own (a claim of the pod
	// allocated already): no narrowing, whose list might leave none.
	pl, _, nodes = setup(1000, adaptive, -1)
	if res, _ := pl.candidates(framework.NewCycleState(), podWith("u", "c"), nodes, nil, false); !res.AllNodes() {
		t.Errorf("upstream listed nodes: %d nodes listed; want every node", res.NodeNames.Len())
	}

	// A claim that asks for capacity (a share) is not judged by the
	// ledger's counts: its pod is tried as the scheduler would.
	share := claim("s", &resourceapi.ExactDeviceRequest{DeviceClassName: nvidiadra.GPUClass,
		Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("4Gi")}}})
	pl, _, nodes = setup(1000, adaptive, -1)
	pl.dra.(*utiltesting.FakeDRA).AddClaim(share)
	pl.devices.ObserveClaim(share)
	if res, status := pl.PreFilter(context.Background(), framework.NewCycleState(), podWith("s", "s"), nodes); !status.IsSuccess() || !res.AllNodes() {
		t.Errorf("a claim for a share: %v, %v; want every node", res, status)
	}

	for name, c := range map[string]struct {
		n          int
		percentage *int32
		empty      int64
	}{
		"profile scores every node":       {1000, ptr.To[int32](100), -1},
		"profile leaves it to the global": {1000, nil, -1},
		"emptyNodesToTry 0":               {1000, adaptive, 0},
		"300 nodes: would not halve":      {300, adaptive, -1},
	} {
		pl, _, nodes := setup(c.n, c.percentage, c.empty)
		if res, status := pl.PreFilter(context.Background(), framework.NewCycleState(), podWith("p", "c"), nodes); !status.IsSuccess() || !res.AllNodes() {
			t.Errorf("%s: %v, %v; want every node", name, res, status)
		}
	}
}

// nodesToFind is kube-scheduler's numFeasibleNodesToFind with the
// adaptive share.
func TestNodesToFind(t *testing.T) {
	for n, want := range map[int]int{50: 50, 100: 100, 200: 100, 500: 230, 1213: 497, 5000: 500, 15000: 750} {
		if got := nodesToFind(n); got != want {
			t.Errorf("nodesToFind(%d) = %d, want %d", n, got, want)
		}
	}
}
