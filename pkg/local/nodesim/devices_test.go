package nodesim

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aisched/aisched/pkg/agent/deliver"
	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/gpu"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

// cardUUID is the UUID of card i of testCluster's gpu-0.
func cardUUID(t *testing.T, i int) string {
	t.Helper()
	c, err := clusterfile.Parse("test", testCluster)
	if err != nil {
		t.Fatal(err)
	}
	return BuildInventory(&c.NodePools[1], "gpu-0").Spec.GPUs[i].UUID
}

// holdings waits until the hook of gpu-0 holds, by pod name, what want
// says (UUIDs).
func (f *fixture) waitHoldings(t *testing.T, want map[string][]string) {
	t.Helper()
	var got map[string][]string
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		f.sim.devices.mu.Lock()
		rt := f.sim.devices.nodes["gpu-0"]
		f.sim.devices.mu.Unlock()
		if rt == nil {
			return false, nil
		}
		got = map[string][]string{}
		for _, h := range rt.hook.Holdings().All() {
			got[h.Pod] = append(got[h.Pod], h.UUIDs...)
		}
		if len(got) != len(want) {
			return false, nil
		}
		for pod, uuids := range want {
			if !slices.Equal(got[pod], uuids) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the delivery hook holds %v, want %v", got, want)
	}
}

// TestDevicePath: the simulated kubelet creates GPU pods' containers
// through the node agent's delivery hook on NRI's runtime side; the hook
// records what each holds, refuses an assignment the node cannot honour,
// forgets a pod that ends, and after a restart finds the pods that run.
func TestDevicePath(t *testing.T) {
	card0, card1 := cardUUID(t, 0), cardUUID(t, 1)
	f := start(t)
	f.createPod(t, utiltesting.MakePod("placed", "ns").Node("gpu-0").GPU(1).
		Annotation(gpu.AssignedAnnotation, "1").Annotation(gpu.AssignedUUIDsAnnotation, card1).Obj())
	f.waitPod(t, "placed", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	// Another scheduler's pod: the simulated device plugin gives it the
	// free card, the hook leaves it alone and records it.
	f.createPod(t, utiltesting.MakePod("other", "ns").Node("gpu-0").GPU(1).Obj())
	f.waitPod(t, "other", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	f.waitHoldings(t, map[string][]string{"ns/placed": {card1}, "ns/other": {card0}})

	if err := f.client.CoreV1().Pods("ns").Delete(context.Background(), "other", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitHoldings(t, map[string][]string{"ns/placed": {card1}})

	// An assignment naming a card the node does not have: the allocator
	// admits card 0 by index, the hook refuses the UUID.
	f.createPod(t, utiltesting.MakePod("stale", "ns").Node("gpu-0").GPU(1).
		Annotation(gpu.AssignedAnnotation, "0").Annotation(gpu.AssignedUUIDsAnnotation, "GPU-not-here").Obj())
	p := f.waitPod(t, "stale", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if p.Status.Reason != "CreateContainerError" {
		t.Errorf("reason %q, want CreateContainerError", p.Status.Reason)
	}
	waitEvent(t, f, `card "GPU-not-here" is not a card of this node`)
}

// TestDevicePathRestore: a GPU pod that ran before a restart is held in
// the hook's holdings once the node's runtime starts, so the hook refuses
// its card to a new pod even where the simulated device layer would not.
func TestDevicePathRestore(t *testing.T) {
	card0 := cardUUID(t, 0)
	before := utiltesting.MakePod("old", "ns").Node("gpu-0").GPU(1).
		Annotation(gpu.AssignedAnnotation, "0").Annotation(gpu.AssignedUUIDsAnnotation, card0).Obj()
	before.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.128.4.9", StartTime: &metav1.Time{Time: time.Now()}}
	f := start(t, before)
	// A share on card 0 next to the restored whole-card pod: the allocator
	// refuses it first, as the hook would.
	f.createPod(t, utiltesting.MakePod("new", "ns").Node("gpu-0").
		Annotation(gpu.MilliAnnotation, "500").Annotation(gpu.AssignedAnnotation, "0").Annotation(gpu.AssignedUUIDsAnnotation, card0).Obj())
	f.waitPod(t, "new", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	// A pod on the other card starts the node's runtime: the hook
	// synchronises with the restored container.
	f.createPod(t, utiltesting.MakePod("next", "ns").Node("gpu-0").GPU(1).
		Annotation(gpu.AssignedAnnotation, "1").Annotation(gpu.AssignedUUIDsAnnotation, cardUUID(t, 1)).Obj())
	f.waitPod(t, "next", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	f.waitHoldings(t, map[string][]string{"ns/old": {card0}, "ns/next": {cardUUID(t, 1)}})
	f.sim.devices.mu.Lock()
	rt := f.sim.devices.nodes["gpu-0"]
	f.sim.devices.mu.Unlock()
	if err := rt.hook.Holdings().Admit("probe", deliver.Holding{PodUID: "probe", UUIDs: []string{card0}}, nil); err == nil {
		t.Error("the hook would give the restored pod's card again")
	}
}
