// Package gpu is aisched's model of NVIDIA GPUs: what a pod asks for
// (count, memory and cores per card, models), what a node has (its cards,
// from a GPUInventory or from GPU Feature Discovery labels), and which cards
// can serve a request. The scheduler plugins, the node agent and the
// simulated nodes share it.
package gpu

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/aisched/aisched/pkg/util/quote"
)

// ResourceName is the extended resource of NVIDIA's device plugin.
const ResourceName corev1.ResourceName = "nvidia.com/gpu"

// Pod annotations that constrain each card a pod gets. The card count is
// always the nvidia.com/gpu resource: it is what the kubelet and the device
// plugin enforce.
const (
	// MemoryAnnotation is the least memory of each card, as a quantity ("32Gi", "40000Mi").
	MemoryAnnotation = "gpu.aisched.io/memory"
	// CoresAnnotation is the least number of CUDA cores of each card.
	CoresAnnotation = "gpu.aisched.io/cores"
	// MilliAnnotation asks for a share of one card, in thousandths of the
	// card ("500" is half a card), instead of whole cards: a pod with it
	// requests no nvidia.com/gpu and shares the card with other such pods.
	// It is the trace's gpu_milli (Alibaba's alibabacloud.com/gpu-milli).
	MilliAnnotation = "gpu.aisched.io/milli"
	// GPUMemAnnotation asks for a share of one card's memory, in whole MiB
	// ("3000"), with or without a share of its compute (MilliAnnotation):
	// like MilliAnnotation, the pod requests no nvidia.com/gpu. A share of
	// memory alone reserves no compute: its pod competes for the card's
	// cores with the others, as HAMi's nvidia.com/gpumem without gpucores.
	GPUMemAnnotation = "gpu.aisched.io/gpumem"
	// CardsAnnotation is the number of cards a share in annotations is
	// taken on, a share of each ("2" with gpu.aisched.io/milli: "300" is
	// 300 thousandths of each of two cards); 1 when absent. KAI's
	// gpu-fraction-num-devices says the same; HAMi's resource form counts
	// the cards in nvidia.com/gpu.
	CardsAnnotation = "gpu.aisched.io/cards"
	// ModelsAnnotation lists the acceptable card models, comma-separated
	// (compared case-insensitively, spaces and dashes alike).
	ModelsAnnotation = "gpu.aisched.io/models"

	// The oks/ annotations are an older form of the same request, read
	// beside aisched's own keys. OKSCountAnnotation is the card count; it
	// must equal the nvidia.com/gpu request.
	OKSCountAnnotation = "oks/gpu-number"
	// OKSMemoryAnnotation is the least memory per card in MB (10^6 bytes).
	OKSMemoryAnnotation = "oks/gpu-memory"
	// OKSCoresAnnotation is the least number of cores per card.
	OKSCoresAnnotation = "oks/gpu-core"

	// AssignedAnnotation is written by the scheduler before binding: the
	// indices of the cards the pod gets ("0,3"), for a device plugin to honour.
	AssignedAnnotation = "gpu.aisched.io/assigned"
	// AssignedUUIDsAnnotation lists the UUIDs of the same cards, when known.
	AssignedUUIDsAnnotation = "gpu.aisched.io/assigned-uuids"
	// AssignedGPUMemAnnotation is written with AssignedAnnotation for a
	// share of memory given in percent: the MiB of each of its cards the
	// share is ("8192"), which the percentage makes of the cards chosen.
	AssignedGPUMemAnnotation = "gpu.aisched.io/assigned-gpumem"
	// LocatedAnnotation is written by the node agent on a running GPU pod
	// that no aisched profile placed: the indices of the cards its
	// containers hold ("0,3"), as the kubelet's PodResources API reports
	// them, so that the scheduler counts those cards as held instead of
	// "some cards" of the node.
	LocatedAnnotation = "gpu.aisched.io/located"
)

// Bounds of the per-card constraints; larger values are certainly mistakes.
const (
	maxMemoryMiB = 1 << 20 // 1 TiB per card
	maxCores     = 1 << 20
	maxCount     = 64
)

// Request is what a pod asks of GPUs.
type Request struct {
	// Count is the number of cards: the nvidia.com/gpu request for whole
	// cards, or for a pod that shares cards (Shared) the number of
	// distinct cards it takes a share of, each the same share.
	Count int64
	// Milli is the share of each card's compute in thousandths (1..999)
	// for a pod that shares cards; 0 for whole cards and for a share of
	// memory alone.
	Milli int64
	// GPUMemMiB is the share of each card's memory, in MiB, a pod that
	// shares cards takes; 0 for whole cards, for a share of compute alone
	// and for a share given in percent (GPUMemPercent).
	GPUMemMiB int64
	// GPUMemPercent is the share of each card's memory in percent
	// (1..100, HAMi's gpumem-percentage), when the pod gives it so: the
	// MiB depend on the card (MemMiBOn).
	GPUMemPercent int64
	// MemoryMiB is the least memory of each card; 0 accepts any.
	MemoryMiB int64
	// Cores is the least number of CUDA cores of each card; 0 accepts any.
	Cores int64
	// Models are the acceptable models, normalized; empty accepts any.
	Models []string
	// ExcludeModels are models the pod refuses, normalized.
	ExcludeModels []string
	// UUIDs are the only cards the pod accepts; empty accepts any.
	UUIDs []string
	// ExcludeUUIDs are cards the pod refuses.
	ExcludeUUIDs []string
	// named are the pod's own words for the per-card constraints, for
	// messages (Shortfall); Equal ignores them. A pointer, so that a
	// Request stays small to copy.
	named *named
}

