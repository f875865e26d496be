// Package podkind sorts pods by what they ask of GPUs (config.PodKind), for
// the score plugins that rank nodes only for the kinds of pods they are
// made for (their podKinds argument): in the aisched profile, CPU pods are
// ranked by node tier, balance and measured load, whole-card pods by
// fragmentation and card fit, shared pods by fragmentation with packing.
package podkind

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/gpu"
)

// Of returns the kind of a pod. A pod with an invalid GPU request is a CPU
// pod here: GPUFit refuses it before anything scores it.
func Of(pod *corev1.Pod) config.PodKind {
	r, err := gpu.ParseRequest(pod)
	switch {
	case err != nil || r.Count == 0:
		return config.PodKindCPU
	case r.Shared():
		return config.PodKindSharedGPU
	}
	return config.PodKindWholeGPU
}

// Set is the kinds a plugin ranks nodes for. Its zero value holds every
// kind, as a plugin without a podKinds argument ranks every pod.
type Set struct{ noCPU, noWhole, noShared bool }

// NewSet returns the set of kinds; none given is every kind.
func NewSet(kinds []config.PodKind) Set {
	if len(kinds) == 0 {
		return Set{}
	}
	s := Set{true, true, true}
	for _, k := range kinds {
		switch k {
		case config.PodKindCPU:
			s.noCPU = false
		case config.PodKindWholeGPU:
			s.noWhole = false
		case config.PodKindSharedGPU:
			s.noShared = false
		}
	}
	return s
}

// All reports whether the set holds every kind.
func (s Set) All() bool { return s == Set{} }

// Has reports whether the set holds kind k.
func (s Set) Has(k config.PodKind) bool {
	switch k {
	case config.PodKindCPU:
		return !s.noCPU
	case config.PodKindWholeGPU:
		return !s.noWhole
	case config.PodKindSharedGPU:
		return !s.noShared
	}
	return false
}

// Ranks reports whether a plugin with the set ranks nodes for pod.
func (s Set) Ranks(pod *corev1.Pod) bool { return s.All() || s.Has(Of(pod)) }
