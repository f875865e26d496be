package config

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate implements Args.
func (a *PCCBalanceArgs) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if a.Mode != PCCBalanceAbs && a.Mode != PCCBalanceSigned {
		errs = append(errs, field.NotSupported(path.Child("mode"), a.Mode, []PCCBalanceMode{PCCBalanceAbs, PCCBalanceSigned}))
	}
	if len(a.Resources) < 2 {
		errs = append(errs, field.Invalid(path.Child("resources"), a.Resources, "a correlation needs at least two resources"))
	}
	errs = append(errs, validatePodKinds(path.Child("podKinds"), a.PodKinds)...)
	errs = append(errs, validateCPUPodsOnGPUNodes(path.Child("cpuPodsOnGPUNodes"), a.CPUPodsOnGPUNodes)...)
	seen := sets.New[string]()
	for i, r := range a.Resources {
		p := path.Child("resources").Index(i)
		if seen.Has(r) {
			errs = append(errs, field.Duplicate(p, r))
		}
		seen.Insert(r)
		for _, msg := range validation.IsQualifiedName(r) {
			errs = append(errs, field.Invalid(p, r, msg))
		}
	}
	return errs
}

// Validate implements Args.
func (a *HeteroPriorityArgs) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	w := a.CardWeights
	p := path.Child("cardWeights")
	for _, f := range []struct {
		name  string
		value int64
	}{{"computeCapability", w.ComputeCapability}, {"memoryBandwidth", w.MemoryBandwidth}, {"maxClock", w.MaxClock}} {
		if f.value < 0 || f.value > 100 {
			errs = append(errs, field.Invalid(p.Child(f.name), f.value, "must be between 0 and 100"))
		}
	}
	if a.CPUPodScore != CPUPodScoreLeastRequested && a.CPUPodScore != CPUPodScoreTier {
		errs = append(errs, field.NotSupported(path.Child("cpuPodScore"), a.CPUPodScore, []CPUPodScore{CPUPodScoreLeastRequested, CPUPodScoreTier}))
	}
	return append(errs, validatePodKinds(path.Child("podKinds"), a.PodKinds)...)
}

func validateCPUPodsOnGPUNodes(path *field.Path, v CPUPodsOnGPUNodes) field.ErrorList {
	if v != CPUPodsOnGPUNodesAlways && v != CPUPodsOnGPUNodesWithoutGPUWork {
		return field.ErrorList{field.NotSupported(path, v, []CPUPodsOnGPUNodes{CPUPodsOnGPUNodesAlways, CPUPodsOnGPUNodesWithoutGPUWork})}
	}
	return nil
}

// validatePodKinds checks a podKinds argument: known kinds, each once.
func validatePodKinds(path *field.Path, kinds []PodKind) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[PodKind]()
	for i, k := range kinds {
		switch {
		case !slices.Contains(PodKinds, k):
			errs = append(errs, field.NotSupported(path.Index(i), k, PodKinds))
		case seen.Has(k):
			errs = append(errs, field.Duplicate(path.Index(i), k))
		}
		seen.Insert(k)
	}
	return errs
}

// Validate implements Args.
func (a *GPUFitArgs) Validate(*field.Path) field.ErrorList { return nil }

// Validate implements Args.
func (a *GPUClaimsArgs) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v := *a.FilterTimeoutSeconds; v < 0 || v > 600 {
		errs = append(errs, field.Invalid(path.Child("filterTimeoutSeconds"), v, "must be between 0 and 600"))
	}
	if v := *a.BindingTimeoutSeconds; v < 1 || v > 86400 {
		errs = append(errs, field.Invalid(path.Child("bindingTimeoutSeconds"), v, "must be between 1 and 86400"))
	}
	if v := *a.EmptyNodesToTry; v < 0 || v > 100000 {
		errs = append(errs, field.Invalid(path.Child("emptyNodesToTry"), v, "must be between 0 and 100000"))
	}
	return errs
}

// Validate implements Args.
func (a *CoschedulingArgs) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v := *a.PermitWaitingTimeSeconds; v < 1 || v > 3600 {
		errs = append(errs, field.Invalid(path.Child("permitWaitingTimeSeconds"), v, "must be between 1 and 3600"))
	}
	return errs
}

// Validate implements Args.
func (a *LoadAwareArgs) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	w, th := a.Weights, a.Thresholds
	sum := int64(0)
	for _, f := range []struct {
		name              string
		weight, threshold int64
	}{{"cpu", w.CPU, th.CPU}, {"memory", w.Memory, th.Memory}, {"network", w.Network, th.Network}, {"disk", w.Disk, th.Disk}} {
		if f.weight < 0 || f.weight > 100 {
			errs = append(errs, field.Invalid(path.Child("weights", f.name), f.weight, "must be between 0 and 100"))
		}
		if f.threshold < 0 || f.threshold > 100 {
			errs = append(errs, field.Invalid(path.Child("thresholds", f.name), f.threshold, "must be a percent between 0 (none) and 100"))
		}
		sum += f.weight
	}
	if sum == 0 {
		errs = append(errs, field.Invalid(path.Child("weights"), "all zero", "at least one weight must be positive"))
	}
	errs = append(errs, validatePodKinds(path.Child("podKinds"), a.PodKinds)...)
	errs = append(errs, validateCPUPodsOnGPUNodes(path.Child("cpuPodsOnGPUNodes"), a.CPUPodsOnGPUNodes)...)
	if v := *a.MetricsTTLSeconds; v < 1 || v > 3600 {
		errs = append(errs, field.Invalid(path.Child("metricsTTLSeconds"), v, "must be between 1 and 3600"))
	}
	return errs
}

