package gpu

import (
	"fmt"
	"slices"
	"strings"
)

// Shortfall says why the cards of one node cannot serve r, as the end of
// a sentence that starts with "node(s) " (the scheduler counts nodes per
// reason: "4 node(s) have no GPU with gpu.aisched.io/memory="80Gi": the
// largest has 40 GiB"). It names the constraint no card meets with the
// pod's key and value and the closest card the node has; or, when some
// cards meet the request but fewer than it asks, how many do. It looks at
// what the cards are, never at what pods hold: "" means enough cards meet
// r, whether or not they are free.
func (r Request) Shortfall(cards []Card) string {
	if len(cards) == 0 {
		return "have no GPUs"
	}
	if int64(len(cards)) < r.Count {
		return fmt.Sprintf("have %d GPUs, fewer than the pod's %d", len(cards), r.Count)
	}
	var capable int64
	for i := range cards {
		if r.serves(&cards[i]) {
			capable++
		}
	}
	if capable >= r.Count {
		return ""
	}
	words := r.words()
	if capable > 0 {
		return fmt.Sprintf("have %d GPUs that meet %s, fewer than the pod's %d", capable, words.all("healthy"), r.Count)
	}
	if why := r.unmet(cards, words); why != "" {
		return why
	}
	return "have no GPU that meets " + words.all("healthy") + " at once"
}

// serves reports whether the card can serve r: it meets the per-card
// constraints and, for a share of memory, has that much.
func (r Request) serves(c *Card) bool {
	return c.Satisfies(r) && c.MemoryMiB >= r.MemMiBOn(c)
}

func (r Request) words() named {
	if r.named == nil {
		return named{}
	}
	return *r.named
}

// all is every constraint the pod named, joined with "and"; what when
// it named none.
func (n named) all(what string) string {
	var parts []string
	for _, w := range []string{n.memory, n.cores, n.share, n.models, n.excludeModels, n.uuids, n.excludeUUIDs} {
		if w != "" {
			parts = append(parts, w)
		}
	}
	if len(parts) == 0 {
		return what
	}
	return strings.Join(parts, " and ")
}

// unmet names the one constraint that no card of the node meets on its
// own, with the closest card; "" when each is met by some card (only
// their combination is not) or the cards are all unhealthy.
func (r Request) unmet(cards []Card, words named) string {
	healthy, maxMem, maxCores := healthyOf(cards)
	if len(healthy) == 0 {
		return fmt.Sprintf("have no healthy GPU (%d unhealthy)", len(cards))
	}
	// Each check asks one constraint alone of the healthy cards.
	alone := func(only Request) bool {
		return slices.ContainsFunc(healthy, func(c Card) bool { return only.serves(&c) })
	}
	switch {
	case r.MemoryMiB > maxMem:
		return fmt.Sprintf("have no GPU with %s: the largest has %s", orDefault(words.memory, MemoryAnnotation), FormatMiB(maxMem))
	case r.GPUMemMiB > maxMem:
		return fmt.Sprintf("have no GPU with %s: the largest has %s", orDefault(words.share, GPUMemAnnotation), FormatMiB(maxMem))
	case r.Cores > maxCores:
		return fmt.Sprintf("have no GPU with %s: the most has %d cores", orDefault(words.cores, CoresAnnotation), maxCores)
	case len(r.Models) > 0 && !alone(Request{Models: r.Models}):
		return fmt.Sprintf("have no GPU of %s: their cards are %s", orDefault(words.models, ModelsAnnotation), models(healthy))
	case len(r.ExcludeModels) > 0 && !alone(Request{ExcludeModels: r.ExcludeModels}):
		return fmt.Sprintf("have only GPUs that %s refuses: %s", words.excludeModels, models(healthy))
	case len(r.UUIDs) > 0 && !alone(Request{UUIDs: r.UUIDs}):
		return fmt.Sprintf("have no GPU that %s names", words.uuids)
	case len(r.ExcludeUUIDs) > 0 && !alone(Request{ExcludeUUIDs: r.ExcludeUUIDs}):
		return fmt.Sprintf("have only GPUs that %s refuses", words.excludeUUIDs)
	}
	return ""
}

// healthyOf is the healthy cards of cards, with the most memory and
// cores of one.
func healthyOf(cards []Card) (healthy []Card, maxMem, maxCores int64) {
	for _, c := range cards {
		if c.Healthy {
			healthy = append(healthy, c)
			maxMem, maxCores = max(maxMem, c.MemoryMiB), max(maxCores, c.Cores)
		}
	}
	return healthy, maxMem, maxCores
}

func orDefault(words, key string) string {
	if words == "" {
		return key
	}
	return words
}

// models lists the distinct models of cards, at most three.
func models(cards []Card) string {
	var out []string
	for _, c := range cards {
		if !slices.Contains(out, c.Model) {
			out = append(out, c.Model)
		}
	}
	if len(out) > 3 {
		return strings.Join(out[:3], ", ") + fmt.Sprintf(" and %d more", len(out)-3)
	}
	return strings.Join(out, ", ")
}

// FormatMiB writes an amount of card memory for people: "40 GiB" when it
// is whole GiB, else "40536 MiB".
func FormatMiB(mib int64) string {
	if mib%1024 == 0 {
		return fmt.Sprintf("%d GiB", mib/1024)
	}
	return fmt.Sprintf("%d MiB", mib)
}
