package console

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aischedv1alpha1 "github.com/aisched/aisched/apis/aisched/v1alpha1"
	"github.com/aisched/aisched/pkg/gpu"
	"github.com/aisched/aisched/pkg/gpuledger"
)

// GPUMap is every GPU node with its cards and who holds them.
type GPUMap struct {
	Nodes []GPUNode `json:"nodes"`
	// Fragmentation sums the free compute of the cluster's cards.
	Fragmentation Fragmentation `json:"fragmentation"`
	// DriftCount is the nodes' drift summed: holdings the node agents found
	// that differ from the scheduler's.
	DriftCount int32 `json:"driftCount"`
}

// GPUNode is one node's cards.
type GPUNode struct {
	Name  string `json:"name"`
	Ready bool   `json:"ready"`
	// Source is where the cards come from: GPUInventory (the node agent)
	// or labels (GPU Feature Discovery).
	Source string    `json:"source"`
	Cards  []GPUCard `json:"cards"`
	// FreeCards counts the cards no pod holds.
	FreeCards int `json:"freeCards"`
	// Unlocated lists the GPU pods of the node whose cards are not known
	// (another scheduler's, not yet located by the node agent), with the
	// number of cards each holds.
	Unlocated []string `json:"unlocated,omitempty"`
	// Drift is what the node agent last found different from the
	// scheduler's assignment; CheckTime when it looked.
	Drift     []aischedv1alpha1.GPUDrift `json:"drift,omitempty"`
	CheckTime *metav1.Time               `json:"checkTime,omitempty"`
}

// GPUCard is one card and its holders.
type GPUCard struct {
	Index     int    `json:"index"`
	UUID      string `json:"uuid,omitempty"`
	Model     string `json:"model"`
	MemoryMiB int64  `json:"memoryMiB"`
	Healthy   bool   `json:"healthy"`
	// Whole is the pod (namespace/name) holding the card whole.
	Whole string `json:"whole,omitempty"`
	// Shares are the pods sharing the card.
	Shares []CardShare `json:"shares,omitempty"`
	// FreeMilli is the card's compute left, in thousandths; FreeMemMiB its
	// memory left.
	FreeMilli  int64 `json:"freeMilli"`
	FreeMemMiB int64 `json:"freeMemMiB"`
}

// CardShare is a pod's share of a card.
type CardShare struct {
	Pod    string `json:"pod"`
	Milli  int64  `json:"milli"`
	MemMiB int64  `json:"memMiB"`
}

// Fragmentation is how much of the free GPU compute a whole-card pod
// cannot use: the part left on cards that shares hold in part.
type Fragmentation struct {
	FreeCards int `json:"freeCards"`
	// FreeMilli is all free compute, in thousandths of a card;
	// StrandedMilli the part on cards held in part.
	FreeMilli     int64 `json:"freeMilli"`
	StrandedMilli int64 `json:"strandedMilli"`
	// Percent is StrandedMilli of FreeMilli, 0 to 100.
	Percent float64 `json:"percent"`
}

func (s *Server) gpuMap(w http.ResponseWriter, r *http.Request, c *clients, _ identity) {
	ctx := r.Context()
	nodes, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	pods, err := c.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!="})
	if err != nil {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	invs, err := c.aisched.AischedV1alpha1().GPUInventories().List(ctx, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		writeError(w, http.StatusBadGateway, err)
		return
	}
	var inventories []aischedv1alpha1.GPUInventory
	if invs != nil {
		inventories = invs.Items
	}
	writeJSON(w, http.StatusOK, BuildGPUMap(nodes.Items, inventories, pods.Items))
}

// BuildGPUMap lays out the cards of nodes from the GPU ledger
// (gpuledger), fed with the objects given: the cards of each node's
// GPUInventory (or GPU Feature Discovery labels) and the holdings of its
// running pods. Nodes without cards are left out.
func BuildGPUMap(nodes []corev1.Node, inventories []aischedv1alpha1.GPUInventory, pods []corev1.Pod) GPUMap {
	ledger := gpuledger.NewStandalone(gpuledger.Options{})
	invByNode := map[string]*aischedv1alpha1.GPUInventory{}
	for i := range inventories {
		ledger.ObserveInventory(&inventories[i])
		invByNode[inventories[i].Name] = &inventories[i]
	}
	podsOn := map[string][]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		ledger.ObservePod(p)
		podsOn[p.Spec.NodeName] = append(podsOn[p.Spec.NodeName], p)
	}
	m := GPUMap{Nodes: []GPUNode{}}
	for i := range nodes {
		node := &nodes[i]
		ledger.ObserveNode(node)
		set := ledger.Cards(node)
		if set == nil || len(set.Cards) == 0 {
			continue
		}
		n := GPUNode{Name: node.Name, Ready: nodeReady(node), Source: "labels"}
		if inv := invByNode[node.Name]; inv != nil {
			n.Source = "GPUInventory"
			n.Drift, n.CheckTime = inv.Status.Drift, inv.Status.CheckTime
			m.DriftCount += inv.Status.DriftCount
		}
		onNode := podsOn[node.Name]
		usage := ledger.UsageOf(node.Name, onNode)
		holders := holdersOf(onNode)
		for _, card := range set.Cards {
			gc := GPUCard{
				Index: card.Index, UUID: card.UUID, Model: card.Model, MemoryMiB: card.MemoryMiB, Healthy: card.Healthy,
				FreeMilli: usage.FreeOn(&card), FreeMemMiB: max(card.MemoryMiB-usage.HeldMemMiB(card.Index), 0),
			}
			h := holders[card.Index]
			if usage.Whole(card.Index) {
				gc.Whole, gc.FreeMilli, gc.FreeMemMiB = h.whole, 0, 0
			} else {
				gc.Shares = h.shares
			}
			if !usage.Used(card.Index) && card.Healthy {
				n.FreeCards++
			}
			if card.Healthy {
				m.Fragmentation.FreeMilli += gc.FreeMilli
				if usage.Used(card.Index) {
					m.Fragmentation.StrandedMilli += gc.FreeMilli
				}
			}
			n.Cards = append(n.Cards, gc)
		}
		n.Unlocated = unlocated(onNode)
		// Cards of unlocated pods are held, though nobody knows which.
		n.FreeCards = max(n.FreeCards-int(usage.Unknown), 0)
		m.Fragmentation.FreeCards += n.FreeCards
		m.Nodes = append(m.Nodes, n)
	}
	if f := &m.Fragmentation; f.FreeMilli > 0 {
		f.Percent = float64(f.StrandedMilli) * 100 / float64(f.FreeMilli)
	}
	slices.SortFunc(m.Nodes, func(a, b GPUNode) int { return strings.Compare(a.Name, b.Name) })
	return m
}

type cardHolders struct {
	whole  string
	shares []CardShare
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
		for _, i := range cards {
			h := out[i]
			if share.IsZero() {
				h.whole = name
			} else {
				h.shares = append(h.shares, CardShare{Pod: name, Milli: share.Milli, MemMiB: share.MemMiB})
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