// Validate implements Args.
func (a *FGDBaselineArgs) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if a.MaxMilliCPU < 0 {
		errs = append(errs, field.Invalid(path.Child("maxMilliCPU"), a.MaxMilliCPU, "must be positive (0 is the default, 128000)"))
	}
	if a.MaxGPUs < 0 {
		errs = append(errs, field.Invalid(path.Child("maxGPUs"), a.MaxGPUs, "must be positive (0 is the default, 8)"))
	}
	return append(errs, validatePodKinds(path.Child("podKinds"), a.PodKinds)...)
}

// Validate implements Args.
func (a *FGDArgs) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if a.Window < 1 || a.Window > 1_000_000 {
		errs = append(errs, field.Invalid(path.Child("window"), a.Window, "must be between 1 and 1000000 pods"))
	}
	if a.CoveragePercent < 1 || a.CoveragePercent > 100 {
		errs = append(errs, field.Invalid(path.Child("coveragePercent"), a.CoveragePercent, "must be a percent between 1 and 100"))
	}
	if a.Resolution != FGDPaper && a.Resolution != FGDExact {
		errs = append(errs, field.NotSupported(path.Child("resolution"), a.Resolution, []FGDResolution{FGDPaper, FGDExact}))
	}
	for i, t := range a.TypicalPods {
		errs = append(errs, t.validate(path.Child("typicalPods").Index(i))...)
	}
	return append(errs, validatePodKinds(path.Child("podKinds"), a.PodKinds)...)
}

// maxTypicalGPUMemMiB bounds a typical shape's memory share as the
// gpu.aisched.io/gpumem annotation is bounded: 1 TiB.
const maxTypicalGPUMemMiB = 1 << 20

// isShare: the shape takes part of one card, its compute, its memory or both.
func (t *FGDTypicalPod) isShare() bool {
	return t.GPUMilli > 0 && t.GPUMilli < 1000 || t.GPUMilli == 0 && t.GPUMemMiB > 0
}

// isCPUOnly: the shape takes no GPU.
func (t *FGDTypicalPod) isCPUOnly() bool { return t.GPUMilli == 0 && t.GPUMemMiB == 0 }

func (t *FGDTypicalPod) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.MilliCPU < 0 {
		errs = append(errs, field.Invalid(path.Child("milliCPU"), t.MilliCPU, "must not be negative"))
	}
	switch {
	case t.GPUMilli < 0 || t.GPUMilli > 1000:
		errs = append(errs, field.Invalid(path.Child("gpuMilli"), t.GPUMilli, "must be thousandths of a card: 0 (no GPU, or a share of memory alone), 1 to 999 (a share) or 1000 (whole cards)"))
	case t.GPUMemMiB < 0 || t.GPUMemMiB > maxTypicalGPUMemMiB:
		errs = append(errs, field.Invalid(path.Child("gpuMemMiB"), t.GPUMemMiB, fmt.Sprintf("must be MiB of one card's memory, 1 to %d, or 0 for none", maxTypicalGPUMemMiB)))
	case t.GPUMemMiB > 0 && t.GPUMilli == 1000:
		errs = append(errs, field.Invalid(path.Child("gpuMemMiB"), t.GPUMemMiB, "a share of memory is of one card, with gpuMilli below 1000; whole cards have all their memory"))
	case t.isCPUOnly() && t.GPUCount != 0:
		errs = append(errs, field.Invalid(path.Child("gpuCount"), t.GPUCount, "a CPU-only shape (gpuMilli and gpuMemMiB 0) has no cards"))
	case t.isShare() && t.GPUCount != 1:
		errs = append(errs, field.Invalid(path.Child("gpuCount"), t.GPUCount, "a share (gpuMilli below 1000, or gpuMemMiB) is of one card"))
	case t.GPUMilli == 1000 && (t.GPUCount < 1 || t.GPUCount > 64):
		errs = append(errs, field.Invalid(path.Child("gpuCount"), t.GPUCount, "whole cards (gpuMilli 1000) need 1 to 64 cards"))
	}
	if t.isCPUOnly() && len(t.Models) > 0 {
		errs = append(errs, field.Invalid(path.Child("models"), t.Models, "a CPU-only shape has no card models"))
	}
	for j, m := range t.Models {
		if strings.TrimSpace(m) == "" {
			errs = append(errs, field.Invalid(path.Child("models").Index(j), m, "must not be empty"))
		}
	}
	if t.Weight < 1 {
		errs = append(errs, field.Invalid(path.Child("weight"), t.Weight, "must be at least 1"))
	}
	return errs
}
