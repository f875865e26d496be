package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The keys with which a pod group asks for a place in a topology: on its
// PodGroup (annotations) or on its pods (annotations, for example on a
// Job's pod template). Each value of the level keys is a level's node
// label, as a Topology lists it (docs/topology.md).
const (
	// TopologyKey names the Topology the levels are of; optional when one
	// Topology alone has the levels named.
	TopologyKey = "topology.aisched.io/topology"
	// TopologyRequiredKey is the level inside one domain of which every
	// member must run (for example example.com/rack: one rack).
	TopologyRequiredKey = "topology.aisched.io/required"
	// TopologyPreferredKey is the level tried first; when no domain of it
	// holds the group, the next coarser level is tried, up to the required
	// one (or the whole cluster without one).
	TopologyPreferredKey = "topology.aisched.io/preferred"
	// TopologySliceLevelKey and TopologySliceSizeKey ask for slices: every
	// slice-size members inside one domain of the slice level (a tensor-
	// parallel group inside one NVLink domain).
	TopologySliceLevelKey = "topology.aisched.io/slice-level"
	TopologySliceSizeKey  = "topology.aisched.io/slice-size"
)

// Topology declares where nodes sit in the network: its levels are node
// labels, coarsest first (for example a block, a rack, an NVLink clique
// nvidia.com/gpu.clique, a host kubernetes.io/hostname). A domain of a
// level is the nodes that share the label's value (and the values of the
// coarser levels); a node without a level's label is outside that level.
// Pod groups name a level to be placed inside one domain of it (the keys
// topology.aisched.io/*). Several topologies may exist. The plural is
// aischedtopologies (short name atopo), so that it does not collide with
// Kueue's and KAI-Scheduler's Topologies, which aisched also reads.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=aischedtopologies,singular=aischedtopology,shortName=atopo,categories=aisched
// +kubebuilder:printcolumn:name="Levels",type=string,JSONPath=`.spec.levels[*].nodeLabel`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name: at most 63 characters (a topology's name is an annotation value)"
type Topology struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec lists the levels.
	Spec TopologySpec `json:"spec"`
}

// TopologySpec lists a topology's levels.
type TopologySpec struct {
	// levels are the topology's levels, coarsest first; each names a node
	// label, once.
	// +listType=map
	// +listMapKey=nodeLabel
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Levels []TopologyLevel `json:"levels"`
}

// TopologyLevel is one level of a topology.
type TopologyLevel struct {
	// nodeLabel is the node label whose value names a node's domain at
	// this level, such as example.com/rack or nvidia.com/gpu.clique.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="must be a node label key: an optional DNS prefix and '/', then a name of at most 63 characters (A-Z, a-z, 0-9, '-', '_', '.')"
	NodeLabel string `json:"nodeLabel"`
}

// TopologyList is a list of Topologies.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type TopologyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Topology `json:"items"`
}
