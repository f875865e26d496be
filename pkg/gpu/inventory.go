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
}

// Satisfies reports whether the card meets the per-card part of r.
func (c *Card) Satisfies(r Request) bool {
	if !c.Healthy || c.MemoryMiB < r.MemoryMiB || c.Cores < r.Cores {
		return false
	}
	return len(r.Models) == 0 || slices.Contains(r.Models, NormalizeModel(c.Model))
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
		})
	}
	slices.SortFunc(cards, func(a, b Card) int { return a.Index - b.Index })
	return cards
}

// FromNodeLabels returns the cards that GPU Feature Discovery labels
// describe: gpu.count identical cards of gpu.product with gpu.memory MiB.
// Cores, bandwidth and clock come from the table of known models when the
// product is in it. A node without those labels has no cards.
func FromNodeLabels(node *corev1.Node) []Card {
	l := node.Labels
	count, err := strconv.Atoi(l[GFDCountLabel])
	if err != nil || count <= 0 {
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
			Healthy: true,
		}
	}
	return cards
}

// Pick returns the indices of the r.Count cards to give to the pod: among
// the free cards that satisfy r, the smallest (least memory, then fewest
// cores, then lowest index), which keeps the large cards for the requests
// that need them. ok is false when fewer than r.Count cards qualify.
func Pick(cards []Card, used func(index int) bool, r Request) (picked []int, ok bool) {
	var fit []*Card
	for i := range cards {
		if !used(cards[i].Index) && cards[i].Satisfies(r) {
			fit = append(fit, &cards[i])
		}
	}
	if int64(len(fit)) < r.Count {
		return nil, false
	}
	slices.SortFunc(fit, func(a, b *Card) int {
		switch {
		case a.MemoryMiB != b.MemoryMiB:
			return cmpInt(a.MemoryMiB, b.MemoryMiB)
		case a.Cores != b.Cores:
			return cmpInt(a.Cores, b.Cores)
		default:
			return a.Index - b.Index
		}
	})
	for _, c := range fit[:r.Count] {
		picked = append(picked, c.Index)
	}
	slices.Sort(picked)
	return picked, true
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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
