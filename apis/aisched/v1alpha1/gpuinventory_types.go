package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GPUHealth is the health of a card as its publisher sees it.
// +kubebuilder:validation:Enum=Healthy;Unhealthy
type GPUHealth string

const (
	// GPUHealthy cards can be assigned to pods.
	GPUHealthy GPUHealth = "Healthy"
	// GPUUnhealthy cards are never assigned.
	GPUUnhealthy GPUHealth = "Unhealthy"
)

// GPUInventory lists the GPUs of one node; its name is the node's name. The
// node agent publishes it (simulated nodes of `aisched up` too), and the
// scheduler's GPU plugins read it. Like a DRA ResourceSlice, the published
// inventory is the spec: its publisher is its only author. The status is
// the agent's comparison of what containers hold with what the scheduler
// assigned.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=gpuinv
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.gpus[0].model`
// +kubebuilder:printcolumn:name="Memory MiB",type=integer,JSONPath=`.spec.gpus[0].memoryMiB`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GPUInventory struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec lists the cards.
	Spec GPUInventorySpec `json:"spec"`
	// status is what the node agent found of the cards' use.
	// +optional
	Status GPUInventoryStatus `json:"status,omitempty"`
}

// GPUInventoryStatus is the node agent's last comparison of the cards the
// node's containers hold (as the agent's delivery hook gave them, or as
// the kubelet's PodResources API reports them) with the cards the
// scheduler assigned to their pods.
type GPUInventoryStatus struct {
	// checkTime is when the comparison was made.
	// +optional
	CheckTime *metav1.Time `json:"checkTime,omitempty"`
	// drift lists the pods whose containers hold other cards than the
	// scheduler assigned, or none while running; the first 64 by name.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Drift []GPUDrift `json:"drift,omitempty"`
	// driftCount is the number of such pods, drift's and the others.
	// +kubebuilder:validation:Minimum=0
	// +optional
	DriftCount int32 `json:"driftCount,omitempty"`
}

// GPUDrift is a pod whose containers hold other cards than assigned.
type GPUDrift struct {
	// pod is the pod's namespace/name.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=317
	Pod string `json:"pod"`
	// assigned are the UUIDs of the cards the scheduler assigned.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=128
	// +optional
	Assigned []string `json:"assigned,omitempty"`
	// held are the UUIDs of the cards the pod's containers hold.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=128
	// +optional
	Held []string `json:"held,omitempty"`
}

// GPUInventorySpec lists the cards of a node.
type GPUInventorySpec struct {
	// gpus are the node's cards, one entry per index.
	// +listType=map
	// +listMapKey=index
	// +kubebuilder:validation:MaxItems=64
	// +optional
	GPUs []GPU `json:"gpus,omitempty"`
}

// GPU is one card.
type GPU struct {
	// index is the card's index on the node (nvidia-smi's index), from 0.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=63
	Index int32 `json:"index"`
	// uuid is the card's UUID (GPU-xxxxxxxx-...), which device plugins use.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	UUID string `json:"uuid,omitempty"`
	// model is the product name, e.g. NVIDIA-A100-SXM4-40GB.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Model string `json:"model"`
	// memoryMiB is the card's memory in MiB.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1048576
	MemoryMiB int64 `json:"memoryMiB"`
	// cudaCores is the number of CUDA cores; 0 when unknown.
	// +kubebuilder:validation:Minimum=0
	// +optional
	// +kubebuilder:validation:Maximum=10000000
	CUDACores int64 `json:"cudaCores,omitempty"`
	// computeCapability is major.minor, e.g. "8.0".
	// +kubebuilder:validation:Pattern=`^[0-9]+\.[0-9]+$`
	// +optional
	ComputeCapability string `json:"computeCapability,omitempty"`
	// memoryBandwidthGBps is the memory bandwidth in GB/s; 0 when unknown.
	// +kubebuilder:validation:Minimum=0
	// +optional
	// +kubebuilder:validation:Maximum=10000000
	MemoryBandwidthGBps int64 `json:"memoryBandwidthGBps,omitempty"`
	// maxClockMHz is the maximum SM clock in MHz; 0 when unknown.
	// +kubebuilder:validation:Minimum=0
	// +optional
	// +kubebuilder:validation:Maximum=10000000
	MaxClockMHz int64 `json:"maxClockMHz,omitempty"`
	// health says whether the card may be assigned.
	// +kubebuilder:default=Healthy
	// +optional
	Health GPUHealth `json:"health,omitempty"`
}

// GPUInventoryList is a list of GPUInventory.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type GPUInventoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the inventories.
	Items []GPUInventory `json:"items"`
}
