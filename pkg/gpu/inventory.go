package gpu

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
)

// NVIDIA GPU Feature Discovery labels, the inventory of nodes that publish
// no GPUInventory.
const (
	GFDPresentLabel      = "nvidia.com/gpu.present"
	GFDProductLabel      = "nvidia.com/gpu.product"
	GFDCountLabel        = "nvidia.com/gpu.count"
	GFDMemoryLabel       = "nvidia.com/gpu.memory"
	GFDComputeMajorLabel = "nvidia.com/gpu.compute.major"
	GFDComputeMinorLabel = "nvidia.com/gpu.compute.minor"
)

// Card is one GPU of a node.
type Card struct {
	Index     int
	UUID      string
	Model     string
	MemoryMiB int64
	// Cores is the number of CUDA cores, 0 when unknown.
	Cores int64
	// ComputeCapability is major + minor/10 (8.0, 7.5), 0 when unknown.
	ComputeCapability float64
	// BandwidthGBps is the memory bandwidth, 0 when unknown.
	BandwidthGBps int64
	// ClockMHz is the maximum SM clock, 0 when unknown.
	ClockMHz int64
	Healthy  bool
	// model is NormalizeModel(Model), set by the constructors.
	model string
}

// Satisfies reports whether the card meets the per-card part of r. A
// requested model matches a card whose model contains it as whole words:
// "A100" and "a100-sxm4" match "NVIDIA-A100-SXM4-40GB", "A10" does not.
func (c *Card) Satisfies(r Request) bool {
	if !c.Healthy || c.MemoryMiB < r.MemoryMiB || c.Cores < r.Cores {
		return false
	}
	if len(r.UUIDs) > 0 && !slices.Contains(r.UUIDs, c.UUID) || len(r.ExcludeUUIDs) > 0 && slices.Contains(r.ExcludeUUIDs, c.UUID) {
		return false
	}
	if len(r.Models) == 0 && len(r.ExcludeModels) == 0 {
		return true
	}
	model := c.model
	if model == "" {
		model = NormalizeModel(c.Model)
	}
	matches := func(m string) bool { return containsWords(model, m) }
	return (len(r.Models) == 0 || slices.ContainsFunc(r.Models, matches)) && !slices.ContainsFunc(r.ExcludeModels, matches)
}

// containsWords reports whether the dash-separated words of needle occur
// in a row in those of hay; both normalized. It does not allocate.
func containsWords(hay, needle string) bool {
	if needle == "" {
		return false
	}
	for i := 0; i+len(needle) <= len(hay); {
		j := strings.Index(hay[i:], needle)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(needle)
		if (start == 0 || hay[start-1] == '-') && (end == len(hay) || hay[end] == '-') {
			return true
		}
		i = start + 1
	}
	return false
}

// FromInventory returns the cards of a GPUInventory, by index.
func FromInventory(inv *aischedv1alpha1.GPUInventory) []Card {
	cards := make([]Card, 0, len(inv.Spec.GPUs))
	for _, g := range inv.Spec.GPUs {
		cards = append(cards, Card{
			Index:             int(g.Index),
			UUID:              g.UUID,
			Model:             g.Model,
			MemoryMiB:         g.MemoryMiB,
			Cores:             g.CUDACores,
			ComputeCapability: parseCapability(g.ComputeCapability),
			BandwidthGBps:     g.MemoryBandwidthGBps,
			ClockMHz:          g.MaxClockMHz,
			Healthy:           g.Health != aischedv1alpha1.GPUUnhealthy,
			model:             NormalizeModel(g.Model),
		})
	}
	slices.SortFunc(cards, func(a, b Card) int { return a.Index - b.Index })
	return cards
}

