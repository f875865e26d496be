package console

import (
	"fmt"
	"net/url"
	"strings"
)

// maxFilterLen bounds each filter of the GPU map: a node name is at most
// 253 characters, and so is any namespace/name a holder filter matches
// part of.
const maxFilterLen = 253

// GPUFilter picks the cards the GPU map shows and counts: each non-empty
// field is a part, any case, that a card's node name, model or holder
// must contain.
type GPUFilter struct {
	Node  string `json:"node,omitempty"`
	Model string `json:"model,omitempty"`
	// Holder is part of the namespace/name of a pod holding the card
	// (whole or a share) or of its pod group: "team-a/" picks the cards
	// namespace team-a holds.
	Holder string `json:"holder,omitempty"`
}

// filterOf reads the filter from a request's query (node, model, holder),
// naming the parameter that is too long.
func filterOf(q url.Values) (GPUFilter, error) {
	f := GPUFilter{Node: q.Get("node"), Model: q.Get("model"), Holder: q.Get("holder")}
	for _, p := range []struct{ name, v string }{{"node", f.Node}, {"model", f.Model}, {"holder", f.Holder}} {
		if len(p.v) > maxFilterLen {
			return GPUFilter{}, fmt.Errorf("%s: %d characters, at most %d", p.name, len(p.v), maxFilterLen)
		}
	}
	f.Node, f.Model, f.Holder = strings.ToLower(f.Node), strings.ToLower(f.Model), strings.ToLower(f.Holder)
	return f, nil
}

// Select returns the nodes with the cards the filter picks, counted
// again; nodes left without a card are dropped. nodes are not changed.
func (f GPUFilter) Select(nodes []GPUNode) []GPUNode {
	if f == (GPUFilter{}) {
		return nodes
	}
	out := []GPUNode{}
	for i := range nodes {
		n := nodes[i]
		if !contains(n.Name, f.Node) {
			continue
		}
		var cards []GPUCard
		for _, c := range n.Cards {
			if contains(c.Model, f.Model) && f.holds(&c) {
				cards = append(cards, c)
			}
		}
		if len(cards) == 0 {
			continue
		}
		n.Cards = cards
		n.Counts = countCards(cards)
		out = append(out, n)
	}
	return out
}

// holds reports whether a pod or group the holder filter names holds c.
func (f GPUFilter) holds(c *GPUCard) bool {
	if f.Holder == "" {
		return true
	}
	if c.Whole != "" && contains(c.Whole, f.Holder) {
		return true
	}
	for _, s := range c.Shares {
		if contains(s.Pod, f.Holder) {
			return true
		}
	}
	for _, g := range c.Groups {
		if contains(g, f.Holder) {
			return true
		}
	}
	return false
}

// words says the filter in an error: " matching node ~ "a", holder ~ "b"".
func (f GPUFilter) words() string {
	var parts []string
	for _, p := range []struct{ name, v string }{{"node", f.Node}, {"model", f.Model}, {"holder", f.Holder}} {
		if p.v != "" {
			parts = append(parts, fmt.Sprintf("%s ~ %q", p.name, p.v))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " matching " + strings.Join(parts, ", ")
}

// contains reports whether s contains part (lower case), in any case.
func contains(s, part string) bool {
	return part == "" || strings.Contains(strings.ToLower(s), part)
}
