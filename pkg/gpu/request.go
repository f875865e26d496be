// Package gpu is aisched's model of NVIDIA GPUs: what a pod asks for
// (count, memory and cores per card, models), what a node has (its cards,
// from a GPUInventory or from GPU Feature Discovery labels), and which cards
// can serve a request. The scheduler plugins, the node agent and the
// simulated nodes share it.
package gpu

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
	// HAMiGPUMemAnnotation and HAMiGPUCoresAnnotation are HAMi's names,
	// accepted as pod annotations: nvidia.com/gpumem is GPUMemAnnotation,
	// nvidia.com/gpucores (percent of the card's cores) is MilliAnnotation
	// times ten, nvidia.com/gpumem-percentage is a share of each card's
	// memory in percent (GPUMemPercent).
	HAMiGPUMemAnnotation        = "nvidia.com/gpumem"
	HAMiGPUCoresAnnotation      = "nvidia.com/gpucores"
	HAMiGPUMemPercentAnnotation = "nvidia.com/gpumem-percentage"
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

// ParseRequest reads the GPU request of a pod, in aisched's form or a
// peer's (peers.go). Pods without nvidia.com/gpu and without GPU
// annotations get a zero Request; every inconsistency, and every form
// aisched cannot honour, is a *RequestError.
func ParseRequest(pod *corev1.Pod) (Request, error) {
	var r Request
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	q := requests[ResourceName]
	r.Count = q.Value()
	a := pod.Annotations
	if r.Count > maxCount {
		return Request{}, &RequestError{Key: string(ResourceName), Value: q.String(), Reason: fmt.Sprintf("at most %d cards per pod", maxCount)}
	}
	if err := refuseForeign(a, requests); err != nil {
		return Request{}, err
	}

	if v, ok := a[OKSCountAnnotation]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch {
		case err != nil || n < 1:
			return Request{}, &RequestError{Key: OKSCountAnnotation, Value: v, Reason: "want a whole number of cards, at least 1"}
		case r.Count == 0:
			return Request{}, &RequestError{Key: OKSCountAnnotation, Value: v, Reason: "the pod requests no nvidia.com/gpu; set resources.limits[nvidia.com/gpu] to the same count"}
		case n != r.Count:
			return Request{}, &RequestError{Key: OKSCountAnnotation, Value: v, Reason: fmt.Sprintf("disagrees with the nvidia.com/gpu request of %d", r.Count)}
		}
	}

	shareWords, err := r.readShare(a, requests)
	if err != nil {
		return Request{}, err
	}

	mem, memKey, err := memoryMiB(a)
	if err != nil {
		return Request{}, err
	}
	cores, coresKey, err := cores(a)
	if err != nil {
		return Request{}, err
	}
	r.MemoryMiB, r.Cores = mem, cores
	words := named{share: shareWords}
	if memKey != "" {
		words.memory = keyValue(memKey, a[memKey])
	}
	if coresKey != "" {
		words.cores = keyValue(coresKey, a[coresKey])
	}
	lists := []struct {
		key   string
		read  func(key, v string) ([]string, error)
		to    *[]string
		words *string
	}{
		{ModelsAnnotation, modelList, &r.Models, &words.models},
		{HAMiUseTypeAnnotation, modelList, &r.Models, &words.models},
		{HAMiNoUseTypeAnnotation, modelList, &r.ExcludeModels, &words.excludeModels},
		{HAMiUseUUIDAnnotation, uuidList, &r.UUIDs, &words.uuids},
		{HAMiNoUseUUIDAnnotation, uuidList, &r.ExcludeUUIDs, &words.excludeUUIDs},
	}
	perCard := []string{memKey, coresKey}
	for _, l := range lists {
		v, ok := a[l.key]
		if !ok {
			continue
		}
		if len(*l.to) > 0 {
			return Request{}, &RequestError{Key: l.key, Value: v, Reason: "the pod names its cards with another key too; keep one"}
		}
		if *l.to, err = l.read(l.key, v); err != nil {
			return Request{}, err
		}
		*l.words = keyValue(l.key, v)
		perCard = append(perCard, l.key)
	}
	if r.Count == 0 {
		for _, key := range perCard {
			if key != "" {
				return Request{}, &RequestError{Key: key, Value: a[key], Reason: "the pod requests no nvidia.com/gpu; per-card constraints need a card count in resources.limits[nvidia.com/gpu] or a share in " + MilliAnnotation}
			}
		}
	}
	if words != (named{}) {
		r.named = &words
	}
	return r, nil
}

