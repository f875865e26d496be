package jobqueue

import (
	"k8s.io/component-base/metrics"

	"github.com/aisched/aisched/pkg/queuetree"
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
	passDuration    *metrics.Histogram

	// The team queues' gauges, by queue and resource, and their reclaims.
	queueAmount   *metrics.GaugeVec
	queueWork     *metrics.GaugeVec
	reclaimNeeded *metrics.CounterVec
	reclaimEvict  *metrics.CounterVec
}

// maxQueueSeries bounds the queues the metrics report (their labels).
const maxQueueSeries = 1000

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
			Help:           "Pod groups with some members bound, or DRA claims of pending members allocated, but fewer than min-available bound or succeeded.",
			StabilityLevel: metrics.ALPHA,
		}),
		reservationHeld: metrics.NewGauge(&metrics.GaugeOpts{
			Namespace: "aisched", Subsystem: metricsSubsystem, Name: "reservation_held",
			Help:           "1 while a waiting pod group holds a reservation of nodes, 0 otherwise.",
			StabilityLevel: metrics.ALPHA,
		}),
		passDuration: metrics.NewHistogram(&metrics.HistogramOpts{
			Namespace: "aisched", Subsystem: metricsSubsystem, Name: "pass_duration_seconds",
			Help:           "Time of one job queue pass: reading the cluster, the plan, and acting on it (activations, status, evictions queued). Its count is the passes made.",
			Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
			StabilityLevel: metrics.ALPHA,
		}),
		queueAmount: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Namespace: "aisched", Subsystem: "queue", Name: "resource",
			Help:           "A team queue's amounts of a resource (cards, CPUs or bytes) by amount: guaranteed, limit (-1: none), used, borrowed, fair_share; the first 1000 queues by name.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"queue", "resource", "amount"}),
		queueWork: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Namespace: "aisched", Subsystem: "queue", Name: "groups",
			Help:           "Pod groups and single pods of a team queue (and its descendants), by state: admitted or waiting.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"queue", "state"}),
		reclaimNeeded: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: "aisched", Subsystem: "queue", Name: "reclaim_needed_gpus_total",
			Help:           "GPUs the groups of a team queue needed when they took capacity back from other queues.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"queue"}),
		reclaimEvict: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: "aisched", Subsystem: "queue", Name: "reclaim_evicted_gpus_total",
			Help:           "GPUs held by the pods evicted to take capacity back for a team queue; over reclaim_needed_gpus_total, GPUs evicted per GPU taken back.",
			StabilityLevel: metrics.ALPHA,
		}, []string{"queue"}),
	}
}

// recordQueues sets the team queues' gauges from a pass's tree (nil: no
// queues).
func (m *queueMetrics) recordQueues(t *queuetree.Tree) {
	m.queueAmount.Reset()
	m.queueWork.Reset()
	if t == nil {
		return
	}
	for k, n := range t.Queues() {
		if k == maxQueueSeries {
			break
		}
		for i, name := range t.Names() {
			if !n.Listed(i) {
				continue
			}
			scale := 1.0
			if queuetree.Cards(name) || name == "cpu" {
				scale = 1000
			}
			limit := float64(n.Limits()[i])
			if limit >= 0 {
				limit /= scale
			}
			for amount, v := range map[string]float64{"guaranteed": float64(n.Guaranteed()[i]) / scale, "limit": limit,
				"used": float64(n.Used()[i]) / scale, "borrowed": float64(n.Borrowed(i)) / scale, "fair_share": float64(n.FairShare()[i]) / scale} {
				m.queueAmount.WithLabelValues(n.Name, name, amount).Set(v)
			}
		}
		admitted, waiting := n.Work()
		m.queueWork.WithLabelValues(n.Name, "admitted").Set(float64(admitted))
		m.queueWork.WithLabelValues(n.Name, "waiting").Set(float64(waiting))
	}
}

// Metrics returns the job queue's metrics, for the scheduler's registry.
func (q *Queue) Metrics() []metrics.Registerable {
	m := q.metrics
	return []metrics.Registerable{m.groups, m.admissionWait, m.placement, m.failedAttempts, m.partial, m.reservationHeld,
		m.passDuration, m.queueAmount, m.queueWork, m.reclaimNeeded, m.reclaimEvict}
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
		if len(g.Bound)+len(g.HeldClaims) > 0 && len(g.Bound)+g.Succeeded < g.MinAvailable {
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
