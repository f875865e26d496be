// Package v1alpha1 is the platform.aisched.io/v1alpha1 API: the AI service
// platform. An Operator is a model image and how to run it, an
// OperatorInstance runs an Operator as a Deployment, and an AIService
// exposes an instance through a NodePort Service and aisched's gateway,
// with the security controls the gateway enforces.
//
// +kubebuilder:object:generate=true
// +groupName=platform.aisched.io
package v1alpha1
