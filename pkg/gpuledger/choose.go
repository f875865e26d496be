package gpuledger

import (
	"github.com/aisched/aisched/pkg/gpu"
)

// Card choice: the one policy by which aisched gives cards to a pod. GPUFit's
// Reserve applies it (unless a CardProposer proposes a card for a share),
// HeteroPriority scores the cards it would give, and placement on paper
// (NodeGPUs) takes the same cards, so that every part of aisched that asks
// "which cards would this pod get" gets one answer.

// Pick appends to dst the cards for r: the card PickShared chooses for a
// share, else the best-fit whole cards of PickWhole. ok is false when the
// node has no room.
func (u Usage) Pick(cards []gpu.Card, r gpu.Request, dst []int) (picked []int, ok bool) {
	if r.Shared() {
		idx, ok := u.PickShared(cards, r)
		if !ok {
			return dst, false
		}
		return append(dst, idx), true
	}
	return u.PickWhole(cards, r, dst)
}

// PickShared returns the card for the share r of one card: of the cards
// with Room for it, the one with the least free (FreeOn: best fit, ties to
// the lowest index), so that whole free cards stay whole. ok is false when
// no card has room.
func (u Usage) PickShared(cards []gpu.Card, r gpu.Request) (index int, ok bool) {
	var best int64
	for i := range cards {
		c := &cards[i]
		if !u.Room(c, r) {
			continue
		}
		left := u.FreeOn(c)
		if ok && (left > best || (left == best && c.Index > index)) {
			continue
		}
		best, index, ok = left, c.Index, true
	}
	return index, ok
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
	var fitBuf [maxCards]int
	fit := fitBuf[:0]
	for i := range cards {
		if len(fit) == maxCards {
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
	start := len(dst)
	for _, pos := range fit[:r.Count] {
		dst = append(dst, cards[pos].Index)
	}
	out := dst[start:]
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return dst, true
}
