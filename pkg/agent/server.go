package agent

import (
	"fmt"
	"net/http"
	"time"

	k8smetrics "k8s.io/component-base/metrics"
)

// unhealthyIntervals is how many intervals without a successful publish
// make the agent unhealthy: enough to ride out a slow sample and two failed
// attempts, few enough that the kubelet restarts a wedged agent within a
// minute or two.
const unhealthyIntervals = 3

// Handler serves the agent's Prometheus metrics at /metrics and its health
// at /healthz: 200 while the last successful publish (or, before the first,
// the creation of the agent) is at most three intervals old, 503 with the
// reason otherwise.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", k8smetrics.HandlerFor(a.metrics.registry, k8smetrics.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if err := a.healthy(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// MustRegister adds metrics of the agent's other parts (the delivery
// checker's) to what Handler serves.
func (a *Agent) MustRegister(metrics ...k8smetrics.Registerable) {
	a.metrics.registry.MustRegister(metrics...)
}

// healthy returns why the agent is unhealthy, or nil.
func (a *Agent) healthy() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	limit := unhealthyIntervals * a.opts.Interval
	var reason string
	if a.lastSuccess.IsZero() {
		if age := a.opts.Clock.Since(a.started); age > limit {
			reason = fmt.Sprintf("no successful publish in the %s since the agent started", age.Round(time.Millisecond))
		}
	} else if age := a.opts.Clock.Since(a.lastSuccess); age > limit {
		reason = fmt.Sprintf("last successful publish %s ago", age.Round(time.Millisecond))
	}
	switch {
	case reason == "":
		return nil
	case a.lastErr != nil:
		return fmt.Errorf("%s, more than %d intervals of %s: %w", reason, unhealthyIntervals, a.opts.Interval, a.lastErr)
	default:
		return fmt.Errorf("%s, more than %d intervals of %s", reason, unhealthyIntervals, a.opts.Interval)
	}
}
