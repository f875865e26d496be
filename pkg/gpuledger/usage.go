package gpuledger

import (
	"math/bits"
	"slices"

	"github.com/aisched/aisched/pkg/gpu"
)

// MaxCards bounds the cards of a node (Usage keeps one bit per card).
const MaxCards = 64

// Usage is what the pods of a node hold.
type Usage struct {
	// used has bit i set when card i is held, whole or in part, by a pod
	// with a known assignment; whole has it set when a pod holds it whole.
	used, whole uint64
	// shared holds what pods that share a card hold of each, by card
	// index; nil when no pod of the node shares a card.
	shared *cardShares
	// Unknown counts the cards held by GPU pods that no aisched profile
	// placed (another scheduler's): which cards they have is not known.
	Unknown int64
	// unlocated is set when Unknown is not 0 on a node whose cards the
	// node agent delivers as the scheduler assigned them (a node with a
	// GPUInventory): until the agent has located the other pods' cards,
	// any card chosen may be one of theirs, and the container would be
	// refused it. Such a node has no room (Fit).
	unlocated bool
}

// cardShares sums the shares of each card of a node.
type cardShares struct {
	milli, memMiB [MaxCards]int64
}

// Used reports whether card i is held, whole or in part, by a pod with a
// known assignment: a whole-card pod cannot have it.
func (u Usage) Used(i int) bool { return i >= 0 && i < MaxCards && u.used&(1<<i) != 0 }

// Whole reports whether a pod holds card i whole.
func (u Usage) Whole(i int) bool {
	return u.Used(i) && (u.whole&(1<<i) != 0 || u.shared == nil)
}

// HeldMilli is the thousandths of card i held: 1000 for a card held whole.
func (u Usage) HeldMilli(i int) int64 {
	switch {
	case !u.Used(i):
		return 0
	case u.Whole(i):
		return gpu.WholeCardMilli
	}
	return min(u.shared.milli[i], gpu.WholeCardMilli)
}

// HeldMemMiB is the memory of card i held by the pods that share it.
func (u Usage) HeldMemMiB(i int) int64 {
	if !u.Used(i) || u.shared == nil {
		return 0
	}
	return u.shared.memMiB[i]
}

// Room reports whether the share r can go on card c: the card meets r's
// per-card constraints, no pod holds it whole, and it has r's compute and
// memory left (of memory in percent, that percent of the card).
func (u Usage) Room(c *gpu.Card, r gpu.Request) bool {
	return c.Satisfies(r) && u.shareLeft(c, r)
}

// shareLeft is Room for a card known to satisfy r.
func (u Usage) shareLeft(c *gpu.Card, r gpu.Request) bool {
	i := c.Index
	mem := r.MemMiBOn(c)
	return !u.Whole(i) && gpu.WholeCardMilli-u.HeldMilli(i) >= r.Milli && (mem == 0 || c.MemoryMiB-u.HeldMemMiB(i) >= mem)
}

// FreeOn is what card c has free in thousandths of the card: the lesser
// of its compute and its memory left (a card whose memory is taken by
// shares is used up even with compute left). 0 for a card held whole.
func (u Usage) FreeOn(c *gpu.Card) int64 {
	free := gpu.WholeCardMilli - u.HeldMilli(c.Index)
	if held := u.HeldMemMiB(c.Index); held > 0 && c.MemoryMiB > 0 {
		free = min(free, max(c.MemoryMiB-held, 0)*gpu.WholeCardMilli/c.MemoryMiB)
	}
	return free
}

// Unlocated reports whether pods another scheduler placed hold cards of
// the node that the node agent, which delivers the cards aisched assigns,
// has not located yet: no card of the node can be chosen safely.
func (u Usage) Unlocated() bool { return u.unlocated }

// Count is the number of cards known to be held, whole or in part.
func (u Usage) Count() int { return bits.OnesCount64(u.used) }

