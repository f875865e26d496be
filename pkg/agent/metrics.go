package agent

import (
	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/utils/ptr"
)

// agentMetrics are the agent's Prometheus metrics, in a registry of the
// agent's own, so that agents in one process (tests) do not share counts.
type agentMetrics struct {
	registry k8smetrics.KubeRegistry
	// samples counts the samples taken, published or not.
	samples *k8smetrics.Counter
	// publishErrors counts the samples that could not be published.
	publishErrors *k8smetrics.Counter
	// lastSample is the end of the last sample's window.
	lastSample *k8smetrics.Gauge
	// utilization is the last sample's utilisation of each resource, as
	// a fraction; a resource whose utilisation is unknown has no series.
	utilization *k8smetrics.GaugeVec
	// collectorErrors counts the failed reads of each source.
	collectorErrors *k8smetrics.CounterVec
}

func newAgentMetrics() *agentMetrics {
	opts := func(name, help string) k8smetrics.CounterOpts {
		return k8smetrics.CounterOpts{Namespace: "aisched", Subsystem: "agent", Name: name, Help: help, StabilityLevel: k8smetrics.ALPHA}
	}
	m := &agentMetrics{
		registry: k8smetrics.NewKubeRegistry(),
		samples: k8smetrics.NewCounter(ptr.To(opts("samples_total",
			"Samples of the node taken, published or not."))),
		publishErrors: k8smetrics.NewCounter(ptr.To(opts("publish_errors_total",
			"Samples that could not be published to the apiserver."))),
		lastSample: k8smetrics.NewGauge(ptr.To(k8smetrics.GaugeOpts(opts("last_sample_timestamp_seconds",
			"End of the window of the last sample, in seconds since the Unix epoch.")))),
		utilization: k8smetrics.NewGaugeVec(ptr.To(k8smetrics.GaugeOpts(opts("node_utilization_ratio",
			"Utilisation of the node's resource (cpu, memory, network, disk) over the last sample's window, from 0 to 1; absent when unknown."))),
			[]string{"resource"}),
		collectorErrors: k8smetrics.NewCounterVec(ptr.To(opts("collector_errors_total",
			"Failed reads of the node, by source: utilization (/proc and /sys counters, two reads per sample), performance, disk_throughput (the start-up measurement), nvidia_smi.")),
			[]string{"source"}),
	}
	m.registry.MustRegister(m.samples, m.publishErrors, m.lastSample, m.utilization, m.collectorErrors)
	// Every source has a series from the start, so that rate() sees the
	// first error.
	for _, source := range []string{sourceUtilization, sourcePerformance, sourceDiskThroughput, sourceNvidiaSMI} {
		m.collectorErrors.WithLabelValues(source)
	}
	return m
}

// observe records a sample.
func (m *agentMetrics) observe(s sample) {
	m.samples.Inc()
	m.lastSample.Set(float64(s.time.UnixNano()) / 1e9)
	for _, r := range []struct {
		name  string
		value *float64
	}{
		{"cpu", s.util.CPU},
		{"memory", s.util.Memory},
		{"network", s.util.Network},
		{"disk", s.util.Disk},
	} {
		if r.value == nil {
			m.utilization.DeleteLabelValues(r.name)
		} else {
			m.utilization.WithLabelValues(r.name).Set(*r.value)
		}
	}
}
