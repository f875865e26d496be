package gateway

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the gateway's Prometheus metrics, in a registry of its own.
type metrics struct {
	registry     *prometheus.Registry
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	rejections   *prometheus.CounterVec
	breakerState *prometheus.GaugeVec
	inflight     *prometheus.GaugeVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aisched_gateway_requests_total",
			Help: "Requests to a service, by the status code answered (the service's or the gateway's own).",
		}, []string{"namespace", "service", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "aisched_gateway_request_duration_seconds",
			Help:    "Time from a request's arrival to the end of its answer, rejections included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"namespace", "service"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aisched_gateway_rejections_total",
			Help: "Requests the gateway answered itself, by reason (IPDenied, InvalidAPIKey, RateLimited, CircuitOpen, UpstreamTimeout, ...).",
		}, []string{"namespace", "service", "reason"}),
		breakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aisched_gateway_breaker_state",
			Help: "State of a service's circuit breaker: 0 closed (or none), 1 half-open, 2 open.",
		}, []string{"namespace", "service"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aisched_gateway_requests_in_flight",
			Help: "Requests of a service being proxied now.",
		}, []string{"namespace", "service"}),
	}
	m.registry.MustRegister(m.requests, m.duration, m.rejections, m.breakerState, m.inflight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// routeMetrics are a service's children of the metrics, resolved once.
type routeMetrics struct {
	namespace, service string
	m                  *metrics
	duration           prometheus.Observer
	breakerState       prometheus.Gauge
	inflight           prometheus.Gauge
}

func (m *metrics) forRoute(namespace, service string) *routeMetrics {
	return &routeMetrics{
		namespace: namespace, service: service, m: m,
		duration:     m.duration.WithLabelValues(namespace, service),
		breakerState: m.breakerState.WithLabelValues(namespace, service),
		inflight:     m.inflight.WithLabelValues(namespace, service),
	}
}

// codes are the label values of the status codes, made once.
var codes = func() (c [600]string) {
	for i := range c {
		c[i] = strconv.Itoa(i)
	}
	return c
}()

func (rm *routeMetrics) request(code int, seconds float64) {
	label := "other"
	if code >= 0 && code < len(codes) {
		label = codes[code]
	}
	rm.m.requests.WithLabelValues(rm.namespace, rm.service, label).Inc()
	rm.duration.Observe(seconds)
}

func (rm *routeMetrics) rejected(reason string) {
	rm.m.rejections.WithLabelValues(rm.namespace, rm.service, reason).Inc()
}

// delete drops a removed service's series.
func (rm *routeMetrics) delete() {
	labels := map[string]string{"namespace": rm.namespace, "service": rm.service}
	rm.m.requests.DeletePartialMatch(labels)
	rm.m.duration.DeletePartialMatch(labels)
	rm.m.rejections.DeletePartialMatch(labels)
	rm.m.breakerState.DeletePartialMatch(labels)
	rm.m.inflight.DeletePartialMatch(labels)
}
