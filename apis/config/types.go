package config

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PCCBalanceMode selects the PCCBalance formula.
type PCCBalanceMode string

const (
	// PCCBalanceAbs penalises correlation of either sign: score = (1 - |rho|) * 100.
	PCCBalanceAbs PCCBalanceMode = "abs"
	// PCCBalanceSigned rewards negative correlation: score = (1 - rho) / 2 * 100.
	PCCBalanceSigned PCCBalanceMode = "signed"
)

// PodKind is a kind of pod by what it asks of GPUs. A score plugin ranks
// nodes only for the pod kinds of its podKinds argument (every kind when
// it is empty), so that in one profile each kind of pod is ranked by the
// plugins made for it: upstream adds the weighted scores of every plugin
// for every pod.
type PodKind string

const (
	// PodKindCPU is a pod without GPUs.
	PodKindCPU PodKind = "CPU"
	// PodKindWholeGPU is a pod of whole cards (nvidia.com/gpu).
	PodKindWholeGPU PodKind = "WholeGPU"
	// PodKindSharedGPU is a pod with a share of one card
	// (gpu.aisched.io/milli, gpu.aisched.io/gpumem).
	PodKindSharedGPU PodKind = "SharedGPU"
)

// PodKinds are the pod kinds.
var PodKinds = []PodKind{PodKindCPU, PodKindWholeGPU, PodKindSharedGPU}

// CPUPodsOnGPUNodes says when a balancing plugin (PCCBalance, LoadAware)
// ranks GPU nodes for CPU pods.
type CPUPodsOnGPUNodes string

const (
	// CPUPodsOnGPUNodesAlways ranks them like any node.
	CPUPodsOnGPUNodesAlways CPUPodsOnGPUNodes = "Always"
	// CPUPodsOnGPUNodesWithoutGPUWork ranks them only while none of the
	// pods that arrived last asked for GPUs; otherwise every GPU node
	// scores the same for a CPU pod, so that the plugins that keep GPUs
	// usable (FGD, BestFit) place it there instead of spreading it.
	CPUPodsOnGPUNodesWithoutGPUWork CPUPodsOnGPUNodes = "WithoutGPUWork"
)

// PCCBalanceArgs are the arguments of the PCCBalance plugin.
type PCCBalanceArgs struct {
	// apiVersion and kind may be given; they are not checked.
	metav1.TypeMeta `json:",inline"`

	// cpuPodsOnGPUNodes: Always (default) or WithoutGPUWork.
	CPUPodsOnGPUNodes CPUPodsOnGPUNodes `json:"cpuPodsOnGPUNodes,omitempty"`

	// podKinds are the kinds of pods the plugin ranks nodes for; default
	// all.
	PodKinds []PodKind `json:"podKinds,omitempty"`

	// mode is abs or signed; default signed.
	Mode PCCBalanceMode `json:"mode,omitempty"`
	// resources are the dimensions of the request and utilisation vectors;
	// default cpu, memory, nvidia.com/gpu. At least two.
	Resources []string `json:"resources,omitempty"`
}

// HeteroPriorityArgs are the arguments of the HeteroPriority plugin.
type HeteroPriorityArgs struct {
	// apiVersion and kind may be given; they are not checked.
	metav1.TypeMeta `json:",inline"`

	// cardWeights weigh the terms of S_card, the quality of the cards a GPU
	// pod would get; default 1 each (equal weights).
	CardWeights *CardWeights `json:"cardWeights,omitempty"`
	// cpuPodScore is how CPU pods are ranked: LeastRequested (default:
	// CPU nodes above GPU nodes, least requested
	// first within each), or Tier (CPU nodes 100, GPU nodes 0, so that
	// the other plugins rank the nodes within a tier).
	CPUPodScore CPUPodScore `json:"cpuPodScore,omitempty"`
	// podKinds are the kinds of pods the plugin ranks nodes for; default
	// all.
	PodKinds []PodKind `json:"podKinds,omitempty"`
}

// CPUPodScore selects how HeteroPriority ranks nodes for CPU pods.
type CPUPodScore string

const (
	// CPUPodScoreLeastRequested ranks CPU nodes above GPU nodes, least
	// requested first within each.
	CPUPodScoreLeastRequested CPUPodScore = "LeastRequested"
	// CPUPodScoreTier ranks only the node type.
	CPUPodScoreTier CPUPodScore = "Tier"
)

