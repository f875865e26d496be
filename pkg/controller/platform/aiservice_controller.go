package platform

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/aisched/aisched/apis/platform/v1alpha1"
	"github.com/aisched/aisched/pkg/platform/keys"
	"github.com/aisched/aisched/pkg/platform/refs"
)

// AIServiceReconciler backs an AIService with a NodePort Service of the
// same name that selects its instance's pods, and reports where the
// service answers (the gateway URL, the node port) and whether it does.
// The gateway reads the AIService itself; this controller does not
// configure it.
type AIServiceReconciler struct {
	Client client.Client
	// GatewayURL is the gateway's base URL; empty leaves status.url empty.
	GatewayURL string
	// Pepper makes the digests of the API keys (package keys).
	Pepper []byte
}

// Reconcile makes the Service and the status.
func (r *AIServiceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var svc v1alpha1.AIService
	if err := r.Client.Get(ctx, req.NamespacedName, &svc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := svc.DeepCopy()
	svc.Status.ObservedGeneration = svc.Generation

	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, s, func() error {
		if s.ResourceVersion != "" && !metav1.IsControlledBy(s, &svc) {
			return fmt.Errorf("service %s exists and belongs to something else", s.Name)
		}
		applyService(s, &svc)
		return controllerutil.SetControllerReference(&svc, s, r.Client.Scheme())
	}); err != nil {
		setReady(&svc.Status.Conditions, svc.Generation, false, v1alpha1.ReasonServiceFailed, err.Error())
		if perr := r.patchStatus(ctx, orig, &svc); perr != nil {
			return ctrl.Result{}, perr
		}
		return ctrl.Result{}, err
	}
	svc.Status.Service = s.Name
	svc.Status.NodePort = 0
	if len(s.Spec.Ports) > 0 {
		svc.Status.NodePort = s.Spec.Ports[0].NodePort
	}
	svc.Status.URL = ""
	if r.GatewayURL != "" {
		svc.Status.URL = ServiceURL(r.GatewayURL, svc.Namespace, svc.Name)
	}
	endpoints, err := refs.ReadyEndpoints(ctx, r.Client, svc.Namespace, svc.Name, svc.Spec.Port)
	if err != nil {
		return ctrl.Result{}, err
	}
	svc.Status.ReadyEndpoints = int32(len(endpoints))
	keyErr, err := r.publishKeys(ctx, &svc)
	if err != nil {
		return ctrl.Result{}, err
	}
	ok, reason, msg, err := r.readiness(ctx, &svc, keyErr)
	if err != nil {
		return ctrl.Result{}, err
	}
	setReady(&svc.Status.Conditions, svc.Generation, ok, reason, msg)
	return ctrl.Result{}, r.patchStatus(ctx, orig, &svc)
}

// keysProblem is why a service's API keys cannot be published.
type keysProblem struct{ reason, message string }

// publishKeys sets status.apiKeys to the digests of the keys of the
// service's API-key Secret, which the gateway checks callers' keys
// against; it returns why not when it cannot (the Ready condition says
// so).
func (r *AIServiceReconciler) publishKeys(ctx context.Context, svc *v1alpha1.AIService) (*keysProblem, error) {
	svc.Status.APIKeys = nil
	a := svc.Spec.Auth
	if a == nil || a.Method != v1alpha1.AuthAPIKey || a.SecretRef == nil {
		return nil, nil
	}
	var secret corev1.Secret
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: svc.Namespace, Name: a.SecretRef.Name}, &secret)
	if apierrors.IsNotFound(err) {
		return &keysProblem{v1alpha1.ReasonSecretNotFound, fmt.Sprintf("spec.auth.secretRef.name: no Secret %q of type %s: callers get 503", a.SecretRef.Name, v1alpha1.APIKeySecretType)}, nil
	}
	if err != nil {
		return nil, err
	}
	digests, err := keys.Digests(r.Pepper, &secret)
	switch {
	case err != nil:
		return &keysProblem{v1alpha1.ReasonSecretInvalid, err.Error() + ": every caller gets 401"}, nil
	case len(digests) == 0:
		return &keysProblem{v1alpha1.ReasonSecretInvalid, fmt.Sprintf("Secret %s holds no API key: every caller gets 401", secret.Name)}, nil
	}
	svc.Status.APIKeys = digests
	return nil, nil
}

