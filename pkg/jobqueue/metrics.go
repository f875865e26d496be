package jobqueue

import (
	"k8s.io/component-base/metrics"
)

// metricsSubsystem prefixes the job queue's metrics.
const metricsSubsystem = "jobqueue"

// queueMetrics are the job queue's metrics. They record nothing until
// registered (component-base metrics are lazy): the scheduler command
// registers them (Queue.Metrics), the simulator does not.
type queueMetrics struct {
	groups          *metrics.GaugeVec
	admissionWait   *metrics.Histogram
	placement       *metrics.Histogram
	failedAttempts  *metrics.Counter
	partial         *metrics.Gauge
	reservationHeld *metrics.Gauge
}

func newQueueMetrics() *queueMetrics {
	return &queueMetrics{
		groups: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Namespace: "aisched", Subsystem: metricsSubsystem, Name: "groups",
			Help:           "Pod groups known to the job queue, by namespace and by the reason of the queue's last decision (Admitted, WaitingForMembers, WaitingForCapacity, QuotaExceeded, ...).",
			StabilityLevel: metrics.ALPHA,
		}, []string{"namespace", "reason"}),
		admissionWait: metrics.NewHistogram(&metrics.HistogramOpts{
			Namespace: "aisched", Subsystem: metricsSubsystem, Name: "admission_wait_seconds",
			Help:           "Time from a pod group's creation to its admission by the job queue.",
			Buckets:        metrics.ExponentialBuckets(0.1, 4, 10),
			StabilityLevel: metrics.ALPHA,
		}),
		placement: metrics.NewHistogram(&metrics.HistogramOpts{
			Namespace: "aisched", Subsystem: "gang", Name: "placement_seconds",
			Help:           "Time from a pod group's admission until min-available of its members are bound.",
			Buckets:        metrics.ExponentialBuckets(0.05, 4, 10),
			StabilityLevel: metrics.ALPHA,
		}),
		failedAttempts: metrics.NewCounter(&metrics.CounterOpts{
			Namespace: "aisched", Subsystem: "gang", Name: "failed_attempts_total",
			Help:           "Attempts to place an admitted pod group that failed (a member found no node or its Permit timed out); the group backs off.",
			StabilityLevel: metrics.ALPHA,
		}),
		partial: metrics.NewGauge(&metrics.GaugeOpts{
			Namespace: "aisched", Subsystem: "gang", Name: "partial_groups",
			Help:           "Pod groups with some members bound but fewer than min-available bound or succeeded.",
			StabilityLevel: metrics.ALPHA,
		}),
		reservationHeld: metrics.NewGauge(&metrics.GaugeOpts{
			Namespace: "aisched", Subsystem: metricsSubsystem, Name: "reservation_held",
			Help:           "1 while a waiting pod group holds a reservation of nodes, 0 otherwise.",
			StabilityLevel: metrics.ALPHA,
		}),
	}
}

// Metrics returns the job queue's metrics, for the scheduler's registry.
func (q *Queue) Metrics() []metrics.Registerable {
	m := q.metrics
	return []metrics.Registerable{m.groups, m.admissionWait, m.placement, m.failedAttempts, m.partial, m.reservationHeld}
}

// record sets the gauges from one pass's plan and groups.
func (m *queueMetrics) record(plan Plan, groups map[string]*Group) {
	m.groups.Reset()
	partial := 0
	for key, d := range plan.Decisions {
		g := groups[key]
		if g == nil {
			continue
		}
		reason := string(d.Reason)
		if d.Admitted {
			reason = string(ReasonAdmitted)
		}
		m.groups.WithLabelValues(g.Namespace, reason).Inc()
		if len(g.Bound) > 0 && len(g.Bound)+g.Succeeded < g.MinAvailable {
			partial++
		}
	}
	m.partial.Set(float64(partial))
	if plan.Reservation != nil {
		m.reservationHeld.Set(1)
	} else {
		m.reservationHeld.Set(0)
	}
}
