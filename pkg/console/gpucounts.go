package console

import (
	"slices"
	"strings"
)

// CardState is what a card is, as the GPU map counts it.
type CardState string

// The states of a card. Unlocated is never a card's State: it counts the
// free cards that pods the node agent has not located are taken to hold.
const (
	CardFree      CardState = "free"
	CardWhole     CardState = "whole"
	CardShared    CardState = "shared"
	CardUnhealthy CardState = "unhealthy"
	CardUnlocated CardState = "unlocated"
)

// CardCounts counts cards by state; Total is their sum.
type CardCounts struct {
	Total     int `json:"total"`
	Free      int `json:"free"`
	Whole     int `json:"whole"`
	Shared    int `json:"shared"`
	Unlocated int `json:"unlocated,omitempty"`
	Unhealthy int `json:"unhealthy,omitempty"`
}

func (c *CardCounts) add(s CardState) {
	c.Total++
	switch s {
	case CardFree:
		c.Free++
	case CardWhole:
		c.Whole++
	case CardShared:
		c.Shared++
	case CardUnlocated:
		c.Unlocated++
	case CardUnhealthy:
		c.Unhealthy++
	}
}

func (c *CardCounts) plus(o CardCounts) {
	c.Total += o.Total
	c.Free += o.Free
	c.Whole += o.Whole
	c.Shared += o.Shared
	c.Unlocated += o.Unlocated
	c.Unhealthy += o.Unhealthy
}

// ModelCounts counts the cards of one model.
type ModelCounts struct {
	Model  string     `json:"model"`
	Counts CardCounts `json:"counts"`
}

// countCards counts cards as their counted state.
func countCards(cards []GPUCard) CardCounts {
	var c CardCounts
	for i := range cards {
		c.add(cards[i].counted)
	}
	return c
}

// addModels adds the cards to the counts by model, kept in model order.
func addModels(models []ModelCounts, cards []GPUCard) []ModelCounts {
	for i := range cards {
		c := &cards[i]
		j, found := slices.BinarySearchFunc(models, c.Model, func(m ModelCounts, model string) int { return strings.Compare(m.Model, model) })
		if !found {
			models = slices.Insert(models, j, ModelCounts{Model: c.Model})
		}
		models[j].Counts.add(c.counted)
	}
	return models
}

// GPUSummary sums the cards shown.
type GPUSummary struct {
	Nodes  int        `json:"nodes"`
	Counts CardCounts `json:"counts"`
	// Fragmentation sums the free compute of the cards.
	Fragmentation Fragmentation `json:"fragmentation"`
	// DriftFindings sums the nodes' drift: holdings the node agents found
	// that differ from the scheduler's.
	DriftFindings int32 `json:"driftFindings"`
}

// Fragmentation is how much of the free GPU compute a whole-card pod
// cannot use: the part left on cards that shares hold in part.
type Fragmentation struct {
	// FreeMilli is all free compute, in thousandths of a card;
	// StrandedMilli the part on cards held in part.
	FreeMilli     int64 `json:"freeMilli"`
	StrandedMilli int64 `json:"strandedMilli"`
	// Percent is StrandedMilli of FreeMilli, 0 to 100.
	Percent float64 `json:"percent"`
}

// summarize sums the nodes' cards.
func summarize(nodes []GPUNode) GPUSummary {
	s := GPUSummary{Nodes: len(nodes)}
	f := &s.Fragmentation
	for i := range nodes {
		n := &nodes[i]
		s.Counts.plus(n.Counts)
		s.DriftFindings += n.DriftFindings
		for j := range n.Cards {
			c := &n.Cards[j]
			if !c.Healthy {
				continue
			}
			f.FreeMilli += c.FreeMilli
			if c.State == CardShared {
				f.StrandedMilli += c.FreeMilli
			}
		}
	}
	if f.FreeMilli > 0 {
		f.Percent = float64(f.StrandedMilli) * 100 / float64(f.FreeMilli)
	}
	return s
}