// CardWeights are relative weights, 0 to 100 each; all zero leaves S_card
// out, so that GPU nodes rank by fit alone.
type CardWeights struct {
	// computeCapability weighs the compute capability (8.0 > 7.5).
	ComputeCapability int64 `json:"computeCapability"`
	// memoryBandwidth weighs the memory bandwidth.
	MemoryBandwidth int64 `json:"memoryBandwidth"`
	// maxClock weighs the maximum SM clock.
	MaxClock int64 `json:"maxClock"`
}

// GPUFitArgs are the arguments of the GPUFit plugin: none. What GPUFit
// reads the cards from is the GPU ledger's, configured in the shared
// configuration (SharedConfiguration.GPUs).
type GPUFitArgs struct {
	// apiVersion and kind may be given; they are not checked.
	metav1.TypeMeta `json:",inline"`
}

// GPUClaimsArgs are the arguments of the GPUClaims plugin: those of
// upstream's DynamicResources, which it runs (docs/dra.md). Which driver's
// devices are GPUs is the GPU ledger's, configured in the shared
// configuration (SharedConfiguration.GPUs.DRADriver).
type GPUClaimsArgs struct {
	// apiVersion and kind may be given; they are not checked.
	metav1.TypeMeta `json:",inline"`
	// filterTimeoutSeconds bounds the allocator's work for one node in
	// Filter (DynamicResources' filterTimeout); 0 for no bound. Default
	// 10, 0 to 600.
	FilterTimeoutSeconds *int64 `json:"filterTimeoutSeconds,omitempty"`
	// bindingTimeoutSeconds is how long PreBind waits for devices with
	// binding conditions (DynamicResources' bindingTimeout). Default 600,
	// 1 to 86400.
	BindingTimeoutSeconds *int64 `json:"bindingTimeoutSeconds,omitempty"`
	// emptyNodesToTry: on a profile with percentageOfNodesToScore 0, a
	// pod whose claims ask for whole GPUs is tried on the nodes in use for
	// GPU work that have room and on this many empty ones (in turn), when
	// that at least halves the nodes kube-scheduler would try; if none of
	// them fits, on every node. 0 tries every pod as kube-scheduler would.
	// Default 100, 0 to 100000.
	EmptyNodesToTry *int64 `json:"emptyNodesToTry,omitempty"`
}

// CoschedulingArgs are the arguments of the Coscheduling plugin.
type CoschedulingArgs struct {
	// apiVersion and kind may be given; they are not checked.
	metav1.TypeMeta `json:",inline"`

	// permitWaitingTimeSeconds is how long assumed members of a group wait
	// in Permit for the rest; default 60, 1 to 3600. (The job queue's
	// settings are the shared configuration's, SharedConfiguration.JobQueue.)
	PermitWaitingTimeSeconds *int64 `json:"permitWaitingTimeSeconds,omitempty"`
}

// LoadAwareArgs are the arguments of the LoadAware plugin.
type LoadAwareArgs struct {
	// apiVersion and kind may be given; they are not checked.
	metav1.TypeMeta `json:",inline"`

	// weights weigh the load terms L = (wc*Lc + wm*Lm + wn*Ln + wd*Ld) /
	// (wc + wm + wn + wd); default 1 each (equal weights).
	Weights *LoadWeights `json:"weights,omitempty"`
	// metricsTTLSeconds: a node whose last sample is older is scored from
	// its pods' requests instead; default 60, 1 to 3600.
	MetricsTTLSeconds *int64 `json:"metricsTTLSeconds,omitempty"`
	// podKinds are the kinds of pods the plugin ranks nodes for; default
	// all. (Its thresholds filter every pod.)
	PodKinds []PodKind `json:"podKinds,omitempty"`
	// cpuPodsOnGPUNodes: Always (default) or WithoutGPUWork.
	CPUPodsOnGPUNodes CPUPodsOnGPUNodes `json:"cpuPodsOnGPUNodes,omitempty"`
	// thresholds, in percent, make LoadAware a filter too: a node whose
	// measured load of a resource (plus what pods bound since the sample
	// add) is above its threshold takes no more pods. Absent or 0: no
	// threshold. Nodes without a fresh sample are never filtered.
	Thresholds *LoadThresholds `json:"thresholds,omitempty"`
}

