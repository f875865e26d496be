package console

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/aisched/aisched/pkg/topology"
)

// outsideMark stands, in a domain's ID, for the level its nodes are
// outside; no label value holds it.
const outsideMark = "*"

// Domain is a domain of a topology's level with its cards counted, or the
// nodes outside a level.
type Domain struct {
	// ID names the domain: its nodes' values of the levels down to its
	// own, coarsest first, joined by "/" ("b1/r2"), with "*" for the level
	// its nodes are outside ("b1/*": the nodes of block b1 without a rack;
	// "*": the nodes without a block).
	ID string `json:"id"`
	// Level is the level's short name ("rack").
	Level string `json:"level"`
	// Name is the domain's value ("r2"), or "outside rack".
	Name    string `json:"name"`
	Outside bool   `json:"outside,omitempty"`
	// Nodes counts its GPU nodes; Counts its cards, and Models by model.
	Nodes  int           `json:"nodes"`
	Counts CardCounts    `json:"counts"`
	Models []ModelCounts `json:"models"`
	// Domains are the domains of the next level inside it: none at the
	// finest level or outside a level, where a domain opens into its
	// nodes.
	Domains []Domain `json:"domains,omitempty"`
}

// MapLevel is a level of the topology the map is grouped by.
type MapLevel struct {
	Name  string `json:"name"`
	Label string `json:"label"`
}

// levelsOf lists the levels of t.
func levelsOf(t *topology.Topology) []MapLevel {
	out := make([]MapLevel, 0, len(t.Levels))
	for _, l := range t.Levels {
		out = append(out, MapLevel{Name: l.Name, Label: l.Label})
	}
	return out
}

// domainPath is the IDs of the domains that hold node, coarsest first,
// down to the finest level or to the first level it is outside. t is a
// topology of node labels (topology.OfAPI).
func domainPath(t *topology.Topology, node *corev1.Node) []string {
	path := make([]string, 0, len(t.Levels))
	for i := range t.Levels {
		d, ok := t.Domain(node, i)
		if !ok {
			if i == 0 {
				return append(path, outsideMark)
			}
			return append(path, path[i-1]+"/"+outsideMark)
		}
		path = append(path, d)
	}
	return path
}

// GroupGPUs groups the nodes by the domains of t, level by level, with
// their cards counted; within a level the domains come in name order, the
// nodes outside it last.
func GroupGPUs(t *topology.Topology, nodes []GPUNode) []Domain {
	paths := make([][]string, len(nodes))
	all := make([]int, len(nodes))
	for i := range nodes {
		paths[i], all[i] = domainPath(t, nodes[i].node), i
	}
	return groupAt(t, nodes, paths, all, 0)
}

// groupAt groups the nodes of members (indices into nodes and paths) by
// their domain at level depth.
func groupAt(t *topology.Topology, nodes []GPUNode, paths [][]string, members []int, depth int) []Domain {
	byID := map[string][]int{}
	var ids []string
	for _, k := range members {
		id := paths[k][depth]
		if _, ok := byID[id]; !ok {
			ids = append(ids, id)
		}
		byID[id] = append(byID[id], k)
	}
	slices.SortFunc(ids, func(a, b string) int {
		if oa, ob := isOutside(a), isOutside(b); oa != ob {
			if oa {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	out := make([]Domain, 0, len(ids))
	for _, id := range ids {
		d := Domain{ID: id, Level: t.Levels[depth].Name, Name: id[strings.LastIndexByte(id, '/')+1:], Outside: isOutside(id)}
		if d.Outside {
			d.Name = "outside " + d.Level
		}
		for _, k := range byID[id] {
			d.Nodes++
			d.Counts.plus(nodes[k].Counts)
			d.Models = addModels(d.Models, nodes[k].Cards)
		}
		if !d.Outside && depth+1 < len(t.Levels) {
			d.Domains = groupAt(t, nodes, paths, byID[id], depth+1)
		}
		out = append(out, d)
	}
	return out
}

func isOutside(id string) bool { return strings.HasSuffix(id, outsideMark) }

// NodesIn returns the nodes inside the domain id of t.
func NodesIn(t *topology.Topology, nodes []GPUNode, id string) []GPUNode {
	var out []GPUNode
	for i := range nodes {
		if slices.Contains(domainPath(t, nodes[i].node), id) {
			out = append(out, nodes[i])
		}
	}
	return out
}
