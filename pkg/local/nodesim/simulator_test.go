package nodesim

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/clusterfile"
	aischedfake "github.com/aisched/aisched/pkg/generated/clientset/versioned/fake"
	"github.com/aisched/aisched/pkg/gpu"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

var testCluster = []byte(`apiVersion: aisched.io/v1alpha1
kind: Cluster
nodePools:
  - name: cpu
    count: 1
    cpu: 4
    memory: 8Gi
    maxPods: 3
  - name: gpu
    count: 1
    cpu: 8
    memory: 32Gi
    taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
    gpus: {count: 2, model: NVIDIA A100 40GB, memoryMiB: 40960, computeCapability: "8.0"}
`)

type fixture struct {
	client  *fake.Clientset
	aisched *aischedfake.Clientset
	clock   *clocktesting.FakeClock
	sim     *Simulator
}

// start runs a Simulator of testCluster on a fake clientset that already
// holds objects.
func start(t *testing.T, objects ...*corev1.Pod) *fixture {
	t.Helper()
	c, err := clusterfile.Parse("test", testCluster)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{client: fake.NewClientset(), aisched: aischedfake.NewSimpleClientset(), clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	for _, p := range objects {
		if _, err := f.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.sim, err = New(Options{Client: f.client, AischedClient: f.aisched, Nodes: Nodes(c), Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- f.sim.Run(ctx, ready) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run ended before ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("simulator not ready after 10s")
	}
	return f
}

func (f *fixture) createPod(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if _, err := f.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitPod polls the pod until cond holds.
func (f *fixture) waitPod(t *testing.T, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := f.client.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		return cond(p), nil
	})
	if err != nil {
		t.Fatalf("pod %s: %s: not after 10s; last status %+v", name, what, pod.Status)
	}
	return pod
}

// stepUntil advances the fake clock by d, again and again, until the pod
// satisfies cond. Stepping repeatedly does not depend on when the simulator
// registers its timers.
func (f *fixture) stepUntil(t *testing.T, d time.Duration, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := f.client.CoreV1().Pods("ns").Get(ctx, name, metav1.GetOptions{})
		if err == nil && cond(p) {
			pod = p
			return true, nil
		}
		f.clock.Step(d)
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s: %s: not after 10s of stepping the clock by %s", name, what, d)
	}
	return pod
}

func TestRegisterNodes(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	node, err := f.client.CoreV1().Nodes().Get(ctx, "gpu-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Status.Capacity[gpu.ResourceName]; got.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("gpu-0 capacity %s = %s, want 2", gpu.ResourceName, got.String())
	}
	if got := node.Status.Allocatable.Cpu().String(); got != "8" {
		t.Errorf("gpu-0 allocatable cpu = %s, want 8", got)
	}
	wantLabels := map[string]string{
		gpu.GFDProductLabel:      "NVIDIA-A100-40GB", // spaces become dashes, as GFD does
		gpu.GFDCountLabel:        "2",
		gpu.GFDMemoryLabel:       "40960",
		gpu.GFDComputeMajorLabel: "8",
		gpu.GFDComputeMinorLabel: "0",
		NodePoolLabel:            "gpu",
		SimulatedLabel:           "true",
	}
	for k, v := range wantLabels {
		if node.Labels[k] != v {
			t.Errorf("gpu-0 label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "nvidia.com/gpu" {
		t.Errorf("gpu-0 taints = %v, want the pool's taint only", node.Spec.Taints)
	}
	if !nodeCondition(node, corev1.NodeReady, corev1.ConditionTrue) {
		t.Errorf("gpu-0 is not Ready: %v", node.Status.Conditions)
	}
	if _, _, err := net.ParseCIDR(node.Spec.PodCIDR); err != nil {
		t.Errorf("gpu-0 pod CIDR %q: %v", node.Spec.PodCIDR, err)
	}
	inv, err := f.aisched.AischedV1alpha1().GPUInventories().Get(ctx, "gpu-0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("GPU inventory of gpu-0: %v", err)
	}
	if len(inv.Spec.GPUs) != 2 || inv.Spec.GPUs[1].Index != 1 || inv.Spec.GPUs[1].MemoryMiB != 40960 || !strings.HasPrefix(inv.Spec.GPUs[1].UUID, "GPU-") {
		t.Errorf("GPU inventory of gpu-0 = %+v, want 2 cards of 40960 MiB with UUIDs", inv.Spec.GPUs)
	}
	if len(inv.OwnerReferences) != 1 || inv.OwnerReferences[0].Name != "gpu-0" {
		t.Errorf("GPU inventory owners = %v, want node gpu-0", inv.OwnerReferences)
	}
	if _, err := f.aisched.AischedV1alpha1().GPUInventories().Get(ctx, "cpu-0", metav1.GetOptions{}); err == nil {
		t.Error("CPU-only node cpu-0 has a GPU inventory")
	}
	lease, err := f.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "gpu-0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("lease of gpu-0: %v", err)
	}
	renewed := lease.Spec.RenewTime.Time
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		lease, err = f.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "gpu-0", metav1.GetOptions{})
		if err == nil && lease.Spec.RenewTime.After(renewed) {
			return true, nil
		}
		f.clock.Step(DefaultLeaseRenewInterval)
		return false, nil
	})
	if err != nil {
		t.Errorf("lease of gpu-0 not renewed after %s", DefaultLeaseRenewInterval)
	}
}

