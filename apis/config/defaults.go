package config

import "k8s.io/utils/ptr"

// DefaultPCCResources are the dimensions of PCCBalance by default.
var DefaultPCCResources = []string{"cpu", "memory", "nvidia.com/gpu"}

// Default implements Args.
func (a *PCCBalanceArgs) Default() {
	if a.Mode == "" {
		a.Mode = PCCBalanceSigned
	}
	if len(a.Resources) == 0 {
		a.Resources = append([]string(nil), DefaultPCCResources...)
	}
	if a.CPUPodsOnGPUNodes == "" {
		a.CPUPodsOnGPUNodes = CPUPodsOnGPUNodesAlways
	}
}

// Default implements Args.
func (a *HeteroPriorityArgs) Default() {
	if a.CardWeights == nil {
		a.CardWeights = &CardWeights{ComputeCapability: 1, MemoryBandwidth: 1, MaxClock: 1}
	}
	if a.CPUPodScore == "" {
		a.CPUPodScore = CPUPodScoreLeastRequested
	}
}

// Default implements Args.
func (a *GPUFitArgs) Default() {}

// Default implements Args: upstream's DynamicResources defaults.
func (a *GPUClaimsArgs) Default() {
	if a.FilterTimeoutSeconds == nil {
		a.FilterTimeoutSeconds = ptr.To[int64](10)
	}
	if a.BindingTimeoutSeconds == nil {
		a.BindingTimeoutSeconds = ptr.To[int64](600)
	}
	if a.EmptyNodesToTry == nil {
		a.EmptyNodesToTry = ptr.To[int64](100)
	}
}

// Default implements Args.
func (a *CoschedulingArgs) Default() {
	if a.PermitWaitingTimeSeconds == nil {
		a.PermitWaitingTimeSeconds = ptr.To[int64](60)
	}
}

// Default implements Args.
func (a *LoadAwareArgs) Default() {
	if a.Weights == nil {
		a.Weights = &LoadWeights{CPU: 1, Memory: 1, Network: 1, Disk: 1}
	}
	if a.MetricsTTLSeconds == nil {
		a.MetricsTTLSeconds = ptr.To[int64](60)
	}
	if a.Thresholds == nil {
		a.Thresholds = &LoadThresholds{}
	}
	if a.CPUPodsOnGPUNodes == "" {
		a.CPUPodsOnGPUNodes = CPUPodsOnGPUNodesAlways
	}
}

// Default implements Args.
func (a *FGDBaselineArgs) Default() {
	if a.MaxMilliCPU == 0 {
		a.MaxMilliCPU = 128000
	}
	if a.MaxGPUs == 0 {
		a.MaxGPUs = 8
	}
}

// Default implements Args.
func (a *FGDArgs) Default() {
	if a.Window == 0 {
		a.Window = 5000
	}
	if a.CoveragePercent == 0 {
		a.CoveragePercent = 95
	}
	if a.Resolution == "" {
		a.Resolution = FGDPaper
	}
	for i := range a.TypicalPods {
		if t := &a.TypicalPods[i]; t.isShare() && t.GPUCount == 0 {
			t.GPUCount = 1
		}
	}
}