// LoadWeights are relative weights, 0 to 100 each, not all zero.
type LoadWeights struct {
	// cpu weighs the CPU load.
	CPU int64 `json:"cpu"`
	// memory weighs the memory load.
	Memory int64 `json:"memory"`
	// network weighs the network load.
	Network int64 `json:"network"`
	// disk weighs the disk IO load.
	Disk int64 `json:"disk"`
}

// LoadThresholds are percent, 0 (none) to 100.
type LoadThresholds struct {
	// cpu is the highest CPU load that still takes pods.
	CPU int64 `json:"cpu,omitempty"`
	// memory is the highest memory load that still takes pods.
	Memory int64 `json:"memory,omitempty"`
	// network is the highest network load that still takes pods.
	Network int64 `json:"network,omitempty"`
	// disk is the highest disk load that still takes pods.
	Disk int64 `json:"disk,omitempty"`
}

// FGDBaselineArgs are the arguments of the BestFit and DotProd plugins:
// the per-node maxima that normalise each dimension, fixed numbers in the
// FGD paper's simulator (the largest node of the Alibaba trace) rather
// than measured from the cluster.
type FGDBaselineArgs struct {
	// MaxMilliCPU normalises CPU, in thousandths of a core; default 128000.
	MaxMilliCPU int64 `json:"maxMilliCPU,omitempty"`
	// MaxGPUs normalises GPU, in cards; default 8.
	MaxGPUs int64 `json:"maxGPUs,omitempty"`
	// PodKinds are the kinds of pods the plugin ranks nodes for; default
	// all.
	PodKinds []PodKind `json:"podKinds,omitempty"`
}

// FGDArgs are the arguments of the FGD plugin.
type FGDArgs struct {
	// Window is how many of the most recent pods (by first scheduling
	// attempt) the typical pod shapes are learnt from; default 5000.
	Window int32 `json:"window,omitempty"`
	// CoveragePercent keeps the most frequent shapes until they cover this
	// share of the window's pods, as the FGD paper does; default 95.
	CoveragePercent int32 `json:"coveragePercent,omitempty"`
	// Resolution is how the fragmentation change becomes a score: Paper
	// (default), 100*sigmoid(change/1000) truncated as the paper does, or
	// Exact, the rank of the change among the cycle's nodes, so that the
	// node with the least growth wins outright instead of tying with every
	// node within a few thousandths of a card.
	Resolution FGDResolution `json:"resolution,omitempty"`
	// PodKinds are the kinds of pods the plugin ranks nodes for; default
	// all. (It learns the shapes of every pod it sees.)
	PodKinds []PodKind `json:"podKinds,omitempty"`
	// TypicalPods, when given, is the workload's mix of pod shapes, used
	// instead of learning it from the pods seen (Window is then unused);
	// CoveragePercent still keeps the most frequent of them. A cluster
	// whose workload is known (from its history, or a trace replayed as
	// the FGD paper does) can give it here.
	TypicalPods []FGDTypicalPod `json:"typicalPods,omitempty"`
}

// FGDTypicalPod is one pod shape of the workload and its weight.
type FGDTypicalPod struct {
	// MilliCPU is the shape's CPU request in thousandths of a core.
	MilliCPU int64 `json:"milliCPU,omitempty"`
	// GPUMilli is what the shape takes of each card, in thousandths: 1 to
	// 999 for a share of one card (gpu.aisched.io/milli), 1000 for whole
	// cards, 0 for a CPU-only pod.
	GPUMilli int64 `json:"gpuMilli,omitempty"`
	// GPUMemMiB is a share of one card's memory in MiB
	// (gpu.aisched.io/gpumem), with or without GPUMilli below 1000.
	GPUMemMiB int64 `json:"gpuMemMiB,omitempty"`
	// GPUCount is the number of whole cards (GPUMilli 1000); 1 for a share
	// (the default), 0 for a CPU-only pod.
	GPUCount int64 `json:"gpuCount,omitempty"`
	// Models are the acceptable card models (gpu.aisched.io/models); empty
	// accepts any.
	Models []string `json:"models,omitempty"`
	// Weight is how often the shape occurs, relative to the others (a pod
	// count, say); at least 1.
	Weight int64 `json:"weight"`
}

// FGDResolution selects how FGD turns a fragmentation change into a score.
type FGDResolution string

const (
	// FGDPaper is the FGD paper's score, 100*sigmoid(change/1000).
	FGDPaper FGDResolution = "Paper"
	// FGDExact ranks the nodes by the change.
	FGDExact FGDResolution = "Exact"
)
