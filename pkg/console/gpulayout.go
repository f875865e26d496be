package console

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
	"github.com/aisched/aisched/pkg/gpuledger/dra"
	"github.com/aisched/aisched/pkg/podgroup"
)

// GPUNode is one node's cards and who holds them: what a node opens into.
type GPUNode struct {
	NodeRow
	Cards []GPUCard `json:"cards"`
	// Unlocated lists the GPU pods of the node whose cards are not known
	// (another scheduler's, not yet located by the node agent), with the
	// number of cards each holds.
	Unlocated []string `json:"unlocated,omitempty"`
	// Drift is what the node agent last found different from the
	// scheduler's assignment; CheckTime when it looked.
	Drift     []aischedv1alpha1.GPUDrift `json:"drift,omitempty"`
	CheckTime *metav1.Time               `json:"checkTime,omitempty"`

	// node is the Node, for its topology labels.
	node *corev1.Node
}

// NodeRow is a node in a line: its cards counted, none drawn.
type NodeRow struct {
	Name  string `json:"name"`
	Ready bool   `json:"ready"`
	// Source is where the cards come from: GPUInventory (the node agent),
	// ResourceSlices (the GPU's DRA driver), or labels (GPU Feature
	// Discovery).
	Source string     `json:"source"`
	Counts CardCounts `json:"counts"`
	// DriftFindings counts the node agent's drift findings on the node.
	DriftFindings int32 `json:"driftFindings,omitempty"`
}

// GPUCard is one card and its holders.
type GPUCard struct {
	Index     int    `json:"index"`
	UUID      string `json:"uuid,omitempty"`
	Model     string `json:"model"`
	MemoryMiB int64  `json:"memoryMiB"`
	Healthy   bool   `json:"healthy"`
	// State is what the card is: free, whole (held whole), shared or
	// unhealthy.
	State CardState `json:"state"`
	// Whole is the pod (namespace/name) holding the card whole.
	Whole string `json:"whole,omitempty"`
	// Shares are the pods sharing the card.
	Shares []CardShare `json:"shares,omitempty"`
	// Groups are the pod groups (namespace/name) of the pods holding it.
	Groups []string `json:"groups,omitempty"`
	// FreeMilli is the card's compute left, in thousandths; FreeMemMiB its
	// memory left.
	FreeMilli  int64 `json:"freeMilli"`
	FreeMemMiB int64 `json:"freeMemMiB"`

	// counted is how the counts take the card: as State, except a free
	// card the node's unlocated pods are taken to hold (counted as
	// unlocated, since which card they hold is not known).
	counted CardState
}

// CardShare is a pod's share of a card. Under DRA it is a claim's device:
// a MIG device (Device, Profile) or a share of a shared device's
// capacity.
type CardShare struct {
	Pod    string `json:"pod"`
	Milli  int64  `json:"milli"`
	MemMiB int64  `json:"memMiB"`
	// Claim is the DRA claim (namespace/name) that holds the share, Device
	// the device it was allocated, and Profile the MIG profile of a MIG
	// device (1g.10gb); empty for a share outside DRA.
	Claim   string `json:"claim,omitempty"`
	Device  string `json:"device,omitempty"`
	Profile string `json:"profile,omitempty"`
}

