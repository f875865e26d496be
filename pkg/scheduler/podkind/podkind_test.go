package podkind

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/gpu"
)

func TestOf(t *testing.T) {
	cpu := st.MakePod().Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj()
	whole := st.MakePod().Req(map[corev1.ResourceName]string{gpu.ResourceName: "2"}).Obj()
	shared := st.MakePod().Obj()
	shared.Annotations = map[string]string{gpu.MilliAnnotation: "500"}
	invalid := st.MakePod().Obj()
	invalid.Annotations = map[string]string{gpu.MilliAnnotation: "lots"}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want config.PodKind
	}{{"cpu", cpu, config.PodKindCPU}, {"whole cards", whole, config.PodKindWholeGPU}, {"a share", shared, config.PodKindSharedGPU}, {"invalid", invalid, config.PodKindCPU}} {
		if got := Of(tc.pod); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	s := NewSet([]config.PodKind{config.PodKindSharedGPU})
	if s.Ranks(cpu) || s.Ranks(whole) || !s.Ranks(shared) {
		t.Error("a set of shared pods ranks other kinds, or not shared ones")
	}
	if all := NewSet(nil); !all.All() || !all.Ranks(cpu) {
		t.Error("the empty set does not stand for every kind")
	}
}
