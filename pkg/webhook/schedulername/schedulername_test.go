package schedulername

import (
	"context"
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func TestHandle(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	handlers := Handlers(scheme, "aisched")
	pod := func(edit func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
			Spec: corev1.PodSpec{
				SchedulerName: corev1.DefaultSchedulerName,
				Containers:    []corev1.Container{{Name: "c", Image: "i"}},
			},
		}
		if edit != nil {
			edit(p)
		}
		return p
	}
	gpus := func(n int64) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			// As admission sees it: requests defaulted from limits.
			l := corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: l, Requests: l}
		}
	}
	annotate := func(k, v string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Annotations = map[string]string{k: v} }
	}
	for _, tc := range []struct {
		name      string
		path      string
		pod       *corev1.Pod
		operation admissionv1.Operation
		// want is the scheduler after the patch, and the annotation.
		want, reason string
	}{
		{name: "namespace: any pod", path: namespacesPath, pod: pod(nil), want: "aisched", reason: "namespace"},
		{name: "namespace: no schedulerName", path: namespacesPath, pod: pod(func(p *corev1.Pod) { p.Spec.SchedulerName = "" }), want: "aisched", reason: "namespace"},
		{name: "namespace: keeps other annotations", path: namespacesPath, pod: pod(annotate("team", "a")), want: "aisched", reason: "namespace"},
		{name: "namespace: names another scheduler", path: namespacesPath, pod: pod(func(p *corev1.Pod) { p.Spec.SchedulerName = "volcano" }), want: "volcano"},
		{name: "namespace: bound", path: namespacesPath, pod: pod(func(p *corev1.Pod) { p.Spec.NodeName = "n1" }), want: corev1.DefaultSchedulerName},
		{name: "namespace: update", path: namespacesPath, pod: pod(nil), operation: admissionv1.Update, want: corev1.DefaultSchedulerName},
		{name: "gpu: whole cards", path: gpuPodsPath, pod: pod(gpus(2)), want: "aisched", reason: "gpu"},
		{name: "gpu: share", path: gpuPodsPath, pod: pod(annotate("gpu.aisched.io/milli", "500")), want: "aisched", reason: "gpu"},
		{name: "gpu: refused form", path: gpuPodsPath, pod: pod(annotate("gpu.aisched.io/milli", "lots")), want: "aisched", reason: "gpu"},
		{name: "gpu: no GPU", path: gpuPodsPath, pod: pod(nil), want: corev1.DefaultSchedulerName},
		{name: "gpu: names another scheduler", path: gpuPodsPath, pod: pod(func(p *corev1.Pod) { gpus(1)(p); p.Spec.SchedulerName = "hami-scheduler" }), want: "hami-scheduler"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			op := tc.operation
			if op == "" {
				op = admissionv1.Create
			}
			h := handlers[tc.path].(*admission.Webhook)
			resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UID: "u", Operation: op, Namespace: "ns",
				Kind:   metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
				Object: runtime.RawExtension{Raw: raw},
			}})
			if !resp.Allowed {
				t.Fatalf("refused: %+v", resp.Result)
			}
			patch, err := json.Marshal(resp.Patches)
			if err != nil {
				t.Fatal(err)
			}
			out := raw
			if len(resp.Patches) > 0 {
				p, err := jsonpatch.DecodePatch(patch)
				if err != nil {
					t.Fatal(err)
				}
				if out, err = p.Apply(raw); err != nil {
					t.Fatalf("patch %s: %v", patch, err)
				}
			}
			var got corev1.Pod
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if got.Spec.SchedulerName != tc.want {
				t.Errorf("schedulerName %q, want %q (patch %s)", got.Spec.SchedulerName, tc.want, patch)
			}
			if got.Annotations[AssignedAnnotation] != tc.reason {
				t.Errorf("annotation %s=%q, want %q", AssignedAnnotation, got.Annotations[AssignedAnnotation], tc.reason)
			}
			for k, v := range tc.pod.Annotations {
				if got.Annotations[k] != v {
					t.Errorf("annotation %s lost: %q", k, got.Annotations[k])
				}
			}
		})
	}
}

func TestWebhooks(t *testing.T) {
	cc := func(string) (c admissionregistrationv1.WebhookClientConfig) { return c }
	if got := Webhooks(Options{}, cc); len(got) != 0 {
		t.Errorf("no selector, no GPU pods: %d webhooks, want 0", len(got))
	}
	got := Webhooks(Options{NamespaceSelector: &metav1.LabelSelector{}, GPUPods: true, ExcludedNamespaces: []string{"kube-system"}}, cc)
	if len(got) != 2 || got[0].NamespaceSelector == nil || got[1].NamespaceSelector == nil ||
		got[1].NamespaceSelector.MatchExpressions[0].Values[0] != "kube-system" {
		t.Errorf("webhooks %+v, want one by namespace and one for GPU pods that excludes kube-system", got)
	}
}
