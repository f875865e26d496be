package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/gpu/nvidiadra"
	"github.com/aisched/aisched/pkg/local"
	"github.com/aisched/aisched/pkg/local/localtest"
	"github.com/aisched/aisched/pkg/podgroup"
	"github.com/aisched/aisched/pkg/scheduler"
)

// draGangState is how far a gang of DRA members got: members whose claim
// is allocated, and members bound.
type draGangState struct{ allocated, bound int }

// TestDRAGangSchedulerCrash kills `aisched scheduler` (SIGKILL) as soon as
// the first claim of a 24-member gang of DRA GPU pods is allocated, so
// that some members' claims are allocated (bound or not) and the others'
// are not, twice. First with the devices for the rest still free: the
// restarted scheduler completes the gang, each device given once and
// prepared by the simulated kubelets. Then with those devices taken while
// the scheduler is down: after partialGroupSeconds the job queue deletes
// the bound members and deallocates the claims of the pending ones, so
// that no device stays held by a gang that cannot run.
func TestDRAGangSchedulerCrash(t *testing.T) {
	t.Parallel()
	c := startWithoutAisched(t, `  - {name: dra, count: 3, cpu: "64", memory: 256Gi, maxPods: 200, gpus: {count: 8, model: NVIDIA-A100-SXM4-80GB, memoryMiB: 81920, computeCapability: "8.0", dra: {}}}
`)
	ctx := context.Background()
	start := leadingScheduler(t, c)
	const size, perNode = 24, 8
	gang := func(ns, name string) {
		t.Helper()
		if _, err := c.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourcev1.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "one-gpu"},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
				Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: nvidiadra.GPUClass}}},
			}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var pods []*corev1.Pod
		for i := range size {
			p := claimPod(ns, fmt.Sprintf("%s-%d", name, i), scheduler.AischedProfile, "", "")
			p.Spec.ResourceClaims[0] = corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}
			p.Labels = map[string]string{podgroup.NameLabel: name, podgroup.MinAvailableLabel: fmt.Sprint(size)}
			pods = append(pods, p)
		}
		createPods(t, c, pods...)
	}
	watchClaims := func(ns string) func(context.Context) (watch.Interface, error) {
		return func(ctx context.Context) (watch.Interface, error) {
			return c.Client.ResourceV1().ResourceClaims(ns).Watch(ctx, metav1.ListOptions{})
		}
	}
	claimAllocated := func(obj runtime.Object) bool {
		cl, ok := obj.(*resourcev1.ResourceClaim)
		return ok && cl.Status.Allocation != nil
	}
	// state is how far the gang got, read once the writes in flight at a
	// kill have settled (killOnFirst).
	state := func(ns, name string) func() draGangState {
		return func() draGangState {
			return draGangState{allocated: len(allocatedClaims(t, c, ns)), bound: boundMembers(t, c, ns, name)}
		}
	}
	var namespaces []string
	t.Cleanup(func() {
		if t.Failed() {
			for _, ns := range namespaces {
				logPods(t, c, ns)
			}
		}
	})
	halfAllocated := 0

	// The devices stay free: the restarted scheduler completes the gang.
	ns := createNamespace(t, c.Client)
	namespaces = append(namespaces, ns)
	s := start()
	gang(ns, "a")
	at := killOnFirst(t, s, "the first claim of a allocated", watchClaims(ns), claimAllocated, state(ns, "a"))
	t.Logf("gang a: %d of %d members with their claim allocated, %d bound, at the kill", at.allocated, size, at.bound)
	if at.bound == size {
		t.Fatalf("gang a was bound whole before the kill landed; the test needs a kill between its allocations")
	}
	halfAllocated += at.allocated - at.bound
	s = start()
	localtest.Eventually(t, 2*time.Minute, "gang a complete after the restart", func(context.Context) (bool, error) {
		n := boundMembers(t, c, ns, "a")
		return n == size, fmt.Errorf("%d of %d members bound", n, size)
	})
	waitPodsRunning(t, c, ns, size)
	checkDevicesOnce(t, c, ns)
	deletePods(t, c, ns)
	waitNoClaims(t, c, ns)

	// The devices are taken while the scheduler is down: the gang is
	// released after partialGroupSeconds, its claims with it.
	ns = createNamespace(t, c.Client)
	namespaces = append(namespaces, ns)
	gang(ns, "b")
	at = killOnFirst(t, s, "the first claim of b allocated", watchClaims(ns), claimAllocated, state(ns, "b"))
	t.Logf("gang b: %d of %d members with their claim allocated, %d bound, at the kill", at.allocated, size, at.bound)
	if at.allocated == size {
		t.Fatalf("gang b's claims were all allocated before the kill landed; the test needs devices left to take")
	}
	halfAllocated += at.allocated - at.bound
	// Pods of upstream's scheduler take every device the gang did not.
	other := createNamespace(t, c.Client)
	namespaces = append(namespaces, other)
	taken := map[string]int{}
	for _, cl := range allocatedClaims(t, c, ns) {
		taken[allocatedNode(cl.Status.Allocation)] += len(cl.Status.Allocation.Devices.Results)
	}
	takers := 0
	for _, node := range nodesOf(t, c) {
		free := perNode - taken[node]
		if free <= 0 {
			continue
		}
		takers++
		name := "taker-" + node
		if _, err := c.Client.ResourceV1().ResourceClaims(other).Create(ctx, &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: nvidiadra.GPUClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: int64(free)}}}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		createPods(t, c, claimPod(other, name, "default-scheduler", name, node))
	}
	waitPodsRunning(t, c, other, takers)
	released := time.Now()
	start()
	localtest.Eventually(t, 2*time.Minute, "gang b released: no member bound, no claim allocated", func(context.Context) (bool, error) {
		allocated, bound := len(allocatedClaims(t, c, ns)), boundMembers(t, c, ns, "b")
		return allocated == 0 && bound == 0, fmt.Errorf("%d members of b bound, %d claims of b allocated", bound, allocated)
	})
	if waited := time.Since(released); waited < 10*time.Second {
		t.Errorf("gang b released after %s, before partialGroupSeconds (10s)", waited)
	}
	checkDevicesOnce(t, c, ns, other)
	if halfAllocated == 0 {
		t.Errorf("no kill landed between a member's allocation and its binding; the test did not see a claim allocated to an unbound member")
	}
	// What was released says so.
	events, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	said := 0
	for _, e := range events.Items {
		if strings.Contains(e.Message, "released by aisched's job queue: its pod group "+ns+"/b") {
			said++
		}
	}
	if want := at.allocated; said < want {
		t.Errorf("%d members say why they were released, want the %d that held devices", said, want)
	}
}

