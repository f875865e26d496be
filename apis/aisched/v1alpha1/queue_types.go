package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// QueueLabel names the Queue of a pod's work: on a namespace for all of
// its pods, on a pod (or a pod template) for that pod, overriding its
// namespace's.
const QueueLabel = "scheduling.aisched.io/queue"

// Resource names a Queue accounts, besides cpu and memory.
const (
	// QueueGPU is GPUs in cards: a whole card counts 1, a share of one its
	// fraction (gpu.aisched.io/milli / 1000, or its memory's fraction of
	// the card's).
	QueueGPU = "nvidia.com/gpu"
	// QueueSharedGPU is the part of QueueGPU held as shares of cards.
	QueueSharedGPU = "gpu.aisched.io/shared"
	// QueueModelPrefix prefixes the GPUs of one model, as the GPU ledger
	// names models (models.gpu.aisched.io/NVIDIA-A100-SXM4-80GB): cards of
	// that model, shares counted as their fraction.
	QueueModelPrefix = "models.gpu.aisched.io/"
)

// Queue is a team's share of the cluster: what it is guaranteed, how far
// it may borrow what others leave idle, its weight in the capacity beyond
// the guarantees, and what it lends. Queues form a tree (spec.parent);
// only leaves hold work. aisched's job queue admits each pod group, and
// each pod in no group, when its leaf queue and every ancestor have room,
// and takes back what others borrowed when a queue below its guarantee
// waits. The queue of a pod is named by the label
// scheduling.aisched.io/queue on the pod or on its namespace, else it is
// the default queue. The plural is aischedqueues (short name aq), so that
// it does not collide with Volcano's and KAI-Scheduler's queues.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=aischedqueues,singular=aischedqueue,shortName=aq,categories=aisched
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parent`
// +kubebuilder:printcolumn:name="GPU Guaranteed",type=string,JSONPath=`.status.gpu.guaranteed`
// +kubebuilder:printcolumn:name="GPU In Use",type=string,JSONPath=`.status.gpu.used`
// +kubebuilder:printcolumn:name="Borrowed",type=string,JSONPath=`.status.gpu.borrowed`
// +kubebuilder:printcolumn:name="Fair Share",type=string,JSONPath=`.status.gpu.fairShare`
// +kubebuilder:printcolumn:name="Admitted",type=integer,JSONPath=`.status.admittedGroups`
// +kubebuilder:printcolumn:name="Waiting",type=integer,JSONPath=`.status.waitingGroups`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name: at most 63 characters (a queue's name is a label value)"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.parent) || self.spec.parent != self.metadata.name",message="spec.parent: a queue cannot be its own parent"
type Queue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the queue's place in the tree and its amounts.
	Spec QueueSpec `json:"spec"`
	// status is what the job queue last counted.
	// +optional
	Status QueueStatus `json:"status,omitempty"`
}

// QueueSpec is a queue's place in the tree and its amounts.
type QueueSpec struct {
	// parent is the name of the parent Queue; none for a top-level queue.
	// A queue with children holds no work of its own.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Parent string `json:"parent,omitempty"`
	// resources are the queue's amounts, by resource: cpu, memory,
	// nvidia.com/gpu (cards; a share counts as its fraction),
	// gpu.aisched.io/shared (the part of those held as shares), and
	// models.gpu.aisched.io/<model> (cards of one model). A resource not
	// listed is guaranteed nothing and limited by nothing, with weight 1.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Resources []QueueResource `json:"resources,omitempty"`
	// default makes this the queue of work that names none. At most one
	// queue is the default; without one, such work is in no queue (it is
	// admitted as before queues: against ResourceQuota only).
	// +optional
	Default bool `json:"default,omitempty"`
	// usageHalfLifeSeconds, when set, counts the queue's past use against
	// its share of the capacity beyond the guarantees: the use it had
	// halves in weight every usageHalfLifeSeconds, so a team that used
	// much lately gets less of the spare capacity (never less of its
	// guarantee). 0 or unset: only the current use counts.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2592000
	// +optional
	UsageHalfLifeSeconds int32 `json:"usageHalfLifeSeconds,omitempty"`
}

// QueueResource is a queue's amounts of one resource. A limit below the
// guarantee is reported on the queue's Valid condition (the guarantee is
// then the limit too); the CEL rules that would compare the two cost more
// than the apiserver's budget for a list of quantities.
type QueueResource struct {
	// name is the resource: cpu, memory, nvidia.com/gpu,
	// gpu.aisched.io/shared or models.gpu.aisched.io/<model>.
	// +kubebuilder:validation:MaxLength=96
	// +kubebuilder:validation:XValidation:rule="self in ['cpu', 'memory', 'nvidia.com/gpu', 'gpu.aisched.io/shared'] || (self.startsWith('models.gpu.aisched.io/') && self.size() > 22 && self.substring(22).matches('^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'))",message="must be cpu, memory, nvidia.com/gpu, gpu.aisched.io/shared or models.gpu.aisched.io/<model>"
	Name string `json:"name"`
	// guaranteed is what the queue gets whenever its work asks for it:
	// others may borrow it while the queue does not use it, and the job
	// queue takes it back when the queue's work waits. At most 1e6 (cards,
	// cores), 1Pi of memory.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('0')) >= 0",message="must not be negative"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('1Pi')) <= 0",message="must be at most 1Pi"
	// +optional
	Guaranteed *resource.Quantity `json:"guaranteed,omitempty"`
	// limit is the most the queue may use, its guarantee and what it
	// borrows together; unset: no limit.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('0')) >= 0",message="must not be negative"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('1Pi')) <= 0",message="must be at most 1Pi"
	// +optional
	Limit *resource.Quantity `json:"limit,omitempty"`
	// lendingLimit is the most of its guarantee the queue lends while it
	// does not use it (at most the unused guarantee); unset: all of it.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('0')) >= 0",message="must not be negative"
	// +optional
	LendingLimit *resource.Quantity `json:"lendingLimit,omitempty"`
	// weight is the queue's part, against its siblings', of the capacity
	// beyond the guarantees: queues of weight 1 and 2 that both want more
	// get it 1:2. Default 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Weight *int32 `json:"weight,omitempty"`
}

// QueueStatus is what the job queue last counted of a queue.
type QueueStatus struct {
	// gpu summarises nvidia.com/gpu, for kubectl get aischedqueues.
	// +optional
	GPU *QueueResourceStatus `json:"gpu,omitempty"`
	// resources are the counts of every resource the queue or its work
	// uses.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Resources []QueueResourceStatus `json:"resources,omitempty"`
	// admittedGroups counts the queue's (and its descendants') pod groups
	// and single pods that are admitted or running.
	// +kubebuilder:validation:Minimum=0
	// +optional
	AdmittedGroups int32 `json:"admittedGroups,omitempty"`
	// waitingGroups counts those that wait.
	// +kubebuilder:validation:Minimum=0
	// +optional
	WaitingGroups int32 `json:"waitingGroups,omitempty"`
	// borrowsFrom are the queues whose unused guarantees the queue's
	// borrowed GPUs come from, most first, as "team-b: 4", at most 8.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=128
	// +optional
	BorrowsFrom []string `json:"borrowsFrom,omitempty"`
	// usageHistory is the decayed past use that usageHalfLifeSeconds
	// counts, kept here so that a new scheduler leader goes on from it.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +optional
	UsageHistory []QueueUsageHistory `json:"usageHistory,omitempty"`
	// historyTime is when usageHistory was last brought up to date.
	// +optional
	HistoryTime *metav1.Time `json:"historyTime,omitempty"`
	// conditions: Valid (False names what is wrong with the queue, such as
	// a parent that does not exist or a cycle, and its work waits).
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// QueueResourceStatus is a queue's counts of one resource.
type QueueResourceStatus struct {
	// name is the resource.
	// +kubebuilder:validation:MaxLength=96
	Name string `json:"name"`
	// guaranteed is the queue's guarantee.
	// +optional
	Guaranteed resource.Quantity `json:"guaranteed,omitempty"`
	// used is what the queue's admitted and running work holds.
	// +optional
	Used resource.Quantity `json:"used,omitempty"`
	// borrowed is what of used exceeds the guarantee.
	// +optional
	Borrowed resource.Quantity `json:"borrowed,omitempty"`
	// fairShare is what the queue would hold if every queue's waiting and
	// running work were shared out now: its guarantee as far as its work
	// asks for it, and its weight's part of the rest.
	// +optional
	FairShare resource.Quantity `json:"fairShare,omitempty"`
}

// QueueUsageHistory is one resource's decayed past use.
type QueueUsageHistory struct {
	// name is the resource.
	// +kubebuilder:validation:MaxLength=96
	Name string `json:"name"`
	// average is the use averaged over the past, each moment weighted by
	// 2^(-age/usageHalfLifeSeconds).
	Average resource.Quantity `json:"average"`
}

// ConditionQueueValid is the condition a queue's status says whether the
// queue can hold work with.
const ConditionQueueValid = "Valid"

// QueueList is a list of Queues.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type QueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Queue `json:"items"`
}