// LayOutGPUs lays out the cards of nodes from the GPU ledger (gpuledger),
// fed with the objects given: the cards of each node's GPUInventory (or
// the DRA driver's ResourceSlices, or GPU Feature Discovery labels), the
// holdings of its running pods, and the devices allocated claims hold.
// Nodes without cards are left out; the rest come in name order, each
// with its cards counted.
func LayOutGPUs(nodes []corev1.Node, inventories []aischedv1alpha1.GPUInventory, pods []corev1.Pod, objects DRAObjects) []GPUNode {
	ledger := gpuledger.NewStandalone(gpuledger.Options{})
	devices := dra.New(ledger, "")
	invByNode := map[string]*aischedv1alpha1.GPUInventory{}
	for i := range inventories {
		ledger.ObserveInventory(&inventories[i])
		invByNode[inventories[i].Name] = &inventories[i]
	}
	objects.observe(devices)
	podsOn := map[string][]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		ledger.ObservePod(p)
		podsOn[p.Spec.NodeName] = append(podsOn[p.Spec.NodeName], p)
	}
	out := []GPUNode{}
	for i := range nodes {
		node := &nodes[i]
		ledger.ObserveNode(node)
		set := ledger.Cards(node)
		if set == nil || len(set.Cards) == 0 {
			continue
		}
		n := GPUNode{NodeRow: NodeRow{Name: node.Name, Ready: nodeReady(node), Source: "labels"}, node: node}
		onNode := podsOn[node.Name]
		holders := holdersOf(onNode)
		if inv := invByNode[node.Name]; inv != nil {
			n.Source = "GPUInventory"
			n.Drift, n.CheckTime, n.DriftFindings = inv.Status.Drift, inv.Status.CheckTime, inv.Status.DriftCount
		} else if _, ok := devices.View(node.Name); ok {
			n.Source = "ResourceSlices"
			byName := make(map[string]*corev1.Pod, len(onNode))
			for _, p := range onNode {
				byName[p.Namespace+"/"+p.Name] = p
			}
			addDRAHolders(holders, devices.Holders(node.Name), byName)
		}
		usage := ledger.UsageOf(node.Name, onNode, gpu.RequestedCardsOf(onNode))
		// Cards of unlocated pods are held, though nobody knows which: the
		// counts take them from the free cards, in index order.
		unknown := int(usage.Unknown)
		for _, card := range set.Cards {
			gc := GPUCard{
				Index: card.Index, UUID: card.UUID, Model: card.Model, MemoryMiB: card.MemoryMiB, Healthy: card.Healthy,
				FreeMilli: usage.FreeOn(&card), FreeMemMiB: max(card.MemoryMiB-usage.HeldMemMiB(card.Index), 0),
			}
			h := holders[card.Index]
			gc.Groups = h.groups
			switch {
			case usage.Whole(card.Index):
				gc.State, gc.Whole, gc.FreeMilli, gc.FreeMemMiB = CardWhole, h.whole, 0, 0
			case usage.Used(card.Index):
				gc.State, gc.Shares = CardShared, h.shares
			default:
				gc.State = CardFree
			}
			if !card.Healthy {
				// Whoever holds it, it is lost to new work.
				gc.State = CardUnhealthy
			}
			gc.counted = gc.State
			if gc.State == CardFree && unknown > 0 {
				gc.counted = CardUnlocated
				unknown--
			}
			n.Cards = append(n.Cards, gc)
		}
		n.Unlocated = unlocated(onNode)
		n.Counts = countCards(n.Cards)
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b GPUNode) int { return strings.Compare(a.Name, b.Name) })
	return out
}

type cardHolders struct {
	whole  string
	shares []CardShare
	groups []string
}

// holdersOf names who holds each card of a node, by card index, from the
// records the ledger reads (gpuledger.HoldingOf).
func holdersOf(pods []*corev1.Pod) map[int]cardHolders {
	out := map[int]cardHolders{}
	for _, p := range pods {
		cards, share, ok := gpuledger.HoldingOf(p)
		if !ok {
			continue
		}
		name := p.Namespace + "/" + p.Name
		group, inGroup := podgroup.KeyOf(p)
		for _, i := range cards {
			h := out[i]
			if share.IsZero() {
				h.whole = name
			} else {
				h.shares = append(h.shares, CardShare{Pod: name, Milli: share.Milli, MemMiB: share.MemMiB})
			}
			if inGroup && !slices.Contains(h.groups, group) {
				h.groups = append(h.groups, group)
			}
			out[i] = h
		}
	}
	return out
}

// unlocated lists the pods that ask for cards and hold none the ledger
// knows of.
func unlocated(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		if _, _, ok := gpuledger.HoldingOf(p); ok {
			continue
		}
		if n := gpu.RequestedCards(p); n > 0 {
			out = append(out, fmt.Sprintf("%s/%s (%d)", p.Namespace, p.Name, n))
		}
	}
	return out
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
