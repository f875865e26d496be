package gpu

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The reasons of readings that several forms share, made once from the
// bounds they name.
var (
	memShareReason = fmt.Sprintf("want a whole number of MiB of each card's memory, 1 to %d", maxMemoryMiB)
	cardsReason    = fmt.Sprintf("want a whole number of cards, 1 to %d", maxCount)
	coresReason    = fmt.Sprintf("want a whole number of CUDA cores per card, 0 to %d", maxCores)
)

// ofAisched reads aisched's own keys: nvidia.com/gpu, and the
// gpu.aisched.io annotations.
func ofAisched(a map[string]string, requests corev1.ResourceList, c *canonical) {
	q := requests[ResourceName]
	c.gpus = reading{key: string(ResourceName), n: q.Value()}
	if c.gpus.n > maxCount {
		c.gpus.raw, c.gpus.bad = q.String(), fmt.Sprintf("at most %d cards per pod", maxCount)
	}
	if len(a) == 0 {
		return
	}
	intAnnotation(a, MilliAnnotation, 1, WholeCardMilli, 1, "want thousandths of one card, 1 to 999", &c.milli)
	intAnnotation(a, GPUMemAnnotation, 1, maxMemoryMiB, 1, memShareReason, &c.gpuMem)
	intAnnotation(a, CardsAnnotation, 1, maxCount, 1, cardsReason, &c.shareCards)
	if v, ok := a[MemoryAnnotation]; ok {
		c.memory.add(memoryQuantity(v))
	}
	intAnnotation(a, CoresAnnotation, 0, maxCores, 1, coresReason, &c.cores)
	listAnnotation(a, ModelsAnnotation, &c.models)
}

// memoryQuantity reads gpu.aisched.io/memory, a quantity per card, in MiB
// rounded up.
func memoryQuantity(v string) reading {
	r := reading{key: MemoryAnnotation, raw: v}
	q, err := resource.ParseQuantity(strings.TrimSpace(v))
	switch {
	case err != nil || q.Sign() < 0:
		r.bad = "want a quantity per card such as 32Gi or 40000Mi"
	// Compare the quantity before Value(), which is 0 for a quantity too
	// large for an int64 (1e100).
	case q.Cmp(*resource.NewQuantity(maxMemoryMiB<<20, resource.BinarySI)) > 0:
		r.bad = "more than 1Ti per card"
	default:
		r.n = ceilDiv(q.Value(), 1<<20)
	}
	return r
}

// ofOKS reads the oks/ annotations, an older form of aisched's request:
// oks/gpu-number repeats the card count, oks/gpu-memory is the least
// memory of each card in MB (10^6 bytes), oks/gpu-core its least cores.
func ofOKS(a map[string]string, c *canonical) {
	if len(a) == 0 {
		return
	}
	intAnnotation(a, OKSCountAnnotation, 1, math.MaxInt64, 1, "want a whole number of cards, at least 1", &c.gpusAgain)
	if v, ok := a[OKSMemoryAnnotation]; ok {
		r := reading{key: OKSMemoryAnnotation, raw: v}
		mb, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch {
		case err != nil || mb < 0:
			r.bad = "want a whole number of MB per card"
		// 1 TiB is 1,099,511 MB.
		case mb > maxMemoryMiB<<20/1_000_000:
			r.bad = "more than 1 TiB per card"
		default:
			r.n = ceilDiv(mb*1_000_000, 1<<20)
		}
		c.memory.add(r)
	}
	intAnnotation(a, OKSCoresAnnotation, 0, maxCores, 1, coresReason, &c.cores)
}

// intAnnotation reads annotation key, when the pod has it, as a whole
// number lo..hi, times scale in the field's unit; a value out of bounds
// is a reading with the reason.
func intAnnotation(a map[string]string, key string, lo, hi, scale int64, reason string, to *readings) {
	v, ok := a[key]
	if !ok {
		return
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < lo || n > hi {
		to.add(reading{key: key, raw: v, bad: reason})
		return
	}
	to.add(reading{key: key, raw: v, n: n * scale})
}

// intResource reads a resource of the pod's containers, when it has it,
// as a whole number lo..hi, times scale; it reports whether the pod has
// it. key names the resource in messages.
func intResource(requests corev1.ResourceList, name corev1.ResourceName, key string, lo, hi, scale int64, reason string, to *readings) bool {
	q, ok := requests[name]
	if !ok {
		return false
	}
	// Compare before Value(), which is 0 for a quantity beyond int64.
	if q.CmpInt64(hi) > 0 || q.CmpInt64(lo) < 0 || q.MilliValue()%1000 != 0 {
		to.add(reading{key: key, raw: q.String(), bad: reason})
		return true
	}
	to.add(reading{key: key, raw: q.String(), n: q.Value() * scale})
	return true
}

// listAnnotation keeps annotation key, when the pod has it, for the
// parser to read as a list.
func listAnnotation(a map[string]string, key string, to *readings) {
	if v, ok := a[key]; ok {
		to.add(reading{key: key, raw: v})
	}
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
