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

// Requests tells what a pod asks of GPUs: the GPU ledger's
// gpuledger.State.RequestOf, which reads a DRA pod's claims, so that a pod
// asking for GPUs through claims is a GPU pod like one asking through
// nvidia.com/gpu.
type Requests interface {
	RequestOf(pod *corev1.Pod) (gpu.Request, error)
}

// Of returns the kind of a pod that asks r of GPUs (err: its request could
// not be read). A pod with an invalid GPU request is a CPU pod here: GPUFit
// refuses it before anything scores it.
func Of(r gpu.Request, err error) config.PodKind {
	switch {
	case err != nil || r.Count == 0:
		return config.PodKindCPU
	case r.Shared():
		return config.PodKindSharedGPU
	}
	return config.PodKindWholeGPU
}

// Set is the kinds a plugin ranks nodes for, and how it tells a pod's
// kind. Its zero value holds every kind, as a plugin without a podKinds
// argument ranks every pod, and reads pods without their claims.
type Set struct {
	noCPU, noWhole, noShared bool
	requests                 Requests
}

// NewSet returns the set of kinds (none given is every kind) that tells a
// pod's kind from requests (nil: from the pod alone, without its claims).
func NewSet(kinds []config.PodKind, requests Requests) Set {
	s := Set{requests: requests}
	if len(kinds) == 0 {
		return s
	}
	s.noCPU, s.noWhole, s.noShared = true, true, true
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
func (s Set) All() bool { return !s.noCPU && !s.noWhole && !s.noShared }

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

// Of returns the kind of pod.
func (s Set) Of(pod *corev1.Pod) config.PodKind {
	if s.requests == nil {
		return Of(gpu.ParseRequest(pod))
	}
	return Of(s.requests.RequestOf(pod))
}