// Fit counts the cards that satisfy the per-card part of r (capable) and,
// of those, the ones r could have: for whole cards the cards not held,
// less the cards held by pods whose cards are unknown; for a share, the
// cards with Room for it (free; it may be negative). On a node whose
// cards held by other schedulers' pods are not located yet (Unlocated)
// no card is free. A share of memory in
// percent on several cards takes cards of one memory size (PickShares):
// capable and free count the size with the most free cards.
func (u Usage) Fit(cards []gpu.Card, r gpu.Request) (capable, free int64) {
	if r.GPUMemPercent > 0 && r.Count > 1 {
		return u.fitOneSize(cards, r)
	}
	for i := range cards {
		if !cards[i].Satisfies(r) || cards[i].MemoryMiB < r.MemMiBOn(&cards[i]) {
			continue
		}
		capable++
		if r.Shared() && u.shareLeft(&cards[i], r) || !r.Shared() && !u.Used(cards[i].Index) {
			free++
		}
	}
	return capable, u.free(free)
}

// free is what Fit reports of free cards: less those of pods whose cards
// are unknown, and none while they are unlocated.
func (u Usage) free(free int64) int64 {
	if u.unlocated {
		free = 0
	}
	return free - u.Unknown
}

// fitOneSize is Fit for a share of memory in percent on several cards:
// the counts of the memory size with the most free cards (then the most
// capable ones). Nodes have a few sizes at most; it does not allocate.
func (u Usage) fitOneSize(cards []gpu.Card, r gpu.Request) (capable, free int64) {
	for i := range cards {
		size := cards[i].MemoryMiB
		if slices.ContainsFunc(cards[:i], func(c gpu.Card) bool { return c.MemoryMiB == size }) {
			continue // counted with the first card of its size
		}
		var c, f int64
		for j := range cards[i:] {
			card := &cards[i+j]
			if card.MemoryMiB != size || !card.Satisfies(r) {
				continue
			}
			c++
			if u.shareLeft(card, r) {
				f++
			}
		}
		if f > free || f == free && c > capable {
			capable, free = c, f
		}
	}
	return capable, u.free(free)
}

// FreeMilli is the thousandths free (FreeOn) of the node's healthy
// cards, less the cards held by pods whose cards are unknown.
func (u Usage) FreeMilli(cards []gpu.Card) int64 {
	var free int64
	for i := range cards {
		if cards[i].Healthy {
			free += u.FreeOn(&cards[i])
		}
	}
	return max(free-u.Unknown*gpu.WholeCardMilli, 0)
}

// With returns u with a holder of cards (whole cards when share is zero,
// else the share of each) added: a pod, or a claim of the DRA ledger
// (package dra). The per-card shares are copied before they change, so
// that a Usage handed out never changes.
func (u Usage) With(cards []int, share Share) Usage {
	if !share.IsZero() {
		shared := new(cardShares)
		if u.shared != nil {
			*shared = *u.shared
		}
		u.shared = shared
	}
	for _, c := range cards {
		if c < 0 || c >= MaxCards {
			continue
		}
		u.used |= 1 << c
		if share.IsZero() {
			u.whole |= 1 << c
			continue
		}
		u.shared.milli[c] += share.Milli
		u.shared.memMiB[c] += share.MemMiB
	}
	return u
}

// without returns u with a pod added by With taken out again.
func (u Usage) without(cards []int, share Share) Usage {
	if !share.IsZero() && u.shared != nil {
		shared := *u.shared
		u.shared = &shared
	}
	for _, c := range cards {
		if c < 0 || c >= MaxCards {
			continue
		}
		bit := uint64(1) << c
		if share.IsZero() || u.shared == nil {
			u.used &^= bit
			u.whole &^= bit
			continue
		}
		u.shared.milli[c] -= share.Milli
		u.shared.memMiB[c] -= share.MemMiB
		if u.shared.milli[c] <= 0 && u.shared.memMiB[c] <= 0 && u.whole&bit == 0 {
			u.used &^= bit
		}
	}
	return u
}

// merged returns u with o's holdings added; neither changes.
func (u Usage) merged(o Usage) Usage {
	if o.used == 0 && o.Unknown == 0 {
		return u
	}
	out := Usage{used: u.used | o.used, whole: u.whole | o.whole, Unknown: u.Unknown + o.Unknown, unlocated: u.unlocated || o.unlocated}
	if u.shared == nil && o.shared == nil {
		// Every held card is held whole.
		out.whole = out.used
		return out
	}
	out.shared = new(cardShares)
	for _, x := range []Usage{u, o} {
		if x.shared == nil {
			out.whole |= x.used
			continue
		}
		for i := range out.shared.milli {
			out.shared.milli[i] += x.shared.milli[i]
			out.shared.memMiB[i] += x.shared.memMiB[i]
		}
	}
	return out
}