// named holds, for each per-card constraint of a request, the key and
// value the pod wrote it with ("gpu.aisched.io/memory=\"80Gi\""); empty
// when the pod does not constrain it.
type named struct {
	memory, cores, share, models, excludeModels, uuids, excludeUUIDs string
}

// keyValue is key=value as messages quote what a pod wrote.
func keyValue(key, value string) string { return key + "=" + quote.Value(value) }

// Equal reports whether r and o ask for the same.
func (r Request) Equal(o Request) bool {
	return r.Count == o.Count && r.Milli == o.Milli && r.GPUMemMiB == o.GPUMemMiB && r.GPUMemPercent == o.GPUMemPercent &&
		r.MemoryMiB == o.MemoryMiB && r.Cores == o.Cores &&
		slices.Equal(r.Models, o.Models) && slices.Equal(r.ExcludeModels, o.ExcludeModels) &&
		slices.Equal(r.UUIDs, o.UUIDs) && slices.Equal(r.ExcludeUUIDs, o.ExcludeUUIDs)
}

// Shared reports whether the request is for a share of each of its
// cards rather than whole cards.
func (r Request) Shared() bool { return r.Milli > 0 || r.GPUMemMiB > 0 || r.GPUMemPercent > 0 }

// WholeCards is the number of whole cards the request holds: its
// nvidia.com/gpu request, 0 for shared cards.
func (r Request) WholeCards() int64 {
	if r.Shared() {
		return 0
	}
	return r.Count
}

// TotalMilli is the request in thousandths of a card: the compute share
// of each of its cards times their number for shared cards.
func (r Request) TotalMilli() int64 {
	if r.Shared() {
		return r.Count * r.Milli
	}
	return r.Count * WholeCardMilli
}

// Describe is the request in words, as a pod spec would say it: "2 GPUs",
// "300/1000 and 3000 MiB of each of 2 GPUs", "50% of the memory of a
// GPU"; "" for no GPU. (Not String: the request is a value the scheduler
// compares and signs whole.)
func (r Request) Describe() string {
	switch {
	case r.Count == 0:
		return ""
	case !r.Shared() && r.Count == 1:
		return "1 GPU"
	case !r.Shared():
		return fmt.Sprintf("%d GPUs", r.Count)
	}
	var parts []string
	if r.Milli > 0 {
		parts = append(parts, fmt.Sprintf("%d/1000", r.Milli))
	}
	if r.GPUMemMiB > 0 {
		parts = append(parts, fmt.Sprintf("%d MiB", r.GPUMemMiB))
	}
	if r.GPUMemPercent > 0 {
		parts = append(parts, fmt.Sprintf("%d%% of the memory", r.GPUMemPercent))
	}
	if r.Count == 1 {
		return strings.Join(parts, " and ") + " of a GPU"
	}
	return fmt.Sprintf("%s of each of %d GPUs", strings.Join(parts, " and "), r.Count)
}

// MemMiBOn is the MiB of card c's memory that the share r takes:
// GPUMemMiB, or GPUMemPercent of the card's memory, rounded down and at
// least 1 (a share in percent always holds some memory, so that it never
// reads as no share).
func (r Request) MemMiBOn(c *Card) int64 {
	if r.GPUMemPercent > 0 {
		return max(r.GPUMemPercent*c.MemoryMiB/100, 1)
	}
	return r.GPUMemMiB
}

// BoundMemMiB is the MiB of each of its cards that the share r of a bound
// pod, with annotations a, holds: GPUMemMiB, or for a share given in
// percent the MiB the scheduler recorded in AssignedGPUMemAnnotation when
// it chose the cards. ok is false when that record is absent or not a
// number of MiB.
func (r Request) BoundMemMiB(a map[string]string) (mib int64, ok bool) {
	if r.GPUMemPercent == 0 {
		return r.GPUMemMiB, true
	}
	n, err := strconv.ParseInt(a[AssignedGPUMemAnnotation], 10, 64)
	if err != nil || n < 1 || n > maxMemoryMiB {
		return 0, false
	}
	return n, true
}

// WholeCardMilli is a whole card in thousandths.
const WholeCardMilli = 1000

// RequestError is an invalid GPU request; it names the annotation (or
// resource) and the value at fault.
type RequestError struct {
	Key    string
	Value  string
	Reason string
}

func (e *RequestError) Error() string {
	return fmt.Sprintf("invalid GPU request: %s=%s: %s", e.Key, quote.Value(e.Value), e.Reason)
}

// RequestedCards is the pod's nvidia.com/gpu request: the whole cards the
// kubelet counts for it, whatever the annotations say.
func RequestedCards(pod *corev1.Pod) int64 {
	q := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[ResourceName]
	return q.Value()
}

// RequestedCardsOf is the whole cards the pods request, together.
func RequestedCardsOf(pods []*corev1.Pod) int64 {
	var n int64
	for _, p := range pods {
		n += RequestedCards(p)
	}
	return n
}

// NormalizeModel makes model names comparable: lower case, and every run
// of characters other than letters and digits one dash ("NVIDIA A100-SXM4"
// and "nvidia-a100-sxm4" are the same).
func NormalizeModel(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(strings.TrimSpace(s)) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
			continue
		}
		dash = true
	}
	return b.String()
}