// ServiceURL is the URL of an AIService on the gateway at base:
// base/<namespace>/<name>/.
func ServiceURL(base, namespace, name string) string {
	return strings.TrimRight(base, "/") + "/" + namespace + "/" + name + "/"
}

// applyService sets what the AIService owns of its Service, keeping the
// node port the apiserver allocated.
func applyService(s *corev1.Service, svc *v1alpha1.AIService) {
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[v1alpha1.ServiceLabel] = svc.Name
	s.Spec.Type = corev1.ServiceTypeNodePort
	s.Spec.Selector = map[string]string{v1alpha1.InstanceLabel: svc.Spec.InstanceRef.Name}
	var nodePort int32
	if len(s.Spec.Ports) == 1 && s.Spec.Ports[0].Port == svc.Spec.Port {
		nodePort = s.Spec.Ports[0].NodePort
	}
	s.Spec.Ports = []corev1.ServicePort{{
		Name:       "http",
		Protocol:   corev1.ProtocolTCP,
		Port:       svc.Spec.Port,
		TargetPort: intstr.FromInt32(svc.Spec.Port),
		NodePort:   nodePort,
	}}
}

// readiness says whether the service answers, and if not, why, the first
// reason in the order a caller would hit it.
func (r *AIServiceReconciler) readiness(ctx context.Context, svc *v1alpha1.AIService, keyErr *keysProblem) (ok bool, reason, msg string, err error) {
	if ks := svc.Spec.KillSwitch; ks != nil && ks.Enabled {
		return false, v1alpha1.ReasonKillSwitch, "the kill switch is on: " + ks.Reason, nil
	}
	var inst v1alpha1.OperatorInstance
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: svc.Namespace, Name: svc.Spec.InstanceRef.Name}, &inst)
	if apierrors.IsNotFound(err) {
		return false, v1alpha1.ReasonInstanceNotFound, fmt.Sprintf("spec.instanceRef.name: operator instance %q not found", svc.Spec.InstanceRef.Name), nil
	}
	if err != nil {
		return false, "", "", err
	}
	if c := meta.FindStatusCondition(inst.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue &&
		(c.Reason == v1alpha1.ReasonOffline || c.Reason == v1alpha1.ReasonOperatorOffline) {
		return false, v1alpha1.ReasonInstanceOffline, fmt.Sprintf("instance %s is offline: %s", inst.Name, c.Message), nil
	}
	var op v1alpha1.Operator
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: svc.Namespace, Name: inst.Spec.OperatorRef.Name}, &op)
	if err != nil && !apierrors.IsNotFound(err) {
		return false, "", "", err
	}
	if err == nil && !servesPort(&op, svc.Spec.Port) {
		return false, v1alpha1.ReasonPortNotFound, fmt.Sprintf("spec.port: operator %s declares no container port %d", op.Name, svc.Spec.Port), nil
	}
	if keyErr != nil {
		return false, keyErr.reason, keyErr.message, nil
	}
	if svc.Status.ReadyEndpoints == 0 {
		why := ""
		if c := meta.FindStatusCondition(inst.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue {
			why = ": " + c.Message
		}
		return false, v1alpha1.ReasonNoReadyEndpoints, fmt.Sprintf("no ready pod of instance %s serves port %d%s", inst.Name, svc.Spec.Port, why), nil
	}
	return true, v1alpha1.ReasonReady, fmt.Sprintf("%d ready endpoints", svc.Status.ReadyEndpoints), nil
}

func servesPort(op *v1alpha1.Operator, port int32) bool {
	for _, c := range op.Spec.Containers {
		for _, p := range c.Ports {
			if p.Port == port {
				return true
			}
		}
	}
	return false
}

func (r *AIServiceReconciler) patchStatus(ctx context.Context, orig, svc *v1alpha1.AIService) error {
	if equality.Semantic.DeepEqual(orig.Status, svc.Status) {
		return nil
	}
	return r.Client.Status().Patch(ctx, svc, client.MergeFrom(orig))
}
