package gpuledger

import (
	"github.com/aisched/aisched/pkg/gpu"
)

// Card choice: the one policy by which aisched gives cards to a pod.
// GPUFit's Reserve applies it (unless a CardProposer proposes the card for
// a share of one), HeteroPriority scores the cards it would give, and
// placement on paper (NodeGPUs) takes the same cards, so that every part
// of aisched that asks "which cards would this pod get" gets one answer.

// Pick appends to dst the cards for r: the cards PickShares chooses for
// a share of each, else the best-fit whole cards of PickWhole. ok is false
// when the node has no room.
func (u Usage) Pick(cards []gpu.Card, r gpu.Request, dst []int) (picked []int, ok bool) {
	if r.Shared() {
		return u.PickShares(cards, r, dst)
	}
	return u.PickWhole(cards, r, dst)
}

// PickShares appends to dst the indices of the r.Count distinct cards for
// the share r of each: of the cards with Room for it, those with the
// least free (FreeOn: best fit, ties to the lowest index), so that whole
// free cards stay whole. A share of memory in percent on several cards
// takes cards of one memory size, the smallest with enough room, so that
// it holds the same MiB of each. The indices come out ascending; ok is
// false when too few cards have room. It does not allocate when dst has
// room.
func (u Usage) PickShares(cards []gpu.Card, r gpu.Request, dst []int) (picked []int, ok bool) {
	var fitBuf [MaxCards]int
	fit := fitBuf[:0]
	for i := range cards {
		if len(fit) == MaxCards {
			break
		}
		if u.Room(&cards[i], r) {
			fit = append(fit, i)
		}
	}
	if int64(len(fit)) < r.Count {
		return dst, false
	}
	bySize := r.GPUMemPercent > 0 && r.Count > 1
	less := func(a, b *gpu.Card) bool {
		if bySize && a.MemoryMiB != b.MemoryMiB {
			return a.MemoryMiB < b.MemoryMiB
		}
		if fa, fb := u.FreeOn(a), u.FreeOn(b); fa != fb {
			return fa < fb
		}
		return a.Index < b.Index
	}
	for i := 1; i < len(fit); i++ {
		for j := i; j > 0 && less(&cards[fit[j]], &cards[fit[j-1]]); j-- {
			fit[j], fit[j-1] = fit[j-1], fit[j]
		}
	}
	take := fit[:r.Count]
	if bySize {
		if take = oneSize(cards, fit, r.Count); take == nil {
			return dst, false
		}
	}
	return appendAscending(dst, cards, take), true
}

// oneSize is the first run of count cards of one memory size in fit
// (positions in cards, sorted by size); nil when no size has count.
func oneSize(cards []gpu.Card, fit []int, count int64) []int {
	for start := 0; start < len(fit); {
		end := start + 1
		for end < len(fit) && cards[fit[end]].MemoryMiB == cards[fit[start]].MemoryMiB {
			end++
		}
		if int64(end-start) >= count {
			return fit[start : start+int(count)]
		}
		start = end
	}
	return nil
}

// PickWhole appends to dst the indices of the r.Count whole cards to give
// to the pod: among the cards no pod holds, whole or in part, that satisfy
// r, the smallest (least memory, then fewest cores, then lowest index),
// which keeps the large cards for the requests that need them. The
// indices come out ascending; ok is false when fewer than r.Count cards
// qualify. It does not allocate when dst has room (schedulers call it for
// every node in every cycle).
func (u Usage) PickWhole(cards []gpu.Card, r gpu.Request, dst []int) (picked []int, ok bool) {
	// Positions in cards of the qualifying cards; a node has at most 64.
	var fitBuf [MaxCards]int
	fit := fitBuf[:0]
	for i := range cards {
		if len(fit) == MaxCards {
			break
		}
		if !u.Used(cards[i].Index) && cards[i].Satisfies(r) {
			fit = append(fit, i)
		}
	}
	if int64(len(fit)) < r.Count {
		return dst, false
	}
	less := func(a, b *gpu.Card) bool {
		switch {
		case a.MemoryMiB != b.MemoryMiB:
			return a.MemoryMiB < b.MemoryMiB
		case a.Cores != b.Cores:
			return a.Cores < b.Cores
		default:
			return a.Index < b.Index
		}
	}
	// Insertion sort: few elements, often already in order, no allocation.
	for i := 1; i < len(fit); i++ {
		for j := i; j > 0 && less(&cards[fit[j]], &cards[fit[j-1]]); j-- {
			fit[j], fit[j-1] = fit[j-1], fit[j]
		}
	}
	return appendAscending(dst, cards, fit[:r.Count]), true
}

// appendAscending appends to dst the indices of the cards at positions,
// in ascending order.
func appendAscending(dst []int, cards []gpu.Card, positions []int) []int {
	start := len(dst)
	for _, pos := range positions {
		dst = append(dst, cards[pos].Index)
	}
	out := dst[start:]
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return dst
}
