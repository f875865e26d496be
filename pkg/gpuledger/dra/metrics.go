package dra

import (
	"k8s.io/component-base/metrics"

	"github.com/aisched/aisched/pkg/gpu"
)

// States of aisched_gpu_mig_devices.
const (
	migFree      = "free"
	migAllocated = "allocated"
)

var migDesc = metrics.NewDesc("aisched_gpu_mig_devices",
	"MIG devices that the GPU's DRA driver publishes, by node, card model, MIG profile and state: allocated (a claim holds it) or free; a placement of a card partitioned dynamically counts only while a claim holds it.",
	[]string{"node", "model", "profile", "state"}, nil, metrics.ALPHA, "")

// Collector reports the driver's MIG devices at each scrape. Register it
// with the scheduler's metrics registry, beside the card ledger's.
func (l *Ledger) Collector() metrics.StableCollector { return &collector{ledger: l} }

type collector struct {
	metrics.BaseStableCollector
	ledger *Ledger
}

func (c *collector) DescribeWithStability(ch chan<- *metrics.Desc) { ch <- migDesc }

func (c *collector) CollectWithStability(ch chan<- metrics.Metric) {
	for node, counts := range c.ledger.migDevices() {
		for key, count := range counts {
			ch <- metrics.NewLazyConstMetric(migDesc, metrics.GaugeValue, float64(count), node, key.model, key.profile, key.state)
		}
	}
}

// migKey is a kind of MIG device in aisched_gpu_mig_devices.
type migKey struct{ model, profile, state string }

// migDevices counts the MIG devices of every DRA node by the model of
// their card, profile and state: allocated when a claim holds it (pending
// in the scheduler or written), free otherwise. A free placement of a
// card partitioned dynamically (its devices consume the card's counters)
// is one of several that overlap, not a device: only held ones count.
func (l *Ledger) migDevices() map[string]map[migKey]int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := map[string]map[migKey]int{}
	for node, n := range l.nodes {
		held := map[DeviceRef]bool{}
		for _, pool := range n.pools() {
			for uid := range l.byPool[pool] {
				for _, r := range l.claims[uid].results {
					held[DeviceRef{Pool: r.Pool, Device: r.Device}] = true
				}
			}
		}
		for ref, dev := range n.devices {
			if !dev.MIG {
				continue
			}
			state := migAllocated
			if !held[ref] {
				if len(n.raw[ref].ConsumesCounters) > 0 {
					continue
				}
				state = migFree
			}
			model := ""
			if c := gpu.CardByIndex(n.set.Cards, dev.Card); c != nil {
				model = c.Model
			}
			if out[node] == nil {
				out[node] = map[migKey]int{}
			}
			out[node][migKey{model: model, profile: dev.Profile, state: state}]++
		}
	}
	return out
}