// readShare reads a share of each of the pod's cards from every form
// that can name one (aisched's and HAMi's annotations, HAMi's resources,
// KAI's annotations), which must agree. A share in annotations comes
// without nvidia.com/gpu, its cards counted by CardsAnnotation (or KAI's
// gpu-fraction-num-devices), one by default; a share in HAMi's resources
// comes with nvidia.com/gpu, its number of cards.
func (r *Request) readShare(a map[string]string, requests corev1.ResourceList) (memoryWords string, err error) {
	var compute, memory, percent []shareValue
	inLimits := false // a share named in HAMi's resources
	annotationInt := func(key string, lo, hi int64, reason string, scale int64, to *[]shareValue) error {
		v, ok := a[key]
		if !ok {
			return nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < lo || n > hi {
			return &RequestError{Key: key, Value: v, Reason: reason}
		}
		*to = append(*to, shareValue{key: key, raw: v, n: n * scale})
		return nil
	}
	limitInt := func(name corev1.ResourceName, lo, hi int64, reason string, scale int64, to *[]shareValue) error {
		q, ok := requests[name]
		if !ok {
			return nil
		}
		inLimits = true
		// Compare before Value(), which is 0 for a quantity beyond int64.
		if q.CmpInt64(hi) > 0 || q.CmpInt64(lo) < 0 || q.MilliValue()%1000 != 0 {
			return &RequestError{Key: limitKey(name), Value: q.String(), Reason: reason}
		}
		*to = append(*to, shareValue{key: limitKey(name), raw: q.String(), n: q.Value() * scale})
		return nil
	}
	memReason := fmt.Sprintf("want a whole number of MiB of each card's memory, 1 to %d", maxMemoryMiB)
	percentReason := "want a whole percent of each card's memory, 1 to 100"
	for _, err := range []error{
		annotationInt(MilliAnnotation, 1, WholeCardMilli, "want thousandths of one card, 1 to 999", 1, &compute),
		annotationInt(HAMiGPUCoresAnnotation, 1, 100, "want a percent of one card's cores, 1 to 99", 10, &compute),
		limitInt(HAMiGPUCoresResource, 1, 100, "want a percent of one card's cores, 1 to 100", 10, &compute),
		annotationInt(GPUMemAnnotation, 1, maxMemoryMiB, memReason, 1, &memory),
		annotationInt(HAMiGPUMemAnnotation, 1, maxMemoryMiB, memReason, 1, &memory),
		limitInt(HAMiGPUMemResource, 1, maxMemoryMiB, memReason, 1, &memory),
		annotationInt(KAIMemoryAnnotation, 1, maxMemoryMiB, memReason, 1, &memory),
		annotationInt(HAMiGPUMemPercentAnnotation, 1, 100, percentReason, 1, &percent),
		limitInt(HAMiGPUMemPercentResource, 1, 100, percentReason, 1, &percent),
	} {
		if err != nil {
			return "", err
		}
	}
	if v, ok := a[KAIFractionAnnotation]; ok {
		m, err := kaiFraction(v)
		if err != nil {
			return "", err
		}
		compute = append(compute, shareValue{key: KAIFractionAnnotation, raw: v, n: m})
	}
	milli, err := agreed(compute)
	if err != nil {
		return "", err
	}
	mib, err := agreed(memory)
	if err != nil {
		return "", err
	}
	pct, err := agreed(percent)
	if err != nil {
		return "", err
	}
	cards, err := shareCards(a)
	if err != nil {
		return "", err
	}
	all := slices.Concat(compute, memory, percent)
	if len(all) == 0 {
		if len(cards) > 0 {
			return "", &RequestError{Key: cards[0].key, Value: cards[0].raw, Reason: "counts the cards of a share, and the pod names none: add " + MilliAnnotation + " or " + GPUMemAnnotation + ", or request whole cards in nvidia.com/gpu"}
		}
		return "", nil
	}
	first := all[0]
	switch {
	case len(memory) > 0 && len(percent) > 0:
		return "", &RequestError{Key: percent[0].key, Value: percent[0].raw, Reason: fmt.Sprintf("the share of memory is given in MiB too (%s); keep one", memory[0].key)}
	case inLimits && r.Count == 0:
		return "", &RequestError{Key: first.key, Value: first.raw, Reason: "HAMi's form needs the card count beside it: resources.limits[nvidia.com/gpu]"}
	case inLimits && len(cards) > 0:
		return "", &RequestError{Key: cards[0].key, Value: cards[0].raw, Reason: fmt.Sprintf("HAMi's form counts its cards in nvidia.com/gpu (%d); remove the annotation", r.Count)}
	case !inLimits && r.Count > 0:
		return "", &RequestError{Key: first.key, Value: first.raw, Reason: fmt.Sprintf("the pod also requests %d whole nvidia.com/gpu; shared cards are not an nvidia.com/gpu request: remove it, and count the cards in %s", r.Count, CardsAnnotation)}
	case milli == WholeCardMilli && inLimits:
		// HAMi's gpucores: 100 is all of each card's compute: whole
		// cards, whatever memory it names.
		return "", nil
	case milli == WholeCardMilli:
		return "", &RequestError{Key: compute[0].key, Value: compute[0].raw, Reason: "a share of 1000 thousandths is a whole card: request nvidia.com/gpu instead"}
	}
	if !inLimits {
		r.Count = 1
		if len(cards) > 0 {
			r.Count = cards[0].n
		}
	}
	r.Milli, r.GPUMemMiB, r.GPUMemPercent = milli, mib, pct
	if mem := slices.Concat(memory, percent); len(mem) > 0 {
		memoryWords = keyValue(mem[0].key, mem[0].raw)
	}
	return memoryWords, nil
}

// agreed is the value every reading gives; 0 for none.
func agreed(values []shareValue) (int64, error) {
	for _, v := range values[min(1, len(values)):] {
		if v.n != values[0].n {
			return 0, &RequestError{Key: v.key, Value: v.raw, Reason: fmt.Sprintf("disagrees with %s=%s", values[0].key, quote.Value(values[0].raw))}
		}
	}
	if len(values) == 0 {
		return 0, nil
	}
	return values[0].n, nil
}

// memoryMiB reads the per-card memory from the aisched key or the oks/
// alias; when both are given they must agree.
func memoryMiB(a map[string]string) (int64, string, error) {
	var own, oks int64 = -1, -1
	if v, ok := a[MemoryAnnotation]; ok {
		q, err := resource.ParseQuantity(strings.TrimSpace(v))
		if err != nil || q.Sign() < 0 {
			return 0, "", &RequestError{Key: MemoryAnnotation, Value: v, Reason: "want a quantity per card such as 32Gi or 40000Mi"}
		}
		// Compare the quantity before Value(), which is 0 for a quantity
		// too large for an int64 (1e100).
		if q.Cmp(*resource.NewQuantity(maxMemoryMiB<<20, resource.BinarySI)) > 0 {
			return 0, "", &RequestError{Key: MemoryAnnotation, Value: v, Reason: "more than 1Ti per card"}
		}
		own = ceilDiv(q.Value(), 1<<20)
	}
	if v, ok := a[OKSMemoryAnnotation]; ok {
		mb, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || mb < 0 {
			return 0, "", &RequestError{Key: OKSMemoryAnnotation, Value: v, Reason: "want a whole number of MB per card"}
		}
		// 1 TiB is 1,099,511 MB (these MB are 10^6 bytes).
		if mb > maxMemoryMiB<<20/1_000_000 {
			return 0, "", &RequestError{Key: OKSMemoryAnnotation, Value: v, Reason: "more than 1 TiB per card"}
		}
		oks = ceilDiv(mb*1_000_000, 1<<20)
	}
	switch {
	case own >= 0 && oks >= 0 && own != oks:
		return 0, "", &RequestError{Key: OKSMemoryAnnotation, Value: a[OKSMemoryAnnotation], Reason: fmt.Sprintf("disagrees with %s=%s", MemoryAnnotation, quote.Value(a[MemoryAnnotation]))}
	case own >= 0:
		return own, MemoryAnnotation, nil
	case oks >= 0:
		return oks, OKSMemoryAnnotation, nil
	}
	return 0, "", nil
}

func cores(a map[string]string) (int64, string, error) {
	var got int64 = -1
	var key string
	for _, k := range []string{CoresAnnotation, OKSCoresAnnotation} {
		v, ok := a[k]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 || n > maxCores {
			return 0, "", &RequestError{Key: k, Value: v, Reason: fmt.Sprintf("want a whole number of CUDA cores per card, 0 to %d", maxCores)}
		}
		if got >= 0 && n != got {
			return 0, "", &RequestError{Key: k, Value: v, Reason: fmt.Sprintf("disagrees with %s=%s", key, quote.Value(a[key]))}
		}
		got, key = n, k
	}
	return max(got, 0), key, nil
}

func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	if a > math.MaxInt64-b {
		return a / b
	}
	return (a + b - 1) / b
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
