package whatif

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/local/nodesim"
)

func TestParseJob(t *testing.T) {
	manifests := `apiVersion: v1
kind: Pod
metadata: {name: solo}
spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: "2"}}}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: team}
spec:
  parallelism: 3
  completions: 2
  template:
    metadata: {labels: {scheduling.x-k8s.io/pod-group: train}}
    spec: {restartPolicy: Never, containers: [{name: c, image: x}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: "1", cpu: "2"}}}]}
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: train, namespace: team}
spec: {minMember: 2}
`
	job, err := ParseJob("job.yaml", []byte(manifests), "default")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range job.Pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	// The Job makes min(parallelism, completions) pods.
	want := []string{"default/solo", "team/train-0", "team/train-1", "default/web-0", "default/web-1"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("pods (-want,+got):\n%s", diff)
	}
	// As the apiserver would, requests default to limits, for a Pod and
	// for a pod made from a template (which the apiserver does not
	// default: its controller's pods are).
	if got := job.Pods[0].Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]; got.Value() != 2 {
		t.Errorf("solo's GPU request %s: want 2, from its limits", got.String())
	}
	for _, p := range job.Pods[3:] {
		req := p.Spec.Containers[0].Resources.Requests
		if gpus, cpu := req["nvidia.com/gpu"], req["cpu"]; gpus.Value() != 1 || cpu.Value() != 2 {
			t.Errorf("%s: requests %v, want nvidia.com/gpu 1 and cpu 2 from the template's limits", p.Name, req)
		}
		if p.Status.Phase != corev1.PodPending || p.Spec.SchedulerName != corev1.DefaultSchedulerName {
			t.Errorf("%s: phase %q, scheduler %q; want the apiserver's Pending and %s", p.Name, p.Status.Phase, p.Spec.SchedulerName, corev1.DefaultSchedulerName)
		}
	}
	if job.Pods[1].Labels["scheduling.x-k8s.io/pod-group"] != "train" || len(job.PodGroups) != 1 || job.PodGroups[0].Namespace != "team" {
		t.Errorf("the template's labels or the PodGroup were lost: %+v %+v", job.Pods[1].Labels, job.PodGroups)
	}
	for _, tc := range []struct{ name, data, want string }{
		{"other kind", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n", "job.yaml:6: Service: kind *v1.Service is not one whatif places"},
		{"unknown field", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c}]\n  nodeSelectr: {a: b}\n", `job.yaml:6: unknown field "spec.nodeSelectr"`},
		{"wrong type", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: c\n", "job.yaml:5: spec.containers"},
		{"syntax", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n\tlabels: {}\n", "job.yaml:4: invalid YAML"},
		{"no pods", "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\nspec: {minMember: 1}\n", "the manifests make no pod"},
		{"too many", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 20000, selector: {}, template: {spec: {containers: [{name: c}]}}}\n", "20000 pods: want 0 to 10000"},
		{"garbage", "{{{", "job.yaml:1"},
	} {
		if _, err := ParseJob("job.yaml", []byte(tc.data), "default"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestExpectedEnd(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := func(annotations map[string]string, deadline *int64) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
			Spec:       corev1.PodSpec{NodeName: "n", ActiveDeadlineSeconds: deadline},
			Status:     corev1.PodStatus{StartTime: &metav1.Time{Time: start}},
		}
	}
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		want   time.Duration
		wantOK bool
	}{
		{"run duration", pod(map[string]string{nodesim.RunDurationAnnotation: "90s"}, nil), 90 * time.Second, true},
		{"active deadline", pod(nil, ptr.To[int64](600)), 10 * time.Minute, true},
		{"nothing says", pod(nil, nil), 0, false},
		{"bad duration", pod(map[string]string{nodesim.RunDurationAnnotation: "soon"}, nil), 0, false},
	} {
		at, ok := expectedEnd(tc.pod)
		if ok != tc.wantOK || ok && at.Sub(start) != tc.want {
			t.Errorf("%s: %v, %t; want start+%v, %t", tc.name, at, ok, tc.want, tc.wantOK)
		}
	}
}
