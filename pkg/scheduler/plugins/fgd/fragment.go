package fgd

import (
	"math"

	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
)

// Typical is a pod shape of the workload and how often it occurs.
type Typical struct {
	// MilliCPU is the shape's CPU request.
	MilliCPU int64
	// Milli is what the shape needs of each card, in thousandths (1000 for
	// whole cards); 0 with Count 0 for CPU-only pods, and for a share of
	// memory alone.
	Milli int64
	// GPUMemMiB is the memory of each card a share takes; 0 for whole
	// cards, shares of compute alone and shares of memory in percent.
	GPUMemMiB int64
	// GPUMemPercent is the percent of each card's memory a share takes
	// (gpu.Request.GPUMemPercent); 0 for other shapes.
	GPUMemPercent int64
	// Count is the number of cards.
	Count int64
	// Req holds the per-card constraints (models, memory, cores).
	Req gpu.Request
	// Freq is the shape's share of the typical pods; the shares sum to 1.
	Freq float64
	// constrained is true when Req has per-card constraints to check.
	constrained bool
}

// nodeView is what the fragmentation of a node depends on: what each card
// has free and the free CPU.
type nodeView struct {
	// free[i] is what card cards[i] has free in thousandths
	// (gpuledger.Usage.FreeOn: the lesser of its compute and memory left),
	// compute[i] its compute left in thousandths and mem[i] its memory
	// left in MiB; all 0 for a card held whole or unhealthy.
	free, compute, mem []int64
	cards              []gpu.Card
	cpuFree            int64
	// usage is what pods hold of the cards, for the ledger's card choice.
	usage gpuledger.Usage
	// buf holds free, compute and mem for nodes of up to 64 cards, without
	// an allocation.
	buf [3][64]int64
	// runs is fragment's scratch space.
	runs [64]run
}

// run is a stretch of cards alike, for a typical pod's purposes: the same
// free, compute and memory left and the same per-card facts. A node's cards
// are mostly alike (all of one model, untouched ones next to each other),
// so fragment tries each shape on a run rather than on every card.
type run struct {
	first, count int
	free         int64
}

// memOn is the memory of card c a pod of shape t takes.
func (t *Typical) memOn(c *gpu.Card) int64 {
	return gpu.Request{GPUMemMiB: t.GPUMemMiB, GPUMemPercent: t.GPUMemPercent}.MemMiBOn(c)
}

// fits reports whether a pod of shape t could use card j: whole cards
// must be untouched, a share needs its compute and memory left.
func (n *nodeView) fits(t *Typical, j int) bool {
	mem := t.GPUMemMiB
	if t.GPUMemPercent > 0 {
		mem = t.memOn(&n.cards[j])
	}
	if n.compute[j] < t.Milli || n.mem[j] < mem || t.Milli == gpu.WholeCardMilli && n.free[j] < gpu.WholeCardMilli {
		return false
	}
	return !t.constrained || n.cards[j].Satisfies(t.Req)
}

// alike reports whether cards i and j are the same to fits.
func (n *nodeView) alike(i, j int) bool {
	if n.free[i] != n.free[j] || n.compute[i] != n.compute[j] || n.mem[i] != n.mem[j] {
		return false
	}
	a, b := &n.cards[i], &n.cards[j]
	return a.Model == b.Model && a.MemoryMiB == b.MemoryMiB && a.Cores == b.Cores && a.Healthy == b.Healthy
}

// take takes (or with sign -1 gives back) a share of card i and
// recomputes what the card has free.
func (n *nodeView) take(i int, r gpu.Request, sign int64) {
	n.compute[i] -= sign * r.Milli
	n.mem[i] -= sign * r.MemMiBOn(&n.cards[i])
	n.free[i] = n.compute[i]
	if total := n.cards[i].MemoryMiB; total > 0 && n.mem[i] < total {
		n.free[i] = min(n.free[i], max(n.mem[i], 0)*gpu.WholeCardMilli/total)
	}
}

// bestCard tries a pod that shares one card (milliCPU, r) on every card with
// room that meets r, and returns the largest fragmentation change (before
// less after) and the position in cards of the card that gives it, the
// first of equals; -1 when no card has room. n is left as it was.
func (n *nodeView) bestCard(types []Typical, before float64, milliCPU int64, r gpu.Request) (change float64, card int) {
	change, card = math.Inf(-1), -1
	n.cpuFree -= milliCPU
	for i := range n.free {
		if n.compute[i] < r.Milli || n.mem[i] < r.MemMiBOn(&n.cards[i]) || !n.cards[i].Satisfies(r) {
			continue
		}
		free := n.free[i]
		n.take(i, r, 1)
		if c := before - n.fragment(types); c > change {
			change, card = c, i
		}
		n.take(i, r, -1)
		n.free[i] = free
	}
	n.cpuFree += milliCPU
	return change, card
}

// fragment is the FGD paper's fragmentation of the node for the typical
// pods: F = sum over shapes t of Freq_t * frag_t, where frag_t is
//   - all the free GPU of the node for a CPU-only shape (a CPU pod can use
//     none of it);
//   - all of it when the shape cannot run on the node (too few cards with
//     room that meet its constraints, or too little CPU);
//   - else the free GPU of the cards it cannot use (less compute or
//     memory left than it needs, or failing its constraints).
//
// F is in thousandths of a card.
func (n *nodeView) fragment(types []Typical) float64 {
	var all int64
	runs := n.runs[:0]
	for j, f := range n.free {
		all += f
		if k := len(runs) - 1; k >= 0 && n.alike(runs[k].first, j) {
			runs[k].count++
			runs[k].free += f
			continue
		}
		runs = append(runs, run{first: j, count: 1, free: f})
	}
	var total float64
	for i := range types {
		t := &types[i]
		if t.Count == 0 {
			total += t.Freq * float64(all)
			continue
		}
		var fit, unusable int64
		for _, r := range runs {
			if n.fits(t, r.first) {
				fit += int64(r.count)
			} else {
				unusable += r.free
			}
		}
		if fit >= t.Count && n.cpuFree >= t.MilliCPU {
			total += t.Freq * float64(unusable)
		} else {
			total += t.Freq * float64(all)
		}
	}
	return total
}

// score maps the change of fragmentation a placement causes (before -
// after, thousandths of a card) to [0, 100] as the paper's simulator
// does: 100 * sigmoid(change / 1000), truncated. A placement that leaves
// fragmentation as it was scores 50.
func score(change float64) int64 {
	return int64(100 / (1 + math.Exp(-change/1000)))
}
