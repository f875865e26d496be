package console

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/aisched/aisched/apis/scheduling/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/podgroup"
)

func pendingPod(name, group string, created time.Time, reason, message string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{}},
		Spec:   corev1.PodSpec{SchedulerName: "aisched"},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	if group != "" {
		p.Labels[podgroup.NameLabel] = group
	}
	if reason != "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: message}}
	}
	return p
}

func group(name string, minMember, scheduled, position int32, reason, message string) schedulingv1alpha1.PodGroup {
	g := schedulingv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}, Spec: schedulingv1alpha1.PodGroupSpec{MinMember: minMember}}
	g.Status.Scheduled, g.Status.QueuePosition = scheduled, position
	if reason != "" {
		g.Status.Conditions = []metav1.Condition{{Type: schedulingv1alpha1.ConditionAdmitted, Status: metav1.ConditionFalse, Reason: reason, Message: message}}
	}
	return g
}

func TestBuildWaitingWork(t *testing.T) {
	now := time.Now()
	pods := []corev1.Pod{
		pendingPod("big-1", "big", now.Add(-time.Minute), "WaitingForCapacity", "needs 16 cards, 6 free"),
		pendingPod("solo", "", now.Add(-2*time.Minute), "Unschedulable", "0/3 nodes are available"),
		pendingPod("small-1", "small", now, "", ""),
	}
	// solo shares two cards (KAI's form).
	pods[1].Annotations = map[string]string{gpu.KAIFractionAnnotation: "0.3", gpu.KAINumDevicesAnnotation: "2"}
	bound := pendingPod("bound", "", now, "", "")
	bound.Spec.NodeName = "n1"
	pods = append(pods, bound)
	groups := []schedulingv1alpha1.PodGroup{
		group("small", 1, 0, 2, "BehindReservation", "behind ml/big"),
		group("big", 4, 0, 1, "WaitingForCapacity", "needs 16 cards, 6 free"),
		group("done", 2, 2, 0, "", ""),
	}
	quota := corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "gpus"}}
	quota.Status.Hard = corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("8")}
	quota.Status.Used = corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("6")}

	w := BuildWaitingWork(pods, groups, []corev1.ResourceQuota{quota})
	if len(w.Pods) != 3 || w.Pods[0].Name != "solo" || w.Pods[1].Name != "big-1" || w.Pods[1].Group != "ml/big" {
		t.Fatalf("pods %+v: want solo, big-1, small-1, oldest first, without the bound pod", w.Pods)
	}
	if w.Pods[0].Reason != "Unschedulable" || w.Pods[1].Message != "needs 16 cards, 6 free" {
		t.Errorf("pods' reasons %+v", w.Pods[:2])
	}
	if w.Pods[0].GPU != "300/1000 of each of 2 GPUs" || w.Pods[1].GPU != "" {
		t.Errorf("pods' GPUs %q, %q; want solo's share of two cards, none for big-1", w.Pods[0].GPU, w.Pods[1].GPU)
	}
	if len(w.Groups) != 2 || w.Groups[0].Name != "big" || w.Groups[1].Name != "small" {
		t.Fatalf("groups %+v: want big then small, by queue position, and not the scheduled group", w.Groups)
	}
	if g := w.Groups[0]; g.Reason != "WaitingForCapacity" || g.Pending != 1 || g.MinMember != 4 || len(g.Ahead) != 0 {
		t.Errorf("big: %+v", g)
	}
	if g := w.Groups[1]; len(g.Ahead) != 1 || g.Ahead[0] != "ml/big" {
		t.Errorf("small: ahead %v, want [ml/big]", g.Ahead)
	}
	if len(w.Quotas) != 1 || w.Quotas[0].Resources[0].Percent != 75 || w.Quotas[0].Resources[0].Used != "6" {
		t.Errorf("quotas %+v: want 6 of 8 GPUs used, 75%%", w.Quotas)
	}
}
