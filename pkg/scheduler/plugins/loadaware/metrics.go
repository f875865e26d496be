package loadaware

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// staleSamples counts the times a node's sample went stale; it is served
// with the scheduler's own metrics.
var staleSamples = metrics.NewCounter(&metrics.CounterOpts{
	Namespace:      "aisched",
	Subsystem:      "loadaware",
	Name:           "stale_samples_total",
	Help:           "Times a node's NodeMetrics sample became older than the TTL, so that the node was scored from its pods' requests.",
	StabilityLevel: metrics.ALPHA,
})

var registerOnce sync.Once

// registerMetrics adds the plugin's metrics to the registry the scheduler
// serves, once per process however many profiles use the plugin.
func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(staleSamples) })
}
