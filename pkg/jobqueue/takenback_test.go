package jobqueue

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestTakenBackFor(t *testing.T) {
	with := func(msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler, Message: msg}}}}
	}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		wantKey string
		wantOK  bool
	}{
		{"a group", with(fmt.Sprintf(takenBackFormat, "aischedqueue vision", "team-a/train", 0, "aischedqueue sandbox")), "team-a/train", true},
		{"a pod in no group", with(fmt.Sprintf(takenBackFormat, "aischedqueue nlp", "pod team-b/p-0", -5, "aischedqueue a, aischedqueue b")), "pod team-b/p-0", true},
		{"preempted by priority", with("preempted by aisched's job queue for pod group ns/g of priority 100"), "", false},
		{"no condition", &corev1.Pod{}, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key, ok := TakenBackFor(tc.pod)
			if key != tc.wantKey || ok != tc.wantOK {
				t.Errorf("TakenBackFor = %q, %v; want %q, %v", key, ok, tc.wantKey, tc.wantOK)
			}
		})
	}
}
