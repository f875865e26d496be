package queuetree

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Unlimited marks an amount with no bound (a limit or a lending limit not
// set).
const Unlimited = -1

// Amounts are a queue's amounts of one resource, in the resource's base
// unit (thousandths of a CPU, bytes, thousandths of a card).
type Amounts struct {
	// Guaranteed is what the queue gets whenever its work asks for it.
	Guaranteed int64
	// Limit is the most it may use; Unlimited for none.
	Limit int64
	// Lending is the most of its unused guarantee it lends; Unlimited for
	// all of it.
	Lending int64
	// Weight is its part of the capacity beyond the guarantees, >= 1.
	Weight int64
}

// Spec is one queue in any form (aisched's Queue, Volcano's, KAI's),
// translated into the one model.
type Spec struct {
	// Name is the queue's name in the tree, unique across forms:
	// aisched's queues by their name, peers' with a prefix (volcano/q,
	// kai/q).
	Name string
	// Object is how messages name it: "aischedqueue team-a", "Volcano
	// Queue team-a".
	Object string
	// Parent is the parent's Name, "" for a top-level queue.
	Parent string
	// Default: the queue of work that names none (of its form).
	Default bool
	// Resources are its amounts by resource name; resources not listed
	// are not accounted for the queue.
	Resources map[string]Amounts
	// HalfLife, when positive, counts decayed past use against the
	// queue's share of the capacity beyond guarantees.
	HalfLife time.Duration
	// Priority orders queues for the capacity beyond guarantees before
	// their shares do (KAI's over-quota priority); 0 for most.
	Priority int32
	// NotReclaimable: what the queue borrowed is never taken back
	// (Volcano's reclaimable: false).
	NotReclaimable bool
	// History is the decayed past use by resource name, as last recorded.
	History map[string]int64
}

// Node is one queue of a Tree.
type Node struct {
	Spec
	parent   *Node
	children []*Node
	depth    int
	// invalid says why the queue cannot hold work ("" when it can).
	invalid string

	listed                []bool
	guaranteed, limit     Vec
	lending, weight       Vec
	used, waiting, fair   Vec
	history               Vec
	admitted, waitingWork int
}

// Parent returns the node's parent, nil for a top-level queue.
func (n *Node) Parent() *Node { return n.parent }

// Children returns the node's children, by name.
func (n *Node) Children() []*Node { return n.children }

// Leaf reports whether the queue has no children: only leaves hold work.
func (n *Node) Leaf() bool { return len(n.children) == 0 }

// Invalid says why the queue cannot hold work, "" when it can.
func (n *Node) Invalid() string { return n.invalid }

// Tree is the queues as one model: their amounts, the cluster's capacity,
// and what their work uses and waits for. It is built for one pass of the
// job queue and is not safe for concurrent use.
type Tree struct {
	// names are the resources accounted, in index order.
	names []string
	index map[string]int
	nodes map[string]*Node
	roots []*Node
	// capacity is the cluster's, by resource index.
	capacity Vec
	// defaults are the default queue of each form, by form prefix.
	defaults map[string]*Node
}

// Problem is what is wrong with one queue of a tree.
type Problem struct {
	Queue string
	Field string
	Msg   string
}

func (p Problem) Error() string { return fmt.Sprintf("%s: %s: %s", p.Queue, p.Field, p.Msg) }

// Build makes a tree of specs over a cluster of capacity (by resource
// name). Queues whose parent is missing, that are in a cycle, or whose
// children are guaranteed more than they are, are invalid: they (and
// their descendants) hold no work, and Problems name the field.
func Build(specs []Spec, capacity map[string]int64) (*Tree, []Problem) {
	t := &Tree{index: map[string]int{}, nodes: make(map[string]*Node, len(specs)), defaults: map[string]*Node{}}
	for _, s := range specs {
		for name := range s.Resources {
			t.resource(name)
		}
	}
	slices.Sort(t.names)
	for i, name := range t.names {
		t.index[name] = i
	}
	t.capacity = make(Vec, len(t.names))
	for name, c := range capacity {
		if i, ok := t.index[name]; ok {
			t.capacity[i] = c
		}
	}
	sorted := slices.Clone(specs)
	slices.SortFunc(sorted, func(a, b Spec) int { return strings.Compare(a.Name, b.Name) })
	for _, s := range sorted {
		if _, dup := t.nodes[s.Name]; dup {
			continue
		}
		t.nodes[s.Name] = t.newNode(s)
	}
	var problems []Problem
	for _, s := range sorted {
		n := t.nodes[s.Name]
		if s.Parent == "" {
			t.roots = append(t.roots, n)
			continue
		}
		p, ok := t.nodes[s.Parent]
		if !ok {
			n.invalid = fmt.Sprintf("parent %q does not exist", s.Parent)
			problems = append(problems, Problem{Queue: s.Object, Field: "spec.parent", Msg: n.invalid})
			t.roots = append(t.roots, n)
			continue
		}
		n.parent = p
		p.children = append(p.children, n)
	}
	// A cycle has no root: every queue not reached from one is in a cycle
	// or below one.
	reached := map[*Node]bool{}
	var walk func(n *Node, depth int)
	walk = func(n *Node, depth int) {
		reached[n] = true
		n.depth = depth
		for _, c := range n.children {
			if n.invalid != "" && c.invalid == "" {
				c.invalid = fmt.Sprintf("its parent %s: %s", n.Name, n.invalid)
			}
			walk(c, depth+1)
		}
	}
	for _, r := range t.roots {
		walk(r, 0)
	}
	for _, s := range sorted {
		n := t.nodes[s.Name]
		if !reached[n] {
			n.invalid = "spec.parent: the queue is in a cycle of parents"
			n.parent, n.children = nil, nil
			problems = append(problems, Problem{Queue: s.Object, Field: "spec.parent", Msg: "the queue is in a cycle of parents"})
			t.roots = append(t.roots, n)
		}
	}
	for _, s := range sorted {
		for name, a := range s.Resources {
			if a.Limit != Unlimited && a.Limit < a.Guaranteed {
				problems = append(problems, Problem{Queue: s.Object, Field: "spec.resources[" + name + "].limit",
					Msg: fmt.Sprintf("%s is below guaranteed %s; the queue is limited to %s", Format(name, a.Limit), Format(name, a.Guaranteed), Format(name, a.Limit))})
			}
		}
	}
	for _, s := range sorted {
		n := t.nodes[s.Name]
		if len(n.children) == 0 || n.invalid != "" {
			continue
		}
		for i, name := range t.names {
			if !n.listed[i] {
				continue
			}
			var sum int64
			for _, c := range n.children {
				sum += c.guaranteed[i]
			}
			if sum > n.guaranteed[i] {
				msg := fmt.Sprintf("its children are guaranteed %s of %s, more than its own %s", Format(name, sum), name, Format(name, n.guaranteed[i]))
				problems = append(problems, Problem{Queue: s.Object, Field: "spec.resources[" + name + "].guaranteed", Msg: msg})
			}
		}
	}
	for _, s := range sorted {
		n := t.nodes[s.Name]
		if !s.Default || n.invalid != "" {
			continue
		}
		form := formOf(s.Name)
		if d, ok := t.defaults[form]; ok {
			problems = append(problems, Problem{Queue: s.Object, Field: "spec.default",
				Msg: fmt.Sprintf("%s is the default queue already (the first by name)", d.Object)})
			continue
		}
		t.defaults[form] = n
	}
	return t, problems
}

// formOf is the form prefix of a queue name: "volcano/" for
// "volcano/team-a", "" for aisched's own.
func formOf(name string) string {
	if i := strings.IndexByte(name, '/'); i >= 0 {
		return name[:i+1]
	}
	return ""
}

func (t *Tree) resource(name string) {
	if _, ok := t.index[name]; !ok {
		t.index[name] = len(t.names)
		t.names = append(t.names, name)
	}
}

func (t *Tree) newNode(s Spec) *Node {
	k := len(t.names)
	n := &Node{Spec: s, listed: make([]bool, k),
		guaranteed: make(Vec, k), limit: make(Vec, k), lending: make(Vec, k), weight: make(Vec, k),
		used: make(Vec, k), waiting: make(Vec, k), fair: make(Vec, k), history: make(Vec, k)}
	for i, name := range t.names {
		a, ok := s.Resources[name]
		n.limit[i], n.lending[i], n.weight[i] = Unlimited, Unlimited, 1
		if ok {
			n.listed[i] = true
			n.guaranteed[i] = max(a.Guaranteed, 0)
			n.limit[i], n.lending[i], n.weight[i] = a.Limit, a.Lending, max(a.Weight, 1)
			if a.Limit != Unlimited && a.Limit < n.guaranteed[i] {
				n.guaranteed[i] = max(a.Limit, 0)
			}
		}
		n.history[i] = s.History[name]
	}
	return n
}

// Names are the resources the tree accounts, in index order.
func (t *Tree) Names() []string { return t.names }

// Empty reports whether the tree has no queue: then nothing is queued by
// team.
func (t *Tree) Empty() bool { return len(t.nodes) == 0 }

// Queue returns the queue named name, nil when there is none.
func (t *Tree) Queue(name string) *Node { return t.nodes[name] }

// Default returns the default queue of a form ("" for aisched's, or a
// peer's prefix such as "kai/"), nil when there is none.
func (t *Tree) Default(form string) *Node { return t.defaults[form] }

// Queues returns every queue, parents before children, by name.
func (t *Tree) Queues() []*Node {
	var out []*Node
	var walk func(n *Node)
	walk = func(n *Node) {
		out = append(out, n)
		for _, c := range n.children {
			walk(c)
		}
	}
	for _, r := range t.roots {
		walk(r)
	}
	return out
}

// Capacity returns the cluster's capacity of the tree's resources.
func (t *Tree) Capacity() Vec { return t.capacity }

// path calls f for n and each of its ancestors, leaf first.
func path(n *Node, f func(*Node)) {
	for ; n != nil; n = n.parent {
		f(n)
	}
}

// Charge counts use d of admitted or running work in leaf and its
// ancestors.
func (t *Tree) Charge(leaf *Node, d Vec) {
	path(leaf, func(n *Node) { n.used.Add(d) })
}

// Uncharge takes back a Charge.
func (t *Tree) Uncharge(leaf *Node, d Vec) {
	path(leaf, func(n *Node) { n.used.Sub(d) })
}

// Wait counts demand d of waiting work in leaf and its ancestors (for the
// fair shares).
func (t *Tree) Wait(leaf *Node, d Vec) {
	path(leaf, func(n *Node) { n.waiting.Add(d) })
}

// CountWork counts one admitted or one waiting work item of leaf for the
// status.
func (t *Tree) CountWork(leaf *Node, admitted bool) {
	path(leaf, func(n *Node) {
		if admitted {
			n.admitted++
		} else {
			n.waitingWork++
		}
	})
}

// Within reports whether work of leaf using d stays within the guarantee
// of every queue on its path, for every resource the queue lists that d
// uses.
func (t *Tree) Within(leaf *Node, d Vec) bool {
	ok := true
	path(leaf, func(n *Node) {
		for i, v := range d {
			if v > 0 && n.listed[i] && n.used[i]+v > n.guaranteed[i] {
				ok = false
			}
		}
	})
	return ok
}

// Claims reports whether work of leaf using d takes back guaranteed
// capacity: it stays Within and asks for a resource some queue on its
// path is guaranteed.
func (t *Tree) Claims(leaf *Node, d Vec) bool {
	if !t.Within(leaf, d) {
		return false
	}
	claims := false
	path(leaf, func(n *Node) {
		for i, v := range d {
			if v > 0 && n.listed[i] && n.guaranteed[i] > 0 {
				claims = true
			}
		}
	})
	return claims
}

// OverLimit returns the first queue on leaf's path whose limit work using
// d would pass, and the resource; nil when none.
func (t *Tree) OverLimit(leaf *Node, d Vec) (*Node, int) {
	var over *Node
	at := -1
	path(leaf, func(n *Node) {
		if over != nil {
			return
		}
		for i, v := range d {
			if v > 0 && n.listed[i] && n.limit[i] != Unlimited && n.used[i]+v > n.limit[i] {
				over, at = n, i
				return
			}
		}
	})
	return over, at
}

// Share is the queue's dominant share of the capacity beyond its
// guarantee, weighted, with extra added to its use: the largest, over
// the resources it lists, of what it borrows (and, with a half-life, what
// it borrowed lately) over the cluster's capacity and its weight.
func (t *Tree) Share(n *Node, extra Vec) float64 {
	var share float64
	for i := range t.names {
		if !n.listed[i] || t.capacity[i] <= 0 {
			continue
		}
		use := n.used[i]
		if extra != nil {
			use += extra[i]
		}
		borrowed := max(use-n.guaranteed[i], 0)
		if n.HalfLife > 0 {
			borrowed += max(n.history[i]-n.guaranteed[i], 0)
		}
		s := float64(borrowed) / float64(t.capacity[i]) / float64(n.weight[i])
		share = max(share, s)
	}
	return share
}

// below returns the ancestors of a and b just below their lowest common
// ancestor (the queues whose shares decide between them), or a and b
// themselves when they are top-level queues of different trees.
func below(a, b *Node) (*Node, *Node) {
	for a.depth > b.depth {
		a = a.parent
	}
	for b.depth > a.depth {
		b = b.parent
	}
	for a.parent != b.parent {
		a, b = a.parent, b.parent
	}
	return a, b
}

// Before orders two borrowing works for the capacity beyond guarantees:
// work of leaf a using da before work of leaf b using db when, below
// their lowest common ancestor, a's side has the higher over-quota
// priority, or the lower share after admission. 0 when they tie (the
// same leaf, or equal shares).
func (t *Tree) Before(a *Node, da Vec, b *Node, db Vec) int {
	if a == b {
		return 0
	}
	ca, cb := below(a, b)
	if ca == cb {
		return 0
	}
	if c := cmp.Compare(cb.Priority, ca.Priority); c != 0 {
		return c
	}
	return cmp.Compare(t.Share(ca, da), t.Share(cb, db))
}

// Distance is how far apart two queues are in the tree: 1 for siblings,
// 2 for cousins, ...; the depth of the deeper plus one when they share no
// ancestor. Reclaim takes from the nearest first.
func Distance(a, b *Node) int {
	if a == b {
		return 0
	}
	ca, cb := below(a, b)
	if ca.parent == nil && ca != cb {
		return max(a.depth, b.depth) + 1 + 1
	}
	return a.depth - ca.depth + 1
}

// Lendable reports how much of resource i queue n has beyond its use
// that it lends: its unused guarantee, capped by its lending limit.
func (n *Node) Lendable(i int) int64 {
	unused := max(n.guaranteed[i]-n.used[i], 0)
	if n.lending[i] != Unlimited {
		unused = min(unused, n.lending[i])
	}
	return unused
}

// Borrowed is what the queue uses of resource i beyond its guarantee.
func (n *Node) Borrowed(i int) int64 { return max(n.used[i]-n.guaranteed[i], 0) }

// Used is what the queue's admitted and running work uses.
func (n *Node) Used() Vec { return n.used }

// Guaranteed is the queue's guarantee by resource index.
func (n *Node) Guaranteed() Vec { return n.guaranteed }

// Listed reports whether the queue accounts resource i.
func (n *Node) Listed(i int) bool { return n.listed[i] }

// FairShare is the queue's fair share by resource index (FairShares).
func (n *Node) FairShare() Vec { return n.fair }

// Work returns the admitted and waiting work items counted (CountWork).
func (n *Node) Work() (admitted, waiting int) { return n.admitted, n.waitingWork }

// History is the queue's decayed past use by resource index.
func (n *Node) History() Vec { return n.history }

// Reclaimable reports whether work of victim's queue may be taken back for
// work of taker's queue: the victim's queue is reclaimable and, with the
// victim's use v gone, every queue on its path that lists a resource of v
// still uses at least its guarantee (nothing is taken within a
// guarantee), up to their common ancestor.
func (t *Tree) Reclaimable(victim *Node, v Vec, taker *Node) bool {
	if victim == nil || victim == taker {
		return false
	}
	ok := false
	for n := victim; n != nil; n = n.parent {
		if n.NotReclaimable {
			return false
		}
		if isAncestor(n, taker) {
			break
		}
		for i, x := range v {
			if x <= 0 || !n.listed[i] {
				continue
			}
			if n.used[i]-x < n.guaranteed[i] {
				return false
			}
			ok = true
		}
	}
	return ok
}

// isAncestor reports whether a is b or an ancestor of b.
func isAncestor(a, b *Node) bool {
	for ; b != nil; b = b.parent {
		if a == b {
			return true
		}
	}
	return false
}

// Limits is the queue's limit by resource index (Unlimited for none).
func (n *Node) Limits() Vec { return n.limit }

// Lender is a queue whose unused guarantee another borrows, and how much.
type Lender struct {
	Queue  *Node
	Amount int64
}

// Lenders says whom queue n borrows resource i from: what it uses beyond
// its guarantee is counted against the unused guarantees of the other
// queues (as far as they lend), the nearest in the tree first. What no
// unused guarantee covers comes from capacity nobody is guaranteed, and
// has no lender.
func (t *Tree) Lenders(n *Node, i int) []Lender {
	left := n.Borrowed(i)
	if left <= 0 {
		return nil
	}
	var others []*Node
	for _, o := range t.Queues() {
		if o != n && !isAncestor(o, n) && !isAncestor(n, o) && o.listed[i] && o.Lendable(i) > 0 {
			others = append(others, o)
		}
	}
	slices.SortStableFunc(others, func(a, b *Node) int { return cmp.Compare(Distance(n, a), Distance(n, b)) })
	var out []Lender
	for _, o := range others {
		if left <= 0 {
			break
		}
		amount := min(o.Lendable(i), left)
		out = append(out, Lender{Queue: o, Amount: amount})
		left -= amount
	}
	return out
}
