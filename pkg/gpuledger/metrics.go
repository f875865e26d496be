package gpuledger

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics"

	"github.com/aisched/aisched/pkg/gpu"
)

// Card states of aisched_gpu_cards.
const (
	cardFree   = "free"
	cardWhole  = "allocated"
	cardShared = "shared"
)

var (
	cardsDesc = metrics.NewDesc("aisched_gpu_cards",
		"GPU cards by node, model and state: allocated (held whole), shared (held in part by pods sharing it), free; cards of another scheduler's pods count once the node agent located them.",
		[]string{"node", "model", "state"}, nil, metrics.ALPHA, "")
	sharedFreeDesc = metrics.NewDesc("aisched_gpu_fragmented_milli",
		"Thousandths of a card free on cards that pods share, by node: capacity that whole-card pods cannot use until the shares end.",
		[]string{"node"}, nil, metrics.ALPHA, "")
)

// Collector reports the ledger's cards at each scrape: what every node
// has and what is held of it, computed from the holdings, so that nothing
// is kept twice. Register it with the scheduler's metrics registry (the
// DRA ledger's MIG devices have a collector of their own: package dra).
func (s *State) Collector() metrics.StableCollector { return &collector{state: s} }

type collector struct {
	metrics.BaseStableCollector
	state *State
}

func (c *collector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- cardsDesc
	ch <- sharedFreeDesc
}

func (c *collector) CollectWithStability(ch chan<- metrics.Metric) {
	for _, n := range c.state.allocation() {
		for key, count := range n.cards {
			ch <- metrics.NewLazyConstMetric(cardsDesc, metrics.GaugeValue, float64(count), n.name, key.model, key.state)
		}
		ch <- metrics.NewLazyConstMetric(sharedFreeDesc, metrics.GaugeValue, float64(n.fragmentedMilli), n.name)
	}
}

type cardKey struct{ model, state string }

// nodeAllocation is what is held of one node's cards.
type nodeAllocation struct {
	name  string
	cards map[cardKey]int
	// fragmentedMilli is the free thousandths of the shared cards.
	fragmentedMilli int64
}

// allocation returns, for every node with cards, its cards by model and
// state, from the holdings as Usage counts them. Cards of another
// scheduler's pods count once the node agent has located them
// (gpu.aisched.io/located); until then they read as free.
func (s *State) allocation() []nodeAllocation {
	s.mu.RLock()
	nodes := make([]*corev1.Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		nodes = append(nodes, n)
	}
	usage := maps.Clone(s.draUsage)
	for _, h := range s.pods {
		usage[h.node] = usage[h.node].With(h.cards, h.share)
	}
	s.mu.RUnlock()

	var out []nodeAllocation
	for _, node := range nodes {
		set := s.Cards(node)
		if set.Len() == 0 {
			continue
		}
		u := usage[node.Name]
		n := nodeAllocation{name: node.Name, cards: map[cardKey]int{}}
		for _, card := range set.Cards {
			state := cardFree
			switch {
			case u.Whole(card.Index):
				state = cardWhole
			case u.Used(card.Index):
				state = cardShared
				n.fragmentedMilli += gpu.WholeCardMilli - u.HeldMilli(card.Index)
			}
			n.cards[cardKey{card.Model, state}]++
		}
		out = append(out, n)
	}
	return out
}
