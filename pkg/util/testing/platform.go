package testing

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	platformv1alpha1 "github.com/aisched/aisched/apis/platform/v1alpha1"
)

// DemoImage is the demo model image that `aisched up` runs for real.
const DemoImage = "ghcr.io/aisched/demo-model:v1"

// OperatorWrapper builds an Operator.
type OperatorWrapper struct{ platformv1alpha1.Operator }

// MakeOperator returns an online AI-capability Operator with one container
// "model" of the demo image serving HTTP on port 8080.
func MakeOperator(name, namespace string) *OperatorWrapper {
	return &OperatorWrapper{platformv1alpha1.Operator{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: platformv1alpha1.OperatorSpec{
			DisplayName: name,
			Category:    platformv1alpha1.CategoryAICapability,
			Containers: []platformv1alpha1.OperatorContainer{{
				Name: "model", Image: DemoImage,
				Ports: []platformv1alpha1.OperatorPort{{Name: "http", Port: 8080}},
				CPU:   ptr.To(resource.MustParse("100m")), Memory: ptr.To(resource.MustParse("128Mi")),
			}},
		},
	}}
}

// Obj returns the Operator.
func (o *OperatorWrapper) Obj() *platformv1alpha1.Operator { return &o.Operator }

// GPUs sets the whole cards of the first container.
func (o *OperatorWrapper) GPUs(n int32) *OperatorWrapper {
	o.Spec.Containers[0].GPUs = n
	return o
}

// InstanceWrapper builds an OperatorInstance.
type InstanceWrapper struct {
	platformv1alpha1.OperatorInstance
}

// MakeInstance returns an online instance of the operator with 1 replica.
func MakeInstance(name, namespace, operator string) *InstanceWrapper {
	return &InstanceWrapper{platformv1alpha1.OperatorInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: platformv1alpha1.OperatorInstanceSpec{
			OperatorRef: platformv1alpha1.LocalRef{Name: operator},
			Replicas:    ptr.To[int32](1),
		},
	}}
}

// Obj returns the instance.
func (i *InstanceWrapper) Obj() *platformv1alpha1.OperatorInstance { return &i.OperatorInstance }

// Replicas sets the replicas.
func (i *InstanceWrapper) Replicas(n int32) *InstanceWrapper {
	i.Spec.Replicas = &n
	return i
}

// PodAnnotation adds a pod annotation.
func (i *InstanceWrapper) PodAnnotation(key, value string) *InstanceWrapper {
	if i.Spec.PodAnnotations == nil {
		i.Spec.PodAnnotations = map[string]string{}
	}
	i.Spec.PodAnnotations[key] = value
	return i
}

// ServiceWrapper builds an AIService.
type ServiceWrapper struct{ platformv1alpha1.AIService }

// MakeService returns an AIService of the instance on port 8080, path /,
// with no controls.
func MakeService(name, namespace, instance string) *ServiceWrapper {
	return &ServiceWrapper{platformv1alpha1.AIService{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: platformv1alpha1.AIServiceSpec{
			InstanceRef: platformv1alpha1.LocalRef{Name: instance},
			Port:        8080,
			Path:        "/",
		},
	}}
}

// Obj returns the AIService.
func (s *ServiceWrapper) Obj() *platformv1alpha1.AIService { return &s.AIService }

// APIKeys makes the service authenticate by the keys of the Secret.
func (s *ServiceWrapper) APIKeys(secret string) *ServiceWrapper {
	s.Spec.Auth = &platformv1alpha1.Auth{Method: platformv1alpha1.AuthAPIKey, SecretRef: &platformv1alpha1.LocalRef{Name: secret}}
	return s
}

// Access sets the access lists.
func (s *ServiceWrapper) Access(a platformv1alpha1.AccessControl) *ServiceWrapper {
	s.Spec.Access = &a
	return s
}

// Request sets the request control.
func (s *ServiceWrapper) Request(r platformv1alpha1.RequestControl) *ServiceWrapper {
	s.Spec.Request = &r
	return s
}

// KillSwitch turns the kill switch on with the reason.
func (s *ServiceWrapper) KillSwitch(reason string) *ServiceWrapper {
	s.Spec.KillSwitch = &platformv1alpha1.KillSwitch{Enabled: true, Reason: reason}
	return s
}

// RateLimit sets the flow control.
func (s *ServiceWrapper) RateLimit(r platformv1alpha1.RateLimit) *ServiceWrapper {
	s.Spec.RateLimit = &r
	return s
}

// CircuitBreaker sets the breaker.
func (s *ServiceWrapper) CircuitBreaker(b platformv1alpha1.CircuitBreaker) *ServiceWrapper {
	s.Spec.CircuitBreaker = &b
	return s
}
