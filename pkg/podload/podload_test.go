package podload

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	utiltesting "github.com/aisched/aisched/pkg/util/testing"
)

func TestOf(t *testing.T) {
	pod := func(annotation string) *corev1.Pod {
		w := utiltesting.MakePod("p", "ns").Req(corev1.ResourceCPU, "2").Req(corev1.ResourceMemory, "1Gi")
		if annotation != "" {
			w.Annotation(ExpectedLoadAnnotation, annotation)
		}
		return w.Obj()
	}
	tests := []struct {
		name       string
		annotation string
		want       Load
		wantErr    string
	}{
		{name: "requests", want: Load{MilliCPU: 2000, Memory: 1 << 30}},
		{name: "all keys", annotation: "cpu=500m, memory=2Gi,network=50M,disk=20",
			want: Load{MilliCPU: 500, Memory: 2 << 30, NetworkBytesPerSecond: 50_000_000, DiskPercent: 20}},
		{name: "cpu only keeps memory request", annotation: "cpu=3", want: Load{MilliCPU: 3000, Memory: 1 << 30}},
		{name: "trailing comma", annotation: "disk=5,", want: Load{MilliCPU: 2000, Memory: 1 << 30, DiskPercent: 5}},
		{name: "not key=value", annotation: "cpu", wantErr: `"cpu" is not key=value`},
		{name: "bad quantity", annotation: "memory=lots", wantErr: `memory="lots": not a quantity`},
		{name: "negative", annotation: "network=-1M", wantErr: `network="-1M": must not be negative`},
		{name: "too large", annotation: "memory=1e19", wantErr: `memory="1e19": too large`},
		{name: "disk over 100", annotation: "disk=120", wantErr: `disk="120": must be a whole percent from 0 to 100`},
		{name: "unknown key", annotation: "gpu=1", wantErr: `unknown key "gpu"`},
		{name: "twice", annotation: "cpu=1,cpu=2", wantErr: `key "cpu" given twice`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Of(pod(tc.annotation))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), ExpectedLoadAnnotation) {
					t.Fatalf("error %v, want one naming %s and containing %q", err, ExpectedLoadAnnotation, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Of (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestEstimate(t *testing.T) {
	bad := utiltesting.MakePod("p", "ns").Req(corev1.ResourceCPU, "2").Annotation(ExpectedLoadAnnotation, "cpu=lots").Obj()
	if diff := cmp.Diff(Load{MilliCPU: 2000}, Estimate(bad)); diff != "" {
		t.Errorf("Estimate of a pod with a bad annotation (-want,+got):\n%s", diff)
	}
	good := utiltesting.MakePod("p", "ns").Req(corev1.ResourceCPU, "2").Annotation(ExpectedLoadAnnotation, "disk=7").Obj()
	if diff := cmp.Diff(Load{MilliCPU: 2000, DiskPercent: 7}, Estimate(good)); diff != "" {
		t.Errorf("Estimate (-want,+got):\n%s", diff)
	}
}
