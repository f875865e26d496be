package platform

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"path"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/aisched/aisched/apis/platform/v1alpha1"
	"github.com/aisched/aisched/pkg/webhook/queues"
)

// The admission webhook's paths, one per kind it validates.
const (
	instanceWebhookPath = "/validate-platform-aisched-io-v1alpha1-operatorinstance"
	serviceWebhookPath  = "/validate-platform-aisched-io-v1alpha1-aiservice"
)

// WebhookConfigurationName is the ValidatingWebhookConfiguration of the
// platform (the Helm chart ships it; `aisched up` makes it).
const WebhookConfigurationName = "aisched-platform"

// ValidatingWebhooks are the controller's webhooks, reached through
// clientConfig(path). CRD validation (OpenAPI, CEL) covers each object on
// its own; the webhooks refuse what only a lookup can tell: a reference to
// an Operator or OperatorInstance that does not exist, path patterns that
// do not parse, and team queues that do not fit the others (cycles,
// children over their parent, a queue with work made a parent: package
// webhook/queues). They run only when an object is created or changed,
// never on pods.
func ValidatingWebhooks(clientConfig func(path string) admissionregistrationv1.WebhookClientConfig) []admissionregistrationv1.ValidatingWebhook {
	hook := func(name, resource, path string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name:         name,
			ClientConfig: clientConfig(path),
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups:   []string{v1alpha1.GroupName},
					APIVersions: []string{v1alpha1.SchemeGroupVersion.Version},
					Resources:   []string{resource},
					Scope:       ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			// Fail closed: an unchecked reference would reach the
			// controllers, which report it in the status instead.
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}
	}
	return []admissionregistrationv1.ValidatingWebhook{
		hook("operatorinstances.platform.aisched.io", "operatorinstances", instanceWebhookPath),
		hook("aiservices.platform.aisched.io", "aiservices", serviceWebhookPath),
		queues.ValidatingWebhook(clientConfig(queues.Path)),
	}
}

// WebhookHandlers returns the admission handlers by path. reader must read
// from the apiserver, not a cache: an Operator created a moment before its
// instance must be found.
func WebhookHandlers(scheme *runtime.Scheme, reader client.Reader) map[string]http.Handler {
	handlers := map[string]http.Handler{
		instanceWebhookPath: admission.WithValidator[*v1alpha1.OperatorInstance](scheme, &instanceValidator{reader: reader}),
		serviceWebhookPath:  admission.WithValidator[*v1alpha1.AIService](scheme, &serviceValidator{reader: reader}),
	}
	maps.Copy(handlers, queues.Handlers(scheme, reader))
	return handlers
}

type instanceValidator struct{ reader client.Reader }

var _ admission.Validator[*v1alpha1.OperatorInstance] = &instanceValidator{}

func (v *instanceValidator) ValidateCreate(ctx context.Context, inst *v1alpha1.OperatorInstance) (admission.Warnings, error) {
	return nil, v.validate(ctx, inst)
}

func (v *instanceValidator) ValidateUpdate(ctx context.Context, old, inst *v1alpha1.OperatorInstance) (admission.Warnings, error) {
	if old.Spec.OperatorRef == inst.Spec.OperatorRef {
		// An instance whose Operator was deleted since stays editable
		// (to take it offline, say); its status says what is missing.
		return nil, nil
	}
	return nil, v.validate(ctx, inst)
}

func (v *instanceValidator) ValidateDelete(context.Context, *v1alpha1.OperatorInstance) (admission.Warnings, error) {
	return nil, nil
}

func (v *instanceValidator) validate(ctx context.Context, inst *v1alpha1.OperatorInstance) error {
	errs := mustExist(ctx, v.reader, &v1alpha1.Operator{}, inst.Namespace, inst.Spec.OperatorRef.Name, field.NewPath("spec", "operatorRef", "name"))
	return invalid("OperatorInstance", inst.Name, errs)
}

type serviceValidator struct{ reader client.Reader }

var _ admission.Validator[*v1alpha1.AIService] = &serviceValidator{}

func (v *serviceValidator) ValidateCreate(ctx context.Context, svc *v1alpha1.AIService) (admission.Warnings, error) {
	errs := mustExist(ctx, v.reader, &v1alpha1.OperatorInstance{}, svc.Namespace, svc.Spec.InstanceRef.Name, field.NewPath("spec", "instanceRef", "name"))
	return nil, invalid("AIService", svc.Name, append(errs, validatePathPatterns(svc)...))
}

func (v *serviceValidator) ValidateUpdate(ctx context.Context, old, svc *v1alpha1.AIService) (admission.Warnings, error) {
	var errs field.ErrorList
	if old.Spec.InstanceRef != svc.Spec.InstanceRef {
		errs = mustExist(ctx, v.reader, &v1alpha1.OperatorInstance{}, svc.Namespace, svc.Spec.InstanceRef.Name, field.NewPath("spec", "instanceRef", "name"))
	}
	return nil, invalid("AIService", svc.Name, append(errs, validatePathPatterns(svc)...))
}

func (v *serviceValidator) ValidateDelete(context.Context, *v1alpha1.AIService) (admission.Warnings, error) {
	return nil, nil
}

// validatePathPatterns checks that the allowed paths are patterns
// path.Match accepts; the gateway would otherwise refuse every request.
func validatePathPatterns(svc *v1alpha1.AIService) field.ErrorList {
	var errs field.ErrorList
	if svc.Spec.Request == nil {
		return nil
	}
	for i, p := range svc.Spec.Request.Paths {
		if _, err := path.Match(p, ""); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "request", "paths").Index(i), p, "not a path pattern: "+err.Error()))
		}
	}
	return errs
}

// mustExist looks obj up by name and returns NotFound on fld when it does
// not exist.
func mustExist(ctx context.Context, reader client.Reader, obj client.Object, namespace, name string, fld *field.Path) field.ErrorList {
	err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj)
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return field.ErrorList{field.NotFound(fld, name)}
	default:
		return field.ErrorList{field.InternalError(fld, fmt.Errorf("cannot look it up: %w", err))}
	}
}

func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(v1alpha1.SchemeGroupVersion.WithKind(kind).GroupKind(), name, errs)
}

// ServeWebhooks serves handlers over TLS on l until ctx ends. getCertificate
// returns the serving certificate at each handshake, so that a renewed one
// takes effect at once.
func ServeWebhooks(ctx context.Context, l net.Listener, getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error), handlers map[string]http.Handler) error {
	mux := http.NewServeMux()
	for p, h := range handlers {
		mux.Handle(p, h)
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: getCertificate},
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(l, "", "") }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		err := srv.Shutdown(shutdown)
		if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	}
}
