// Package schedulername is the optional mutating webhook that hands new
// pods to aisched without editing their manifests: it sets
// spec.schedulerName of pods in the namespaces a cluster opts in, and,
// when asked, of every pod that asks for GPUs. A pod that names a
// scheduler of its own (anything but the default-scheduler) is left alone,
// as is a pod labelled aisched.io/assign-scheduler: "false" or one already
// bound to a node. The platform controller's webhook server serves it; the
// Helm chart's controller.webhook.assignScheduler values configure it.
package schedulername

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/aisched/aisched/pkg/gpu"
)

const (
	// ConfigurationName is the MutatingWebhookConfiguration of the webhook.
	ConfigurationName = "aisched-assign-scheduler"

	// Label "false" on a pod keeps the webhook away from it; "true" on a
	// namespace opts its pods in (the Helm chart's default selector).
	Label = "aisched.io/assign-scheduler"
	// AssignedAnnotation says on a pod that the webhook chose its
	// scheduler, and why: "namespace" or "gpu".
	AssignedAnnotation = "aisched.io/scheduler-assigned-by"

	namespacesPath = "/mutate-v1-pod-scheduler-name"
	gpuPodsPath    = "/mutate-v1-pod-scheduler-name-gpu"
)

// Options say which pods the webhook takes and which scheduler it gives
// them.
type Options struct {
	// SchedulerName is the profile the pods get (aisched).
	SchedulerName string
	// NamespaceSelector selects the namespaces whose every pod is given
	// SchedulerName; nil: none by namespace.
	NamespaceSelector *metav1.LabelSelector
	// GPUPods gives SchedulerName to a pod that asks for GPUs, in any form
	// aisched reads, in any namespace but ExcludedNamespaces.
	GPUPods            bool
	ExcludedNamespaces []string
	// FailurePolicy and TimeoutSeconds of the webhooks.
	FailurePolicy  admissionregistrationv1.FailurePolicyType
	TimeoutSeconds int32
}

// Webhooks are the webhooks of the configuration, reached through
// clientConfig(path): one by namespace, one for GPU pods, as opts ask.
func Webhooks(opts Options, clientConfig func(path string) admissionregistrationv1.WebhookClientConfig) []admissionregistrationv1.MutatingWebhook {
	hook := func(name, path string, namespaces *metav1.LabelSelector) admissionregistrationv1.MutatingWebhook {
		return admissionregistrationv1.MutatingWebhook{
			Name:         name,
			ClientConfig: clientConfig(path),
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			NamespaceSelector: namespaces,
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: Label, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"false"}},
			}},
			FailurePolicy:           ptr.To(opts.FailurePolicy),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To(opts.TimeoutSeconds),
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		}
	}
	var hooks []admissionregistrationv1.MutatingWebhook
	if opts.NamespaceSelector != nil {
		hooks = append(hooks, hook("namespaces.assign-scheduler.aisched.io", namespacesPath, opts.NamespaceSelector))
	}
	if opts.GPUPods {
		var excluded *metav1.LabelSelector
		if len(opts.ExcludedNamespaces) > 0 {
			excluded = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: opts.ExcludedNamespaces},
			}}
		}
		hooks = append(hooks, hook("gpu-pods.assign-scheduler.aisched.io", gpuPodsPath, excluded))
	}
	return hooks
}

// Handlers returns the admission handlers by path; each gives pods the
// scheduler schedulerName.
func Handlers(scheme *runtime.Scheme, schedulerName string) map[string]http.Handler {
	decoder := admission.NewDecoder(scheme)
	return map[string]http.Handler{
		namespacesPath: &admission.Webhook{Handler: &handler{decoder: decoder, scheduler: schedulerName, reason: "namespace"}},
		gpuPodsPath:    &admission.Webhook{Handler: &handler{decoder: decoder, scheduler: schedulerName, reason: "gpu", gpuOnly: true}},
	}
}

type handler struct {
	decoder   admission.Decoder
	scheduler string
	// reason goes into AssignedAnnotation.
	reason string
	// gpuOnly takes only pods that ask for GPUs.
	gpuOnly bool
}

func (h *handler) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	pod := &corev1.Pod{}
	if err := h.decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	switch {
	case pod.Spec.NodeName != "":
		return admission.Allowed("bound to a node already")
	case pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != corev1.DefaultSchedulerName:
		return admission.Allowed("names its scheduler")
	case h.gpuOnly && !asksForGPUs(pod):
		return admission.Allowed("asks for no GPU")
	}
	patches := []jsonpatch.JsonPatchOperation{{Operation: "add", Path: "/spec/schedulerName", Value: h.scheduler}}
	if pod.Annotations == nil {
		patches = append(patches, jsonpatch.JsonPatchOperation{Operation: "add", Path: "/metadata/annotations", Value: map[string]string{AssignedAnnotation: h.reason}})
	} else {
		patches = append(patches, jsonpatch.JsonPatchOperation{Operation: "add", Path: "/metadata/annotations/" + escape(AssignedAnnotation), Value: h.reason})
	}
	return admission.Patched(fmt.Sprintf("scheduler %s (%s)", h.scheduler, h.reason), patches...)
}

// asksForGPUs is true for a pod that asks for cards or a share in any
// form aisched reads, and for one whose GPU request aisched refuses: the
// scheduler then says on the pod what is wrong, where the default
// scheduler would not.
func asksForGPUs(pod *corev1.Pod) bool {
	r, err := gpu.ParseRequest(pod)
	return err != nil || r.Count > 0 || r.Shared()
}

// escape makes s one JSON pointer token (RFC 6901).
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
