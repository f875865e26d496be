package throughput

import (
	"strings"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/component-base/metrics/legacyregistry"
)

// schedulerMetrics is what kube-scheduler's metrics say of one profile at
// one moment. The registry is the process's, and it outlives the
// clusters of earlier measurements in this process: a measurement counts
// the difference between two snapshots.
type schedulerMetrics struct {
	// seconds is the time spent at each extension point, and in the
	// whole scheduling algorithm ("Algorithm"); attempts counts the
	// algorithm's runs.
	seconds  map[string]float64
	attempts float64
	// batching counts opportunistic batching's outcomes by result or
	// reason.
	batching map[string]float64
}

// gatherSchedulerMetrics reads the scheduler's metrics of profile from the
// process's registry.
func gatherSchedulerMetrics(profile string) schedulerMetrics {
	m := schedulerMetrics{seconds: map[string]float64{}, batching: map[string]float64{}}
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return m
	}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			labels := labelsOf(metric)
			switch name := f.GetName(); name {
			case "scheduler_framework_extension_point_duration_seconds":
				if labels["profile"] == profile {
					m.seconds[labels["extension_point"]] += metric.GetHistogram().GetSampleSum()
				}
			case "scheduler_scheduling_algorithm_duration_seconds":
				// One scheduler per cluster, and one cluster at a time:
				// the algorithm's time (no profile label) is the profile's.
				m.seconds["Algorithm"] += metric.GetHistogram().GetSampleSum()
				m.attempts += float64(metric.GetHistogram().GetSampleCount())
			case "scheduler_batch_attempts_total", "scheduler_batch_cache_flushed_total":
				if labels["profile"] != profile {
					continue
				}
				key := labels["result"]
				if name == "scheduler_batch_cache_flushed_total" {
					key = labels["reason"]
				}
				m.batching[strings.TrimPrefix(name, "scheduler_")+"/"+key] += metric.GetCounter().GetValue()
			}
		}
	}
	return m
}

func labelsOf(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// sub returns what happened between before and m: the microseconds per
// scheduling attempt at each extension point, and the batching counts.
func (m schedulerMetrics) sub(before schedulerMetrics) (microsPerPod, batching map[string]float64) {
	attempts := m.attempts - before.attempts
	if attempts > 0 {
		microsPerPod = map[string]float64{}
		for point, s := range m.seconds {
			if d := s - before.seconds[point]; d > 0 {
				microsPerPod[point] = d / attempts * 1e6
			}
		}
	}
	for key, n := range m.batching {
		if d := n - before.batching[key]; d > 0 {
			if batching == nil {
				batching = map[string]float64{}
			}
			batching[key] = d
		}
	}
	return microsPerPod, batching
}
