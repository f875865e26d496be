package nodesim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/clusterfile"
	"github.com/aisched/aisched/pkg/podload"
	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

func TestNodeMetrics(t *testing.T) {
	pool := &clusterfile.NodePool{
		Name: "cpu", Count: 1,
		CPU:         clusterfile.Quantity{Quantity: resource.MustParse("32")},
		Memory:      clusterfile.Quantity{Quantity: resource.MustParse("128Gi")},
		Performance: clusterfile.Performance{DiskMBps: 500},
		BaseLoad:    clusterfile.NodeLoad{CPU: 10, Disk: 5},
	}
	running := func(p *corev1.Pod) *corev1.Pod {
		p.Status.Phase = corev1.PodRunning
		return p
	}
	pods := []*corev1.Pod{
		running(utiltesting.MakePod("declared", "ns").Req(corev1.ResourceCPU, "1").
			Annotation(podload.ExpectedLoadAnnotation, "cpu=8,network=125M,disk=30").Obj()),
		running(utiltesting.MakePod("requests", "ns").Req(corev1.ResourceCPU, "4").Req(corev1.ResourceMemory, "16Gi").Obj()),
		utiltesting.MakePod("pending", "ns").Req(corev1.ResourceCPU, "16").Obj(),
	}
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	got := nodeMetrics(Node{Pool: pool}, pods, now)
	want := aischedv1alpha1.NodeMetricsStatus{
		SampleTime: metav1.NewTime(now),
		Source:     aischedv1alpha1.MetricsSourceSimulated,
		Utilization: aischedv1alpha1.Utilization{
			// 10 + (8+4)/32 = 37.5% -> 48; memory 16/128 = 12.5% -> 13;
			// network 125e6*8 / 10e9 = 10%; disk 5 + 30. The pending pod
			// does not run.
			CPU: ptr.To[int32](48), Memory: ptr.To[int32](13), Network: ptr.To[int32](10), Disk: ptr.To[int32](35),
		},
		Performance: aischedv1alpha1.Performance{
			Cores: 32, MaxFrequencyMHz: clusterfile.DefaultCPUMaxFrequencyMHz, Memory: ptr.To(resource.MustParse("128Gi")),
			NetworkMbps: clusterfile.DefaultNetworkMbps, DiskMBps: 500,
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodeMetrics (-want,+got):\n%s", diff)
	}
}
