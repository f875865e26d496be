package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OperatorInstance runs an Operator as a Deployment scheduled by aisched.
// Offline keeps the object and removes the pods, freeing their GPUs.
//
// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=aiopi,categories=aisched
// +kubebuilder:printcolumn:name="Operator",type=string,JSONPath=`.spec.operatorRef.name`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.spec.state`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OperatorInstance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec OperatorInstanceSpec `json:"spec"`
	// +optional
	Status OperatorInstanceStatus `json:"status,omitempty"`
}

// OperatorInstanceSpec names the operator and how many replicas run it.
type OperatorInstanceSpec struct {
	// operatorRef is the Operator, in the instance's namespace.
	OperatorRef LocalRef `json:"operatorRef"`
	// replicas is the number of pods while online.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	// +kubebuilder:default=1
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// state Offline scales the Deployment to zero and keeps the object.
	// +kubebuilder:default=Online
	// +optional
	State State `json:"state,omitempty"`
	// schedulerName is the scheduler profile of the pods; default the
	// controller's (aisched).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	SchedulerName string `json:"schedulerName,omitempty"`
	// podAnnotations are added to the pods (e.g. a device plugin's or a
	// monitoring agent's); the GPU annotations come from the Operator.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('gpu.aisched.io/'))",message="gpu.aisched.io/ annotations come from the Operator's gpu field"
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
}

// LocalRef names an object in the same namespace.
type LocalRef struct {
	// name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// OperatorInstanceStatus reports the Deployment.
type OperatorInstanceStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// replicas is the number of pods that exist (the scale subresource's status).
	// +optional
	Replicas int32 `json:"replicas"`
	// readyReplicas is the number of ready pods.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// selector is the pods' label selector, for the scale subresource (HPA).
	// +optional
	Selector string `json:"selector,omitempty"`
	// deployment is the name of the Deployment.
	// +optional
	Deployment string `json:"deployment,omitempty"`
	// conditions: Ready, with the reason when not.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// OperatorInstanceList is a list of OperatorInstances.
// +kubebuilder:object:root=true
type OperatorInstanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OperatorInstance `json:"items"`
}