func TestRegisterRemovesNotReadyTaintAndStaleNodes(t *testing.T) {
	c, err := clusterfile.Parse("test", testCluster)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	client := fake.NewClientset()
	// What the apiserver's TaintNodesByCondition admission leaves on a new
	// node, and a simulated node the cluster file no longer has.
	existing := BuildNode(&c.NodePools[0], 0, 0)
	existing.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}
	stale := BuildNode(&c.NodePools[0], 7, 7)
	for _, n := range []*corev1.Node{existing, stale} {
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sim, err := New(Options{Client: client, AischedClient: aischedfake.NewSimpleClientset(), Nodes: Nodes(c), Clock: clocktesting.NewFakeClock(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.registerNodes(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := client.CoreV1().Nodes().Get(ctx, "cpu-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Spec.Taints) != 0 {
		t.Errorf("cpu-0 taints = %v, want none", n.Spec.Taints)
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, "cpu-7", metav1.GetOptions{}); err == nil {
		t.Error("stale node cpu-7 was not removed")
	}
}

func TestPodLifecycle(t *testing.T) {
	tests := []struct {
		name          string
		pod           *corev1.Pod
		wantPhase     corev1.PodPhase
		wantRestarts  int32
		wantExitCode  int32
		wantEventText string
	}{
		{
			name:      "runs until deleted",
			pod:       utiltesting.MakePod("p", "ns").Node("cpu-0").Obj(),
			wantPhase: corev1.PodRunning,
		},
		{
			name:      "completes after its run duration",
			pod:       utiltesting.MakePod("p", "ns").Node("cpu-0").RestartPolicy(corev1.RestartPolicyNever).Annotation(RunDurationAnnotation, "30s").Obj(),
			wantPhase: corev1.PodSucceeded,
		},
		{
			name: "fails with its exit code",
			pod: utiltesting.MakePod("p", "ns").Node("cpu-0").RestartPolicy(corev1.RestartPolicyNever).
				Annotation(RunDurationAnnotation, "30s").Annotation(ExitCodeAnnotation, "3").Obj(),
			wantPhase:    corev1.PodFailed,
			wantExitCode: 3,
		},
		{
			name:         "restartPolicy Always restarts the containers",
			pod:          utiltesting.MakePod("p", "ns").Node("cpu-0").Annotation(RunDurationAnnotation, "30s").Obj(),
			wantPhase:    corev1.PodRunning,
			wantRestarts: 1,
		},
		{
			name:          "a malformed run duration is reported and ignored",
			pod:           utiltesting.MakePod("p", "ns").Node("cpu-0").RestartPolicy(corev1.RestartPolicyNever).Annotation(RunDurationAnnotation, "soon").Obj(),
			wantPhase:     corev1.PodRunning,
			wantEventText: `annotation sim.aisched.io/run-duration="soon"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t)
			f.createPod(t, tc.pod)
			running := f.waitPod(t, "p", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
			ip := net.ParseIP(running.Status.PodIP)
			_, cidr, _ := net.ParseCIDR("10.128.0.0/22")
			if ip == nil || !cidr.Contains(ip) {
				t.Errorf("pod IP %q, want one in cpu-0's CIDR %s", running.Status.PodIP, cidr)
			}
			if !podCondition(running, corev1.PodReady, corev1.ConditionTrue) {
				t.Errorf("running pod is not Ready: %v", running.Status.Conditions)
			}
			got := f.stepUntil(t, 30*time.Second, "p", "phase "+string(tc.wantPhase), func(p *corev1.Pod) bool {
				// Stepping may restart an Always pod more than once.
				return p.Status.Phase == tc.wantPhase && p.Status.ContainerStatuses[0].RestartCount >= tc.wantRestarts
			})
			cs := got.Status.ContainerStatuses[0]
			if term := cs.State.Terminated; term != nil && term.ExitCode != tc.wantExitCode {
				t.Errorf("exit code = %d, want %d", term.ExitCode, tc.wantExitCode)
			}
			if tc.wantRestarts > 0 && (cs.LastTerminationState.Terminated == nil || cs.State.Running == nil) {
				t.Errorf("restarted container: state %+v, last %+v; want running after a termination", cs.State, cs.LastTerminationState)
			}
			if tc.wantEventText != "" {
				waitEvent(t, f, tc.wantEventText)
			}
			if tc.wantPhase == corev1.PodRunning && tc.wantRestarts == 0 {
				// An hour later it still runs: nothing ended it. The pause
				// gives a wrongly scheduled exit the time to show.
				f.clock.Step(time.Hour)
				time.Sleep(300 * time.Millisecond)
				p, err := f.client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
				if err != nil || p.Status.Phase != corev1.PodRunning || p.Status.ContainerStatuses[0].RestartCount != 0 {
					t.Errorf("an hour later: %v, phase %s; want still Running without restarts", err, p.Status.Phase)
				}
			}
		})
	}
}

func TestAdmission(t *testing.T) {
	f := start(t)
	// gpu-0 has 2 GPUs: the first pod takes both, the second is rejected as
	// a kubelet would, the third does not ask for GPUs and runs.
	f.createPod(t, utiltesting.MakePod("a", "ns").Node("gpu-0").GPU(2).Obj())
	f.waitPod(t, "a", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	f.createPod(t, utiltesting.MakePod("b", "ns").Node("gpu-0").GPU(1).Obj())
	b := f.waitPod(t, "b", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if b.Status.Reason != "OutOfnvidia.com/gpu" {
		t.Errorf("reason = %q, want OutOfnvidia.com/gpu", b.Status.Reason)
	}
	f.createPod(t, utiltesting.MakePod("c", "ns").Node("gpu-0").Req(corev1.ResourceCPU, "1").Obj())
	f.waitPod(t, "c", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	// cpu-0 holds 3 pods.
	for _, name := range []string{"d", "e", "f"} {
		f.createPod(t, utiltesting.MakePod(name, "ns").Node("cpu-0").Obj())
	}
	for _, name := range []string{"d", "e", "f"} {
		f.waitPod(t, name, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	}
	f.createPod(t, utiltesting.MakePod("g", "ns").Node("cpu-0").Obj())
	g := f.waitPod(t, "g", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if g.Status.Reason != "OutOfpods" {
		t.Errorf("reason = %q, want OutOfpods", g.Status.Reason)
	}
}

func TestDeletionFreesResources(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	f.createPod(t, utiltesting.MakePod("a", "ns").Node("gpu-0").GPU(2).HostNetwork().Obj())
	a := f.waitPod(t, "a", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if a.Status.PodIP != "172.16.0.2" {
		t.Errorf("host-network pod IP = %q, want the node IP 172.16.0.2", a.Status.PodIP)
	}
	// A graceful delete: the simulated kubelet finishes it with grace 0.
	a.DeletionTimestamp = &metav1.Time{Time: f.clock.Now()}
	a.DeletionGracePeriodSeconds = ptr.To[int64](30)
	if _, err := f.client.CoreV1().Pods("ns").Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := f.client.CoreV1().Pods("ns").Get(ctx, "a", metav1.GetOptions{})
		return err != nil, nil
	})
	if err != nil {
		t.Fatal("pod a was not deleted")
	}
	f.createPod(t, utiltesting.MakePod("b", "ns").Node("gpu-0").GPU(2).Obj())
	f.waitPod(t, "b", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
}

func TestRestoreRunningPods(t *testing.T) {
	// A pod that ran before a restart keeps its IP and its resources.
	before := utiltesting.MakePod("old", "ns").Node("gpu-0").GPU(2).Obj()
	before.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.128.4.9", StartTime: &metav1.Time{Time: time.Now()}}
	f := start(t, before)
	f.createPod(t, utiltesting.MakePod("new", "ns").Node("gpu-0").GPU(1).Obj())
	p := f.waitPod(t, "new", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if p.Status.Reason != "OutOfnvidia.com/gpu" {
		t.Errorf("reason = %q, want OutOfnvidia.com/gpu: the restored pod holds both GPUs", p.Status.Reason)
	}
	if ip, ok := f.sim.alloc.holds("ns/old", before.UID); !ok || ip != "10.128.4.9" {
		t.Errorf("restored pod holds %q (%v), want its IP 10.128.4.9", ip, ok)
	}
}

func waitEvent(t *testing.T, f *fixture, text string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := f.client.CoreV1().Events("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if strings.Contains(e.Message, text) {
				return e.Type == corev1.EventTypeWarning, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no Warning event containing %q", text)
	}
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType, s corev1.ConditionStatus) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c.Status == s
		}
	}
	return false
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType, s corev1.ConditionStatus) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == s
		}
	}
	return false
}