// allocatedClaims lists the namespace's claims that are allocated.
func allocatedClaims(t *testing.T, c *local.Cluster, ns string) []resourcev1.ResourceClaim {
	t.Helper()
	list, err := c.Client.ResourceV1().ResourceClaims(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []resourcev1.ResourceClaim
	for _, cl := range list.Items {
		if cl.Status.Allocation != nil {
			out = append(out, cl)
		}
	}
	return out
}

// allocatedNode is the node an allocation holds its pod to.
func allocatedNode(a *resourcev1.AllocationResult) string {
	if a.NodeSelector != nil {
		for _, term := range a.NodeSelector.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				if f.Key == "metadata.name" && len(f.Values) == 1 {
					return f.Values[0]
				}
			}
		}
	}
	return ""
}

// checkDevicesOnce fails the test when a device is allocated to two claims
// of the namespaces (the pool shares none), or a claim is allocated
// without being reserved for a pod.
func checkDevicesOnce(t *testing.T, c *local.Cluster, namespaces ...string) {
	t.Helper()
	holders := map[string][]string{}
	for _, ns := range namespaces {
		for _, cl := range allocatedClaims(t, c, ns) {
			if len(cl.Status.ReservedFor) == 0 {
				t.Errorf("claim %s/%s is allocated and reserved for no pod", ns, cl.Name)
			}
			for _, r := range cl.Status.Allocation.Devices.Results {
				key := r.Pool + "/" + r.Device
				holders[key] = append(holders[key], ns+"/"+cl.Name)
			}
		}
	}
	for device, claims := range holders {
		if len(claims) > 1 {
			t.Errorf("device %s allocated to %d claims: %v", device, len(claims), claims)
		}
	}
}

// waitNoClaims waits until the namespace's claims are gone, their devices
// free.
func waitNoClaims(t *testing.T, c *local.Cluster, ns string) {
	t.Helper()
	localtest.Eventually(t, time.Minute, "claims of "+ns+" gone", func(ctx context.Context) (bool, error) {
		list, err := c.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, err
	})
}

// logPods logs where the namespace's pods are and why, and what their
// claims hold, for a failed test.
func logPods(t *testing.T, c *local.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Log(err)
		return
	}
	for _, p := range pods.Items {
		why := ""
		if cond := unschedulableCondition(&p); cond != nil {
			why = cond.Message
		}
		t.Logf("pod %s/%s on %q, %s %s", ns, p.Name, p.Spec.NodeName, p.Status.Phase, why)
	}
	claims, err := c.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Log(err)
		return
	}
	for _, cl := range claims.Items {
		var devices []string
		if a := cl.Status.Allocation; a != nil {
			for _, r := range a.Devices.Results {
				devices = append(devices, r.Pool+"/"+r.Device)
			}
		}
		t.Logf("claim %s/%s: devices %v, reserved for %d", ns, cl.Name, devices, len(cl.Status.ReservedFor))
	}
}
