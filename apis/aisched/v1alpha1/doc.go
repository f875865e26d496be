// Package v1alpha1 is the aisched.io/v1alpha1 API: the custom resources that
// aisched's components publish and read (GPU inventories of nodes, node
// metrics) and that administrators declare (team queues, topologies).
//
// +kubebuilder:object:generate=true
// +groupName=aisched.io
package v1alpha1
