package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OperatorCategory is what an Operator does in a pipeline.
// +kubebuilder:validation:Enum=AICapability;Logic;DataInput;DataOutput
type OperatorCategory string

const (
	CategoryAICapability OperatorCategory = "AICapability"
	CategoryLogic        OperatorCategory = "Logic"
	CategoryDataInput    OperatorCategory = "DataInput"
	CategoryDataOutput   OperatorCategory = "DataOutput"
)

// Operator is a processing unit bound to container images: a model server,
// a logic step, a data source or sink. OperatorInstances run it.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=aiop,categories=aisched
// +kubebuilder:printcolumn:name="Display name",type=string,JSONPath=`.spec.displayName`
// +kubebuilder:printcolumn:name="Category",type=string,JSONPath=`.spec.category`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.spec.state`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.containers[0].image`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Operator struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec OperatorSpec `json:"spec"`
	// +optional
	Status OperatorStatus `json:"status,omitempty"`
}

// OperatorSpec describes the container group and how it may be used.
// +kubebuilder:validation:XValidation:rule="!has(self.gpu) || !has(self.gpu.milli) || self.containers.all(c, !has(c.gpus) || c.gpus == 0)",message="a GPU share (gpu.milli) replaces whole cards: containers[].gpus must be 0",fieldPath=".gpu.milli"
// +kubebuilder:validation:XValidation:rule="!has(self.gpu) || !has(self.gpu.memoryShareMiB) || self.containers.all(c, !has(c.gpus) || c.gpus == 0)",message="a GPU share (gpu.memoryShareMiB) replaces whole cards: containers[].gpus must be 0",fieldPath=".gpu.memoryShareMiB"
// +kubebuilder:validation:XValidation:rule="!has(self.gpu) || has(self.gpu.milli) || has(self.gpu.memoryShareMiB) || self.containers.exists(c, has(c.gpus) && c.gpus > 0)",message="per-card constraints need whole cards in containers[].gpus or a share in gpu.milli or gpu.memoryShareMiB",fieldPath=".gpu"
type OperatorSpec struct {
	// displayName is the name people see.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	DisplayName string `json:"displayName"`
	// description says what the operator does.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Description string `json:"description,omitempty"`
	// category is AICapability, Logic, DataInput or DataOutput.
	Category OperatorCategory `json:"category"`
	// containers is the container group: one pod runs them all.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Containers []OperatorContainer `json:"containers"`
	// gpu constrains each card the pod gets (pod annotations the GPU
	// plugins read), or asks for a share of one card.
	// +optional
	GPU *GPUConstraints `json:"gpu,omitempty"`
	// state Offline takes every instance of the operator offline.
	// +kubebuilder:default=Online
	// +optional
	State State `json:"state,omitempty"`
}

// OperatorContainer is one container of the group.
type OperatorContainer struct {
	// name is the container's name, a DNS label.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// image is an image reference: from a registry (registry.example.com/team/model:1.0)
	// or a third party's (ghcr.io/org/model@sha256:...).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image"`
	// command replaces the image's entrypoint.
	// +optional
	Command []string `json:"command,omitempty"`
	// args replace the image's arguments.
	// +optional
	Args []string `json:"args,omitempty"`
	// env sets environment variables.
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
	// ports are the ports the container serves; AIServices refer to them by name.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Ports []OperatorPort `json:"ports,omitempty"`
	// cpu is the CPU request (and limit), e.g. "500m".
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`
	// memory is the memory request (and limit), e.g. "2Gi".
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
	// gpus is the number of whole cards (nvidia.com/gpu).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	// +optional
	GPUs int32 `json:"gpus,omitempty"`
	// livenessProbe restarts the container when it fails.
	// +optional
	LivenessProbe *corev1.Probe `json:"livenessProbe,omitempty"`
	// readinessProbe (the business probe) takes the pod out of the
	// service's endpoints while it fails.
	// +optional
	ReadinessProbe *corev1.Probe `json:"readinessProbe,omitempty"`
}

// OperatorPort is a named container port.
type OperatorPort struct {
	// name is an IANA service name (e.g. http), referred to by AIServices.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=15
	Name string `json:"name"`
	// port is the container port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// GPUConstraints are the per-card constraints of the GPU plugins.
type GPUConstraints struct {
	// models are the acceptable card models (e.g. NVIDIA-A100-SXM4-80GB).
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Models []string `json:"models,omitempty"`
	// memory is the least memory of each card, e.g. "40Gi".
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
	// cores is the least number of CUDA cores of each card.
	// +kubebuilder:validation:Minimum=1
	// +optional
	// +kubebuilder:validation:Maximum=10000000
	Cores *int64 `json:"cores,omitempty"`
	// milli asks for a share of one card in thousandths (1..999) instead of
	// whole cards.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=999
	// +optional
	Milli *int32 `json:"milli,omitempty"`
	// memoryShareMiB asks for this much of one card's memory, in MiB,
	// instead of whole cards; with milli, for both. Alone it reserves no
	// compute, as HAMi's gpumem without gpucores.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	MemoryShareMiB *int32 `json:"memoryShareMiB,omitempty"`
}

// OperatorStatus reports whether instances may use the operator.
type OperatorStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// OperatorList is a list of Operators.
// +kubebuilder:object:root=true
type OperatorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Operator `json:"items"`
}
