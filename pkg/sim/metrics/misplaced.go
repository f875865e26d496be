package metrics

import "slices"

// Card is a GPU given to a pod, as far as placement quality is concerned.
type Card struct {
	// MemoryMiB is the card's memory.
	MemoryMiB int64
	// Cores is the card's CUDA core count, 0 when unknown.
	Cores int64
}

// Misplaced reports whether a GPU pod was bound to a card below what it
// asked for per card: less memory than requiredMemoryMiB or fewer cores than
// requiredCores (the fine-grained GPU experiment). It
// follows gpu.Card.Satisfies: a requirement of 0 accepts any card, and a
// card of unknown cores (0) fails a core requirement, since nobody could
// know it meets it. A pod given no cards is not misplaced: no card is too
// small.
func Misplaced(requiredMemoryMiB, requiredCores int64, cards []Card) bool {
	return slices.ContainsFunc(cards, func(c Card) bool {
		return c.MemoryMiB < requiredMemoryMiB || c.Cores < requiredCores
	})
}
