package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodGroupLabel names the PodGroup of a pod (scheduler-plugins' label).
const PodGroupLabel = "scheduling.x-k8s.io/pod-group"

// OldPodGroupLabel is scheduler-plugins' label before v0.24, read like
// PodGroupLabel.
const OldPodGroupLabel = "pod-group.scheduling.sigs.k8s.io"

// PodGroupPhase is the phase of a pod group.
type PodGroupPhase string

// The phases of scheduler-plugins.
const (
	PodGroupPending PodGroupPhase = "Pending"
	// PodGroupQueued: aisched's job queue holds the group back; its
	// Admitted condition says why and status.queuePosition where it is.
	PodGroupQueued PodGroupPhase = "Queued"
	// PodGroupUnplaceable: the group does not fit the cluster even with
	// every node empty, so it waits for nothing that can end; its Admitted
	// condition (reason Unplaceable) and its pods' PodScheduled condition
	// say what no node has. It takes no place in the queue, and changes
	// only when the cluster's nodes or the group do.
	PodGroupUnplaceable PodGroupPhase = "Unplaceable"
	PodGroupRunning     PodGroupPhase = "Running"
	PodGroupScheduling  PodGroupPhase = "Scheduling"
	PodGroupScheduled   PodGroupPhase = "Scheduled"
	PodGroupUnknown     PodGroupPhase = "Unknown"
	PodGroupFinished    PodGroupPhase = "Finished"
	PodGroupFailed      PodGroupPhase = "Failed"
)

// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName={pg,pgs}
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Min",type=integer,JSONPath=`.spec.minMember`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.running`
// +kubebuilder:printcolumn:name="Position",type=integer,JSONPath=`.status.queuePosition`
// +kubebuilder:printcolumn:name="Domain",type=string,JSONPath=`.status.domain`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Admitted")].message`,priority=0
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// PodGroup is a group of pods scheduled together: none is bound until
// minMember of them can be.
type PodGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PodGroupSpec   `json:"spec,omitempty"`
	Status PodGroupStatus `json:"status,omitempty"`
}

// PodGroupSpec is what the group needs.
type PodGroupSpec struct {
	// minMember is how many members must be placed together.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MinMember int32 `json:"minMember,omitempty"`

	// minResources is the least the members need together; informational
	// in aisched, which checks the members' own requests node by node.
	// +optional
	MinResources corev1.ResourceList `json:"minResources,omitempty"`

	// scheduleTimeoutSeconds is how long placed members wait in Permit for
	// the rest; default the plugin's permitWaitingTimeSeconds. Any
	// positive int32, as scheduler-plugins' own CRD allows.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`
}

// PodGroupStatus is scheduler-plugins' status with aisched's queue
// fields added (scheduled, queuePosition, conditions).
type PodGroupStatus struct {
	// +optional
	Phase PodGroupPhase `json:"phase,omitempty"`
	// +optional
	OccupiedBy string `json:"occupiedBy,omitempty"`
	// +optional
	Running int32 `json:"running,omitempty"`
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// +optional
	ScheduleStartTime metav1.Time `json:"scheduleStartTime,omitempty"`

	// scheduled is how many members are bound to nodes.
	// +optional
	Scheduled int32 `json:"scheduled,omitempty"`
	// queuePosition is the group's place in aisched's job queue, from 1,
	// while it is Queued.
	// +optional
	QueuePosition int32 `json:"queuePosition,omitempty"`
	// domain is the topology domain the job queue placed the group in, as
	// <level's node label>=<value> (example.com/rack=r3), for a group that
	// asks for one (topology.aisched.io/*, or a peer's form) and is
	// admitted; the Admitted condition says why it is there, or why no
	// domain holds it.
	// +kubebuilder:validation:MaxLength=400
	// +optional
	Domain string `json:"domain,omitempty"`
	// conditions: Admitted says whether the job queue lets the members be
	// scheduled and, in plain words, why not.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ConditionAdmitted is the condition type the job queue sets.
const ConditionAdmitted = "Admitted"

// +kubebuilder:object:root=true

// PodGroupList is a list of PodGroups.
type PodGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodGroup `json:"items"`
}
