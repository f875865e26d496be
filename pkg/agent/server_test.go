package agent

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"

	"github.com/aisched/aisched/pkg/generated/clientset/versioned/fake"
)

// get serves a GET of path by the agent's handler and returns the code and
// body.
func get(t *testing.T, a *Agent, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Code, string(body)
}

// TestHealthz checks /healthz against the age of the last successful
// publish, with a 10 s interval: healthy up to 3 intervals, 30 s.
func TestHealthz(t *testing.T) {
	failed := errors.New(`reading NodeMetrics n1: dial tcp 127.0.0.1:6443: connect: connection refused`)
	tests := []struct {
		name string
		// now is the time since the agent was created.
		now time.Duration
		// lastSuccess is the time of the last successful publish since the
		// agent was created; none when negative.
		lastSuccess time.Duration
		lastErr     error
		wantCode    int
		wantBody    string
	}{
		{
			name:        "just started",
			lastSuccess: -1,
			wantCode:    http.StatusOK,
			wantBody:    "ok\n",
		},
		{
			name:        "no publish yet, 3 intervals after the start",
			now:         30 * time.Second,
			lastSuccess: -1,
			lastErr:     failed,
			wantCode:    http.StatusOK,
			wantBody:    "ok\n",
		},
		{
			name:        "no publish, more than 3 intervals after the start",
			now:         31 * time.Second,
			lastSuccess: -1,
			lastErr:     failed,
			wantCode:    http.StatusServiceUnavailable,
			wantBody:    "no successful publish in the 31s since the agent started, more than 3 intervals of 10s: " + failed.Error() + "\n",
		},
		{
			// A first sample that never ends (a measurement that hangs) has
			// no error to tell.
			name:        "no publish and no error",
			now:         time.Minute,
			lastSuccess: -1,
			wantCode:    http.StatusServiceUnavailable,
			wantBody:    "no successful publish in the 1m0s since the agent started, more than 3 intervals of 10s\n",
		},
		{
			name:        "published",
			now:         time.Hour,
			lastSuccess: time.Hour - 5*time.Second,
			wantCode:    http.StatusOK,
			wantBody:    "ok\n",
		},
		{
			name:        "published, then failing for less than 3 intervals",
			now:         time.Hour,
			lastSuccess: time.Hour - 25*time.Second,
			lastErr:     failed,
			wantCode:    http.StatusOK,
			wantBody:    "ok\n",
		},
		{
			name:        "published, then failing for more than 3 intervals",
			now:         time.Hour,
			lastSuccess: time.Hour - 45*time.Second,
			lastErr:     failed,
			wantCode:    http.StatusServiceUnavailable,
			wantBody:    "last successful publish 45s ago, more than 3 intervals of 10s: " + failed.Error() + "\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, clk := newTestAgent(t, nil)
			if tc.lastSuccess >= 0 {
				a.lastSuccess = t0.Add(tc.lastSuccess)
			}
			a.lastErr = tc.lastErr
			clk.Step(tc.now)
			code, body := get(t, a, "/healthz")
			if code != tc.wantCode {
				t.Errorf("code %d, want %d", code, tc.wantCode)
			}
			if diff := cmp.Diff(tc.wantBody, body); diff != "" {
				t.Errorf("body (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestUnreachable runs the agent against an apiserver that refuses every
// request: /healthz says 200 until 3 intervals have passed, then 503 with
// the error, and every sample counts a publish error.
func TestUnreachable(t *testing.T) {
	client := fake.NewSimpleClientset()
	client.PrependReactor("*", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	})
	a, clk := newTestAgent(t, func(o *Options) {
		o.Client = client
		o.Backoff = wait.Backoff{Duration: time.Second, Factor: 2, Steps: 10, Cap: time.Minute}
	})
	// codes are the answers of /healthz at some times since the start.
	codes := map[time.Duration]int{}
	if err := drive(t, clk, func() bool {
		switch elapsed := clk.Since(t0); elapsed {
		case 0, 30 * time.Second, 31 * time.Second:
			codes[elapsed], _ = get(t, a, "/healthz")
		}
		return clk.Since(t0) >= 31*time.Second
	}, func(ctx context.Context) error {
		a.Run(ctx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wantCodes := map[time.Duration]int{0: http.StatusOK, 30 * time.Second: http.StatusOK, 31 * time.Second: http.StatusServiceUnavailable}
	if diff := cmp.Diff(wantCodes, codes); diff != "" {
		t.Errorf("/healthz codes by time since the start (-want,+got):\n%s", diff)
	}
	_, body := get(t, a, "/healthz")
	if want := "no successful publish in the 31s since the agent started, more than 3 intervals of 10s: reading NodeMetrics n1: dial tcp 127.0.0.1:6443: connect: connection refused\n"; body != want {
		t.Errorf("/healthz body %q, want %q", body, want)
	}
	// Samples publish at 10 s, then 1 s + 10 s later (21 s), then 2 s +
	// 10 s later (33 s, after the end).
	if got, err := testutil.GetCounterMetricValue(a.metrics.publishErrors); err != nil || got != 2 {
		t.Errorf("publish_errors_total = %v (%v), want 2", got, err)
	}
}

// TestMetrics checks what /metrics serves after one sample of the
// fixtures.
func TestMetrics(t *testing.T) {
	a, clk := newTestAgent(t, nil)
	if err := once(t, a, clk); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, a, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	// The fractions of collect's TestUtilizeFixtures; the sample ends
	// 10 s after t0, 2026-01-01T12:00:00Z.
	want := `
# HELP aisched_agent_collector_errors_total [ALPHA] Failed reads of the node, by source: utilization (/proc and /sys counters, two reads per sample), performance, disk_throughput (the start-up measurement), nvidia_smi.
# TYPE aisched_agent_collector_errors_total counter
aisched_agent_collector_errors_total{source="disk_throughput"} 0
aisched_agent_collector_errors_total{source="nvidia_smi"} 0
aisched_agent_collector_errors_total{source="performance"} 0
aisched_agent_collector_errors_total{source="utilization"} 0
# HELP aisched_agent_last_sample_timestamp_seconds [ALPHA] End of the window of the last sample, in seconds since the Unix epoch.
# TYPE aisched_agent_last_sample_timestamp_seconds gauge
aisched_agent_last_sample_timestamp_seconds 1.76726881e+09
# HELP aisched_agent_node_utilization_ratio [ALPHA] Utilisation of the node's resource (cpu, memory, network, disk) over the last sample's window, from 0 to 1; absent when unknown.
# TYPE aisched_agent_node_utilization_ratio gauge
aisched_agent_node_utilization_ratio{resource="cpu"} 0.6
aisched_agent_node_utilization_ratio{resource="disk"} 0.7
aisched_agent_node_utilization_ratio{resource="memory"} 0.75
aisched_agent_node_utilization_ratio{resource="network"} 0.15
# HELP aisched_agent_publish_errors_total [ALPHA] Samples that could not be published to the apiserver.
# TYPE aisched_agent_publish_errors_total counter
aisched_agent_publish_errors_total 0
# HELP aisched_agent_samples_total [ALPHA] Samples of the node taken, published or not.
# TYPE aisched_agent_samples_total counter
aisched_agent_samples_total 1
`
	names := []string{
		"aisched_agent_collector_errors_total",
		"aisched_agent_last_sample_timestamp_seconds",
		"aisched_agent_node_utilization_ratio",
		"aisched_agent_publish_errors_total",
		"aisched_agent_samples_total",
	}
	if err := testutil.GatherAndCompare(a.metrics.registry, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	for _, name := range names {
		if !strings.Contains(body, "\n"+name) {
			t.Errorf("GET /metrics serves no %s:\n%s", name, body)
		}
	}
}
