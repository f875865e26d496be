package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeMetrics is the measured load and the performance of one node; its
// name is the node's name. The node agent (`aisched agent`, a DaemonSet)
// publishes it at an interval, simulated nodes of `aisched up` too, and the
// LoadAware scheduler plugin reads it. Everything is in status: the spec is
// empty, and the publisher is the only author.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nm
// +kubebuilder:printcolumn:name="CPU%",type=integer,JSONPath=`.status.utilization.cpu`
// +kubebuilder:printcolumn:name="Memory%",type=integer,JSONPath=`.status.utilization.memory`
// +kubebuilder:printcolumn:name="Network%",type=integer,JSONPath=`.status.utilization.network`
// +kubebuilder:printcolumn:name="Disk%",type=integer,JSONPath=`.status.utilization.disk`
// +kubebuilder:printcolumn:name="Sampled",type=date,JSONPath=`.status.sampleTime`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.status.source`,priority=1
type NodeMetrics struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is empty.
	// +optional
	Spec NodeMetricsSpec `json:"spec,omitempty"`
	// status is the last sample.
	// +optional
	Status NodeMetricsStatus `json:"status,omitempty"`
}

// NodeMetricsSpec is empty: what a node measures is not desired state.
type NodeMetricsSpec struct{}

// MetricsSource says who measured a sample.
// +kubebuilder:validation:Enum=Agent;Simulated
type MetricsSource string

const (
	// MetricsSourceAgent is `aisched agent` on a real node.
	MetricsSourceAgent MetricsSource = "Agent"
	// MetricsSourceSimulated is a simulated node of `aisched up`, whose load
	// follows the pods it runs.
	MetricsSourceSimulated MetricsSource = "Simulated"
)

// NodeMetricsStatus is one sample: utilisation averaged over a window that
// ends at sampleTime, and the node's performance.
type NodeMetricsStatus struct {
	// sampleTime is when the window ended. A reader ignores samples older
	// than its TTL.
	SampleTime metav1.Time `json:"sampleTime"`
	// window is the span the utilisation is averaged over.
	Window metav1.Duration `json:"window"`
	// source is who measured the sample.
	// +optional
	Source MetricsSource `json:"source,omitempty"`
	// utilization is the load, each resource in percent; a resource the
	// publisher could not measure is absent.
	Utilization Utilization `json:"utilization"`
	// performance is the node's capacity; a quantity the publisher could not
	// find is absent (0).
	// +optional
	Performance Performance `json:"performance,omitempty"`
	// gpus is the per-card load, when the node has NVIDIA GPUs.
	// +optional
	// +listType=map
	// +listMapKey=index
	GPUs []GPUMetrics `json:"gpus,omitempty"`
}

// Utilization is the load of a node in percent of its capacity.
type Utilization struct {
	// cpu is the busy share of all logical CPUs.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	CPU *int32 `json:"cpu,omitempty"`
	// memory is (total - available) / total.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Memory *int32 `json:"memory,omitempty"`
	// network is bytes received and sent per second against the link
	// speed of the node's physical interfaces.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Network *int32 `json:"network,omitempty"`
	// disk is the busy time of the busiest physical disk.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Disk *int32 `json:"disk,omitempty"`
}

// Performance is what a node can do.
type Performance struct {
	// cores is the number of logical CPUs.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	Cores int32 `json:"cores,omitempty"`
	// maxFrequencyMHz is the highest CPU clock.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000000
	MaxFrequencyMHz int64 `json:"maxFrequencyMHz,omitempty"`
	// memory is the total memory.
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
	// networkMbps is the summed link speed of the physical interfaces.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000000
	NetworkMbps int64 `json:"networkMbps,omitempty"`
	// diskMBps is the disk write throughput, configured or measured once
	// when the publisher started.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000000
	DiskMBps int64 `json:"diskMBps,omitempty"`
}

// GPUMetrics is the load of one card.
type GPUMetrics struct {
	// index is the card's index on the node, as in the GPUInventory.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=63
	Index int32 `json:"index"`
	// utilization is the busy share of the card in percent, absent when
	// the driver does not report it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Utilization *int32 `json:"utilization,omitempty"`
	// memoryUsedMiB is the card memory in use.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MemoryUsedMiB int64 `json:"memoryUsedMiB,omitempty"`
}

// NodeMetricsList is a list of NodeMetrics.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type NodeMetricsList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeMetrics `json:"items"`
}
