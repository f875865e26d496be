package sim

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aisched/aisched/pkg/gpu"
)

func TestCompareHolders(t *testing.T) {
	pod := func(name, assigned string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{NodeName: "n"}}
		if assigned != "" {
			p.Annotations = map[string]string{gpu.AssignedAnnotation: assigned}
		}
		return p
	}
	// b was placed by a profile without GPUFit: its card is the kubelet's
	// choice and not compared.
	pods := []corev1.Pod{pod("a", "0"), pod("b", "")}
	list := func(context.Context) ([]corev1.Pod, error) { return pods, nil }
	for _, tc := range []struct {
		name    string
		kubelet map[string]string
		wantErr string
	}{
		{"the same", map[string]string{"n/0": "ns/a", "n/1": "ns/b"}, ""},
		{"another card", map[string]string{"n/1": "ns/a"}, `card n/0: scheduler "ns/a", kubelet ""; card n/1: scheduler "", kubelet "ns/a"`},
		{"an unassigned pod beside an assigned one is not compared", map[string]string{"n/0": "ns/a,ns/b"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := compareHolders(context.Background(), list, func() map[string]string { return tc.kubelet })
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("compareHolders = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
