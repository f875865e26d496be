package jobqueue

import (
	"cmp"
	"slices"
	"strings"

	"github.com/aisched/aisched/pkg/queuetree"
)

// picker takes the groups of a plan in order: each leaf queue's groups in
// queue order (queueOrder); across queues, first the groups that stay
// within their queues' guarantees, in queue order, then those that borrow,
// the one whose queue's share (weighted, dominant resource) would be the
// lowest first, compared below the two queues' lowest common ancestor
// (queuetree.Tree.Before). Groups in no queue are taken as if within a
// guarantee, so that without queues the order is queueOrder alone.
//
// What a leaf's first group is compared by is kept until it changes: a
// group admitted to a queue changes the shares of its tree only, so once
// the cluster is full a pick costs a comparison per leaf, not a share.
type picker struct {
	tree   *queuetree.Tree
	leaves []*queuetree.Node
	lists  map[*queuetree.Node][]*Group
	// demand is each group's estimated use (without card models).
	demand map[*Group]queuetree.Vec
	heads  map[*queuetree.Node]*head
	// paths are each leaf's queues from its root down.
	paths map[*queuetree.Node][]*queuetree.Node
}

// head is what a leaf's first group is compared by.
type head struct {
	g      *Group
	within bool
	// shares are, for each queue on the leaf's path from its root, its
	// share with the group admitted.
	shares []float64
	stale  bool
}

func newPicker(tree *queuetree.Tree, groups []*Group, demand map[*Group]queuetree.Vec, leafOf func(*Group) *queuetree.Node) *picker {
	p := &picker{tree: tree, lists: map[*queuetree.Node][]*Group{}, demand: demand,
		heads: map[*queuetree.Node]*head{}, paths: map[*queuetree.Node][]*queuetree.Node{}}
	for _, g := range groups {
		leaf := leafOf(g)
		if _, ok := p.lists[leaf]; !ok {
			p.leaves = append(p.leaves, leaf)
			if leaf != nil {
				var path []*queuetree.Node
				for n := leaf; n != nil; n = n.Parent() {
					path = append(path, n)
				}
				slices.Reverse(path)
				p.paths[leaf] = path
			}
		}
		p.lists[leaf] = append(p.lists[leaf], g)
	}
	slices.SortFunc(p.leaves, func(a, b *queuetree.Node) int {
		switch {
		case a == nil:
			return -1
		case b == nil:
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, l := range p.leaves {
		slices.SortStableFunc(p.lists[l], func(a, b *Group) int { return queueOrder(*a, *b) })
	}
	return p
}

// head returns what leaf's first group is compared by, nil when the leaf
// has no group left.
func (p *picker) head(leaf *queuetree.Node) *head {
	list := p.lists[leaf]
	if len(list) == 0 {
		return nil
	}
	h := p.heads[leaf]
	if h != nil && !h.stale && h.g == list[0] {
		return h
	}
	g := list[0]
	h = &head{g: g, within: true}
	if leaf != nil {
		d := p.demand[g]
		h.within = p.tree.Within(leaf, d)
		path := p.paths[leaf]
		h.shares = make([]float64, len(path))
		for i, n := range path {
			h.shares[i] = p.tree.Share(n, d)
		}
	}
	p.heads[leaf] = h
	return h
}

// charged tells the picker that leaf's queues were charged with an
// admitted group: the heads of its tree are compared anew.
func (p *picker) charged(leaf *queuetree.Node) {
	path, ok := p.paths[leaf]
	if !ok {
		return
	}
	for l, h := range p.heads {
		if other, ok := p.paths[l]; ok && other[0] == path[0] {
			h.stale = true
		}
	}
}

// next returns the next group and its leaf queue, nil when none is left.
func (p *picker) next() (*Group, *queuetree.Node) {
	var best *head
	var bestLeaf *queuetree.Node
	for _, leaf := range p.leaves {
		h := p.head(leaf)
		if h == nil {
			continue
		}
		if best != nil && p.compare(h, leaf, best, bestLeaf) >= 0 {
			continue
		}
		best, bestLeaf = h, leaf
	}
	if best == nil {
		return nil, nil
	}
	p.lists[bestLeaf] = p.lists[bestLeaf][1:]
	return best.g, bestLeaf
}

func (p *picker) compare(a *head, la *queuetree.Node, b *head, lb *queuetree.Node) int {
	switch {
	case a.within && !b.within:
		return -1
	case b.within && !a.within:
		return 1
	case a.within && b.within:
		return queueOrder(*a.g, *b.g)
	}
	// Below the lowest common ancestor: the first queue where the paths
	// part (the roots, for queues of different trees).
	pa, pb := p.paths[la], p.paths[lb]
	for k := 0; k < min(len(pa), len(pb)); k++ {
		if pa[k] != pb[k] {
			return cmp.Or(cmp.Compare(pb[k].Priority, pa[k].Priority), cmp.Compare(a.shares[k], b.shares[k]), queueOrder(*a.g, *b.g))
		}
	}
	return queueOrder(*a.g, *b.g)
}
