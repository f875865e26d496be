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
		if got := NewSet(nil, nil).Of(tc.pod); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	s := NewSet([]config.PodKind{config.PodKindSharedGPU}, nil)
	if s.Has(s.Of(cpu)) || s.Has(s.Of(whole)) || !s.Has(s.Of(shared)) {
		t.Error("a set of shared pods ranks other kinds, or not shared ones")
	}
	if all := NewSet(nil, nil); !all.All() || !all.Has(all.Of(cpu)) {
		t.Error("the empty set does not stand for every kind")
	}
}

// claimRequests stands for the GPU ledger: a pod with a claim asks for
// what the claim's name says.
type claimRequests map[string]gpu.Request

func (c claimRequests) RequestOf(pod *corev1.Pod) (gpu.Request, error) {
	if len(pod.Spec.ResourceClaims) == 0 {
		return gpu.ParseRequest(pod)
	}
	return c[pod.Spec.ResourceClaims[0].Name], nil
}

// TestOfClaims: a pod asking for GPUs through its claims is told apart
// by the requests the set is given, not read as a CPU pod.
func TestOfClaims(t *testing.T) {
	requests := claimRequests{"two-gpus": {Count: 2}, "half": {Count: 1, Milli: 500}}
	claimed := func(name string) *corev1.Pod {
		p := st.MakePod().Obj()
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: name}}
		return p
	}
	cpuOnly := NewSet([]config.PodKind{config.PodKindCPU}, requests)
	for _, tc := range []struct {
		claim string
		want  config.PodKind
	}{{"two-gpus", config.PodKindWholeGPU}, {"half", config.PodKindSharedGPU}, {"other", config.PodKindCPU}} {
		pod := claimed(tc.claim)
		if got := cpuOnly.Of(pod); got != tc.want {
			t.Errorf("claim %s: %s, want %s", tc.claim, got, tc.want)
		}
		if got, want := cpuOnly.Has(cpuOnly.Of(pod)), tc.want == config.PodKindCPU; got != want {
			t.Errorf("claim %s: a set of CPU pods ranks it: %v, want %v", tc.claim, got, want)
		}
	}
	if got := NewSet(nil, nil).Of(claimed("two-gpus")); got != config.PodKindCPU {
		t.Errorf("without requests, a pod with claims is %s, want read from the pod alone (CPU)", got)
	}
}