// FromNodeLabels returns the cards that GPU Feature Discovery labels
// describe: gpu.count identical cards of gpu.product with gpu.memory MiB.
// Cores, bandwidth and clock come from the table of known models when the
// product is in it. A node without those labels, or with a count above
// 64 (no node has more; the labels are wrong), has no cards.
func FromNodeLabels(node *corev1.Node) []Card {
	l := node.Labels
	count, err := strconv.Atoi(l[GFDCountLabel])
	if err != nil || count <= 0 || count > maxCount {
		return nil
	}
	mem, err := strconv.ParseInt(l[GFDMemoryLabel], 10, 64)
	if err != nil || mem <= 0 {
		return nil
	}
	model := l[GFDProductLabel]
	spec, _ := LookupModel(model)
	cc := spec.ComputeCapability
	if major, err := strconv.Atoi(l[GFDComputeMajorLabel]); err == nil {
		minor, _ := strconv.Atoi(l[GFDComputeMinorLabel])
		cc = float64(major) + float64(minor)/10
	}
	cards := make([]Card, count)
	for i := range cards {
		cards[i] = Card{
			Index: i, Model: model, MemoryMiB: mem, Cores: spec.Cores,
			ComputeCapability: cc, BandwidthGBps: spec.BandwidthGBps, ClockMHz: spec.ClockMHz,
			Healthy: true, model: NormalizeModel(model),
		}
	}
	return cards
}

// CardByIndex returns the card with the given index, nil when none has it.
func CardByIndex(cards []Card, index int) *Card {
	if index >= 0 && index < len(cards) && cards[index].Index == index {
		return &cards[index]
	}
	for i := range cards {
		if cards[i].Index == index {
			return &cards[i]
		}
	}
	return nil
}

func parseCapability(s string) float64 {
	major, minor, ok := strings.Cut(s, ".")
	if !ok {
		return 0
	}
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil {
		return 0
	}
	return float64(ma) + float64(mi)/10
}

// FormatIndices writes card indices as the assigned annotation holds them: "0,3".
func FormatIndices(indices []int) string {
	parts := make([]string, len(indices))
	for i, idx := range indices {
		parts[i] = strconv.Itoa(idx)
	}
	return strings.Join(parts, ",")
}

// ParseIndices reads the assigned annotation; ok is false when it is malformed.
func ParseIndices(s string) (indices []int, ok bool) {
	if s == "" {
		return nil, false
	}
	for _, p := range strings.Split(s, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || i < 0 || i >= maxCount {
			return nil, false
		}
		indices = append(indices, i)
	}
	return indices, true
}

// Set is the cards of a node with the facts a scheduler reads for every
// node in every cycle, computed once.
type Set struct {
	// Cards are the cards by index.
	Cards []Card
	// First is a copy of Cards[0], kept beside the other facts so that the
	// common case (Uniform) reads one object.
	First Card
	// Uniform is true when every card is healthy and of one model, memory
	// and core count, so that one card (First) answers for all.
	Uniform bool
	// MaxMemoryMiB and MaxCores are the largest values among the cards.
	MaxMemoryMiB, MaxCores int64
}

// NewSet returns the Set of cards; nil when there are none.
func NewSet(cards []Card) *Set {
	if len(cards) == 0 {
		return nil
	}
	s := &Set{Cards: cards, First: cards[0], Uniform: true}
	first := cards[0]
	for _, c := range cards {
		s.MaxMemoryMiB = max(s.MaxMemoryMiB, c.MemoryMiB)
		s.MaxCores = max(s.MaxCores, c.Cores)
		if !c.Healthy || c.Model != first.Model || c.MemoryMiB != first.MemoryMiB || c.Cores != first.Cores {
			s.Uniform = false
		}
	}
	return s
}

// Interchangeable reports whether, for request r, any card stands for any
// other on a node offering allocatable cards: all are alike and healthy
// and all are offered, and r names no card by UUID, so r fits all or none
// of them, and the free ones are the allocatable ones that no pod requests
// (every pod holding a card requests it). Schedulers then need not know
// which pod holds which card.
func (s *Set) Interchangeable(allocatable int64, r Request) bool {
	return s.Uniform && int64(len(s.Cards)) == allocatable && len(r.UUIDs) == 0 && len(r.ExcludeUUIDs) == 0
}

// Len is the number of cards; 0 for a nil Set.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.Cards)
}
