// Package gpu is aisched's model of NVIDIA GPUs: what a pod asks for
// (count, memory and cores per card, models), what a node has (its cards,
// from a GPUInventory or from GPU Feature Discovery labels), and which cards
// can serve a request. The scheduler plugins, the node agent and the
// simulated nodes share it.
package gpu

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
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
	// times ten.
	HAMiGPUMemAnnotation   = "nvidia.com/gpumem"
	HAMiGPUCoresAnnotation = "nvidia.com/gpucores"
	// ModelsAnnotation lists the acceptable card models, comma-separated
	// (compared case-insensitively, spaces and dashes alike).
	ModelsAnnotation = "gpu.aisched.io/models"

	// SeedCountAnnotation is seed 001's card count; it must equal the
	// nvidia.com/gpu request.
	SeedCountAnnotation = "oks/gpu-number"
	// SeedMemoryAnnotation is seed 001's least memory per card in MB (10^6 bytes).
	SeedMemoryAnnotation = "oks/gpu-memory"
	// SeedCoresAnnotation is seed 001's least number of cores per card.
	SeedCoresAnnotation = "oks/gpu-core"

	// AssignedAnnotation is written by the scheduler before binding: the
	// indices of the cards the pod gets ("0,3"), for a device plugin to honour.
	AssignedAnnotation = "gpu.aisched.io/assigned"
	// AssignedUUIDsAnnotation lists the UUIDs of the same cards, when known.
	AssignedUUIDsAnnotation = "gpu.aisched.io/assigned-uuids"
)

// Bounds of the per-card constraints; larger values are certainly mistakes.
const (
	maxMemoryMiB = 1 << 20 // 1 TiB per card
	maxCores     = 1 << 20
	maxCount     = 64
)

// Request is what a pod asks of GPUs.
type Request struct {
	// Count is the number of cards: the nvidia.com/gpu request, or 1 for a
	// pod that shares a card (Milli > 0).
	Count int64
	// Milli is the share of one card's compute in thousandths (1..999)
	// for a pod that shares a card; 0 for whole cards and for a share of
	// memory alone.
	Milli int64
	// GPUMemMiB is the share of one card's memory a pod that shares a card
	// takes; 0 for whole cards and for a share of compute alone.
	GPUMemMiB int64
	// MemoryMiB is the least memory of each card; 0 accepts any.
	MemoryMiB int64
	// Cores is the least number of CUDA cores of each card; 0 accepts any.
	Cores int64
	// Models are the acceptable models, normalized; empty accepts any.
	Models []string
}

// Shared reports whether the request is for a share of one card.
func (r Request) Shared() bool { return r.Milli > 0 || r.GPUMemMiB > 0 }

// WholeCards is the number of whole cards the request holds: its
// nvidia.com/gpu request, 0 for a shared card.
func (r Request) WholeCards() int64 {
	if r.Shared() {
		return 0
	}
	return r.Count
}

// TotalMilli is the request in thousandths of a card.
func (r Request) TotalMilli() int64 {
	if r.Shared() {
		return r.Milli
	}
	return r.Count * WholeCardMilli
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
	return fmt.Sprintf("invalid GPU request: %s=%q: %s", e.Key, e.Value, e.Reason)
}

// RequestedCards is the pod's nvidia.com/gpu request: the whole cards the
// kubelet counts for it, whatever the annotations say.
func RequestedCards(pod *corev1.Pod) int64 {
	q := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[ResourceName]
	return q.Value()
}

// ParseRequest reads the GPU request of a pod. Pods without nvidia.com/gpu
// and without GPU annotations get a zero Request; every inconsistency is a
// *RequestError.
func ParseRequest(pod *corev1.Pod) (Request, error) {
	var r Request
	q := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[ResourceName]
	r.Count = q.Value()
	a := pod.Annotations
	if r.Count > maxCount {
		return Request{}, &RequestError{Key: string(ResourceName), Value: q.String(), Reason: fmt.Sprintf("at most %d cards per pod", maxCount)}
	}

	if v, ok := a[SeedCountAnnotation]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch {
		case err != nil || n < 1:
			return Request{}, &RequestError{Key: SeedCountAnnotation, Value: v, Reason: "want a whole number of cards, at least 1"}
		case r.Count == 0:
			return Request{}, &RequestError{Key: SeedCountAnnotation, Value: v, Reason: "the pod requests no nvidia.com/gpu; set resources.limits[nvidia.com/gpu] to the same count"}
		case n != r.Count:
			return Request{}, &RequestError{Key: SeedCountAnnotation, Value: v, Reason: fmt.Sprintf("disagrees with the nvidia.com/gpu request of %d", r.Count)}
		}
	}

	milli, milliKey, err := shareMilli(a)
	if err != nil {
		return Request{}, err
	}
	gpuMem, gpuMemKey, err := shareMemory(a)
	if err != nil {
		return Request{}, err
	}
	for _, key := range []string{milliKey, gpuMemKey} {
		if key != "" && r.Count > 0 {
			return Request{}, &RequestError{Key: key, Value: a[key], Reason: fmt.Sprintf("the pod also requests %d whole nvidia.com/gpu; a shared card is not an nvidia.com/gpu request, remove it", r.Count)}
		}
	}
	if milli > 0 || gpuMem > 0 {
		r.Count, r.Milli, r.GPUMemMiB = 1, milli, gpuMem
	}

	mem, memKey, err := memoryMiB(a)
	if err != nil {
		return Request{}, err
	}
	cores, coresKey, err := cores(a)
	if err != nil {
		return Request{}, err
	}
	var modelsKey string
	if v, ok := a[ModelsAnnotation]; ok {
		modelsKey = ModelsAnnotation
		for _, m := range strings.Split(v, ",") {
			if m = NormalizeModel(m); m == "" {
				return Request{}, &RequestError{Key: ModelsAnnotation, Value: v, Reason: "want comma-separated model names, none empty"}
			}
			r.Models = append(r.Models, m)
		}
	}
	r.MemoryMiB, r.Cores = mem, cores
	if r.Count == 0 {
		for _, key := range []string{memKey, coresKey, modelsKey} {
			if key != "" {
				return Request{}, &RequestError{Key: key, Value: a[key], Reason: "the pod requests no nvidia.com/gpu; per-card constraints need a card count in resources.limits[nvidia.com/gpu] or a share in " + MilliAnnotation}
			}
		}
	}
	return r, nil
}

