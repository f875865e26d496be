// Package v1alpha1 is the scheduling.x-k8s.io/v1alpha1 API of
// kubernetes-sigs/scheduler-plugins, field for field: the PodGroup of gang
// scheduling, so that manifests written for scheduler-plugins' Coscheduling
// work unchanged with aisched.
//
// +kubebuilder:object:generate=true
// +groupName=scheduling.x-k8s.io
package v1alpha1
