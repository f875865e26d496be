package gpuledger

import (
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/aisched/aisched/pkg/gpu"
)

// NodeGPUs is a node's cards and what is held of them, as a value on which
// pods are placed on paper exactly as GPUFit places them (Usage.Pick): the
// job queue's admission plan and reservation, and Coscheduling's
// whole-group check, count cards here, shares included, so that no part of
// aisched counts cards another way. The zero value is a node without
// cards.
type NodeGPUs struct {
	// Cards are the node's cards; nil when aisched knows of none (no
	// GPUInventory and no usable labels), as GPUFit sees it.
	Cards *gpu.Set
	// Usage is what pods hold.
	Usage Usage
}

// NodeGPUs returns node's cards and what pods, the pods bound to it, which
// request requested whole cards (UsageOf), hold of them.
func (s *State) NodeGPUs(node *corev1.Node, pods []*corev1.Pod, requested int64) NodeGPUs {
	return NodeGPUs{Cards: s.Cards(node), Usage: s.UsageOf(node.Name, pods, requested)}
}

// NodeGPUsOf returns the cards of a NodeInfo's node and what its pods hold.
func (s *State) NodeGPUsOf(ni fwk.NodeInfo) NodeGPUs {
	return NodeGPUs{Cards: s.Cards(ni.Node()), Usage: s.Usage(ni, "", 0)}
}

// Fits reports whether the node has room for r: enough free whole cards
// that meet it (cards held by pods aisched did not place count as taken),
// or enough cards with r's share left. A request without GPUs always fits.
func (n NodeGPUs) Fits(r gpu.Request) bool {
	if r.Count == 0 {
		return true
	}
	if n.Cards == nil {
		return false
	}
	_, free := n.Usage.Fit(n.Cards.Cards, r)
	return free >= r.Count
}

// Take places r on the node as GPUFit would and returns the cards it got;
// ok is false, and nothing changes, when r does not fit.
func (n *NodeGPUs) Take(r gpu.Request) (cards []int, ok bool) {
	if r.Count == 0 {
		return nil, true
	}
	if !n.Fits(r) {
		return nil, false
	}
	cards, ok = n.Usage.Pick(n.Cards.Cards, r, nil)
	if !ok {
		return nil, false
	}
	n.Usage = n.Usage.With(cards, n.shareOf(r, cards))
	return cards, true
}

// Give undoes a Take of r that got cards.
func (n *NodeGPUs) Give(r gpu.Request, cards []int) {
	if len(cards) > 0 {
		n.Usage = n.Usage.without(cards, n.shareOf(r, cards))
	}
}

// shareOf is the share r holds of each of cards (ShareOf).
func (n NodeGPUs) shareOf(r gpu.Request, cards []int) Share {
	if n.Cards == nil || len(cards) == 0 {
		return ShareOf(r, nil)
	}
	return ShareOf(r, gpu.CardByIndex(n.Cards.Cards, cards[0]))
}

// Empty is the node with nothing held: what it has once every pod left.
func (n NodeGPUs) Empty() NodeGPUs { return NodeGPUs{Cards: n.Cards} }

// FreeMilli is the thousandths of a card free on the node's healthy cards
// (Usage.FreeMilli); 0 without cards.
func (n NodeGPUs) FreeMilli() int64 {
	if n.Cards == nil {
		return 0
	}
	return n.Usage.FreeMilli(n.Cards.Cards)
}