// shareMilli reads the share of a card's compute, in thousandths, from
// MilliAnnotation or HAMi's percent; when both are given they must agree.
func shareMilli(a map[string]string) (int64, string, error) {
	var milli int64
	var key string
	if v, ok := a[MilliAnnotation]; ok {
		m, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch {
		case err != nil || m < 1 || m > WholeCardMilli:
			return 0, "", &RequestError{Key: MilliAnnotation, Value: v, Reason: "want thousandths of one card, 1 to 999"}
		case m == WholeCardMilli:
			return 0, "", &RequestError{Key: MilliAnnotation, Value: v, Reason: "1000 is a whole card: request nvidia.com/gpu: 1 instead"}
		}
		milli, key = m, MilliAnnotation
	}
	if v, ok := a[HAMiGPUCoresAnnotation]; ok {
		pct, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch {
		case err != nil || pct < 1 || pct > 100:
			return 0, "", &RequestError{Key: HAMiGPUCoresAnnotation, Value: v, Reason: "want a percent of one card's cores, 1 to 99"}
		case pct == 100:
			return 0, "", &RequestError{Key: HAMiGPUCoresAnnotation, Value: v, Reason: "100 percent is a whole card: request nvidia.com/gpu: 1 instead"}
		case key != "" && pct*10 != milli:
			return 0, "", &RequestError{Key: HAMiGPUCoresAnnotation, Value: v, Reason: fmt.Sprintf("disagrees with %s=%q (%d percent is %d thousandths)", key, a[key], pct, pct*10)}
		}
		milli, key = pct*10, HAMiGPUCoresAnnotation
	}
	return milli, key, nil
}

// shareMemory reads the share of a card's memory, in MiB, from
// GPUMemAnnotation or HAMi's alias; when both are given they must agree.
func shareMemory(a map[string]string) (int64, string, error) {
	var mib int64
	var key string
	for _, k := range []string{GPUMemAnnotation, HAMiGPUMemAnnotation} {
		v, ok := a[k]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch {
		case err != nil || n < 1 || n > maxMemoryMiB:
			return 0, "", &RequestError{Key: k, Value: v, Reason: fmt.Sprintf("want a whole number of MiB of one card's memory, 1 to %d", maxMemoryMiB)}
		case key != "" && n != mib:
			return 0, "", &RequestError{Key: k, Value: v, Reason: fmt.Sprintf("disagrees with %s=%q", key, a[key])}
		}
		mib, key = n, k
	}
	return mib, key, nil
}

// memoryMiB reads the per-card memory from the aisched key or the seed
// alias; when both are given they must agree.
func memoryMiB(a map[string]string) (int64, string, error) {
	var own, seed int64 = -1, -1
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
	if v, ok := a[SeedMemoryAnnotation]; ok {
		mb, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || mb < 0 {
			return 0, "", &RequestError{Key: SeedMemoryAnnotation, Value: v, Reason: "want a whole number of MB per card"}
		}
		// 1 TiB is 1,099,511 MB (the seed's MB are 10^6 bytes).
		if mb > maxMemoryMiB<<20/1_000_000 {
			return 0, "", &RequestError{Key: SeedMemoryAnnotation, Value: v, Reason: "more than 1 TiB per card"}
		}
		seed = ceilDiv(mb*1_000_000, 1<<20)
	}
	switch {
	case own >= 0 && seed >= 0 && own != seed:
		return 0, "", &RequestError{Key: SeedMemoryAnnotation, Value: a[SeedMemoryAnnotation], Reason: fmt.Sprintf("disagrees with %s=%q", MemoryAnnotation, a[MemoryAnnotation])}
	case own >= 0:
		return own, MemoryAnnotation, nil
	case seed >= 0:
		return seed, SeedMemoryAnnotation, nil
	}
	return 0, "", nil
}

func cores(a map[string]string) (int64, string, error) {
	var got int64 = -1
	var key string
	for _, k := range []string{CoresAnnotation, SeedCoresAnnotation} {
		v, ok := a[k]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 || n > maxCores {
			return 0, "", &RequestError{Key: k, Value: v, Reason: fmt.Sprintf("want a whole number of CUDA cores per card, 0 to %d", maxCores)}
		}
		if got >= 0 && n != got {
			return 0, "", &RequestError{Key: k, Value: v, Reason: fmt.Sprintf("disagrees with %s=%q", key, a[key])}
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
