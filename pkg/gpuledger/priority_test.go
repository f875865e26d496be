package gpuledger

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/aisched/aisched/pkg/gpu"
)

// HolderBelow follows the priorities of the pods that hold cards: those
// GPUFit reserves for, those bound with a record of their cards, and those
// bound asking for cards another scheduler gave; it forgets each pod that
// releases its cards or goes.
func TestHolderBelow(t *testing.T) {
	s := NewStandalone(Options{})
	below := func(p int32) bool { return s.HolderBelow(p) }
	if below(1000) {
		t.Fatal("no pod holds cards: HolderBelow(1000) = true")
	}
	reserved := st.MakePod().Name("r").UID("r").Priority(10).Obj()
	s.AssignPod(reserved, "n", []int{0}, Share{})
	if !below(11) || below(10) {
		t.Errorf("a holder of priority 10: HolderBelow(11) %t, HolderBelow(10) %t; want true, false", below(11), below(10))
	}
	// Bound with its record: the informer's view of the same pod, raised.
	bound := st.MakePod().Name("r").UID("r").Node("n").Priority(20).Req(map[corev1.ResourceName]string{gpu.ResourceName: "1"}).Obj()
	bound.Annotations = map[string]string{gpu.AssignedAnnotation: "0"}
	s.ObservePod(bound)
	if below(20) || !below(21) {
		t.Errorf("the holder now of priority 20: HolderBelow(20) %t, HolderBelow(21) %t; want false, true", below(20), below(21))
	}
	// Another scheduler's pod with a card but no record.
	other := st.MakePod().Name("o").UID("o").Node("m").Priority(5).Req(map[corev1.ResourceName]string{gpu.ResourceName: "1"}).Obj()
	s.ObservePod(other)
	if !below(6) {
		t.Error("another scheduler's GPU pod of priority 5: HolderBelow(6) = false")
	}
	// A CPU pod counts for nothing.
	s.ObservePod(st.MakePod().Name("c").UID("c").Node("m").Priority(1).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj())
	if below(5) {
		t.Error("a CPU pod of priority 1: HolderBelow(5) = true")
	}
	s.ForgetPod(other)
	s.Release(reserved.UID, "elsewhere")
	if !below(21) {
		t.Error("a release on another node forgot the holder")
	}
	s.Release(reserved.UID, "n")
	if below(1000) {
		t.Error("every holder gone: HolderBelow(1000) = true")
	}
}

// PodBelow follows the priorities of every pod bound to a node, of any
// kind, and forgets a pod that ends or goes; a pod not bound counts for
// nothing.
func TestPodBelow(t *testing.T) {
	s := NewStandalone(Options{})
	below := func(p int32) bool { return s.PodBelow(p) }
	s.ObservePod(st.MakePod().Name("pending").UID("pending").Priority(1).Obj())
	if below(1000) {
		t.Fatal("no pod bound: PodBelow(1000) = true")
	}
	cpu := st.MakePod().Name("c").UID("c").Node("m").Priority(5).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj()
	s.ObservePod(cpu)
	if !below(6) || below(5) {
		t.Errorf("a CPU pod of priority 5 bound: PodBelow(6) %t, PodBelow(5) %t; want true, false", below(6), below(5))
	}
	done := cpu.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	s.ObservePod(done)
	if below(6) {
		t.Error("the pod succeeded: PodBelow(6) = true")
	}
	s.ObservePod(cpu)
	s.ForgetPod(cpu)
	if below(1000) {
		t.Error("the pod deleted: PodBelow(1000) = true")
	}
}
