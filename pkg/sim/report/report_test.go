package report

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/aisched/aisched/pkg/sim/metrics"
	"github.com/aisched/aisched/pkg/sim/scenario"
)

// testReport has two policies; "aisched" ran three seeds whose pending pods
// are 3, 1, 2 (median 2) and mean node variance 10, 30, 20 (median 20).
func testReport() *Report {
	return &Report{
		Scenario: "example",
		Metrics:  []string{"pending_pods", "mean_node_variance", "gpu_allocation_rate", "group_wait_seconds"},
		Policies: []Policy{
			{Name: "default-scheduler", Runs: []Run{{Seed: 42, Result: metrics.Result{PendingPods: 4, MeanNodeVariance: 230.12345, GPUAllocationRate: ptr.To(0.5)}}}},
			{Name: "aisched", Runs: []Run{
				{Seed: 42, Result: metrics.Result{PendingPods: 3, MeanNodeVariance: 10, GroupWaitSeconds: &metrics.Percentiles{P50: 1, P95: 2}}},
				{Seed: 43, Result: metrics.Result{PendingPods: 1, MeanNodeVariance: 30}},
				{Seed: 44, Result: metrics.Result{PendingPods: 2, MeanNodeVariance: 20}},
			}},
		},
	}
}

// traceReport is a trace replay: BestFit ran seeds 42 and 43, whose curves
// read 10 and 12 at 90%, 7 and 8 at 100% (medians 11 and 7.5); seed 43
// never reached 110%, so the median there is seed 42's 6.
func traceReport() *Report {
	curve := func(points ...float64) []metrics.CurvePoint {
		var out []metrics.CurvePoint
		for i, v := range points {
			out = append(out, metrics.CurvePoint{ArrivedPct: 90 + 10*i, UnallocatedGPUPct: v})
		}
		return out
	}
	return &Report{
		Scenario: "openb_pod_list_default.csv",
		Metrics:  []string{"unallocated_gpu_pct", "unallocated_gpu_pct_curve", "inexpressible_pods"},
		Policies: []Policy{
			{Name: "BestFit", Runs: []Run{
				{Seed: 42, Result: metrics.Result{UnallocatedGPUPct: ptr.To(7.0), UnallocatedGPUPctCurve: curve(10, 7, 6), InexpressiblePods: ptr.To(0)}},
				{Seed: 43, Result: metrics.Result{UnallocatedGPUPct: ptr.To(8.0), UnallocatedGPUPctCurve: curve(12, 8), InexpressiblePods: ptr.To(0)}},
			}},
			{Name: "default-scheduler", Runs: []Run{
				{Seed: 42, Result: metrics.Result{UnallocatedGPUPct: ptr.To(30.5), UnallocatedGPUPctCurve: curve(33, 30.5, 29), InexpressiblePods: ptr.To(4114)}},
			}},
		},
	}
}

func TestSummaryCurve(t *testing.T) {
	got, err := traceReport().Policies[0].Summary(traceReport().Metrics)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"unallocated_gpu_pct":       7.5,
		"unallocated_gpu_pct_curve": []metrics.CurvePoint{{ArrivedPct: 90, UnallocatedGPUPct: 11}, {ArrivedPct: 100, UnallocatedGPUPct: 7.5}, {ArrivedPct: 110, UnallocatedGPUPct: 6}},
		"inexpressible_pods":        0.0,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Summary (-want,+got):\n%s", diff)
	}
}

// TestSummaryEven: with two seeds the median is the mean of both,
// (0 + 4) / 2 = 2.
func TestSummaryEven(t *testing.T) {
	p := Policy{Name: "p", Runs: []Run{{Seed: 1, Result: metrics.Result{PendingPods: 0}}, {Seed: 2, Result: metrics.Result{PendingPods: 4}}}}
	got, err := p.Summary([]string{"pending_pods"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"pending_pods": 2.0}, got); diff != "" {
		t.Errorf("Summary (-want,+got):\n%s", diff)
	}
}

func TestSummary(t *testing.T) {
	got, err := testReport().Policies[1].Summary(testReport().Metrics)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"pending_pods": 2.0, "mean_node_variance": 20.0, "group_wait_seconds": map[string]any{"p50": 1.0, "p95": 2.0}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Summary (-want,+got):\n%s", diff)
	}
}

// TestGolden compares the three renderings with testdata/example.*; run
// with UPDATE_GOLDEN=1 to rewrite them after a deliberate change.
func TestGolden(t *testing.T) {
	r, tr := testReport(), traceReport()
	for _, tc := range []struct {
		file  string
		write func(*bytes.Buffer) error
	}{
		{"example.md", func(b *bytes.Buffer) error { return r.WriteMarkdown(b) }},
		{"example.json", func(b *bytes.Buffer) error { return r.WriteJSON(b) }},
		{"example.csv", func(b *bytes.Buffer) error { return r.WriteCSV(b) }},
		{"example.svg", func(b *bytes.Buffer) error { return r.WriteSVG(b) }},
		{"trace.md", func(b *bytes.Buffer) error { return tr.WriteMarkdown(b) }},
		{"trace.json", func(b *bytes.Buffer) error { return tr.WriteJSON(b) }},
		{"trace.svg", func(b *bytes.Buffer) error { return tr.WriteSVG(b) }},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.write(&b); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.file)
			if os.Getenv("UPDATE_GOLDEN") == "1" {
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), b.String()); diff != "" {
				t.Errorf("%s (-want,+got):\n%s", tc.file, diff)
			}
		})
	}
}

// TestMetricKeys checks that the keys a scenario may ask for are exactly
// the JSON keys of a result with every metric set.
func TestMetricKeys(t *testing.T) {
	full := withTeams(metrics.Result{
		BalanceEfficiencyH: ptr.To(1.0), GPUAllocationRate: ptr.To(1.0), UnallocatedGPUPct: ptr.To(1.0),
		UnallocatedGPUPctCurve: []metrics.CurvePoint{{ArrivedPct: 100}}, GroupWaitSeconds: &metrics.Percentiles{},
		MakespanSeconds: ptr.To(1.0), GPUBusyPct: ptr.To(1.0), GPUWorkPct: ptr.To(1.0), TopologyRequiredShare: ptr.To(1.0), TopologyPreferredShare: ptr.To(1.0), TopologyDomainsSpanned: ptr.To(1.0), TopologySlicesWhole: ptr.To(1.0),
	})
	known := slices.Concat(scenario.MetricKeys, scenario.QueueMetricKeys)
	got, err := values(full, known)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(known) {
		t.Errorf("a full result has %d of the %d scenario metric keys: %v", len(got), len(known), got)
	}
	if keys := jsonKeys(t, full); len(keys) != len(known) {
		t.Errorf("a full result has %d JSON keys, the scenario knows %d", len(keys), len(known))
	}
}

// withTeams sets the teams' metrics of r.
func withTeams(r metrics.Result) metrics.Result {
	r.MeanGPUAllocationRate, r.FairShareDeviationGPUs, r.GuaranteeWaitSeconds = ptr.To(1.0), &metrics.Deviation{}, &metrics.Tail{}
	r.EvictedPerReclaimedGPU, r.IdleGPUHoursWhileFitWaits, r.JobsNeverStarted = ptr.To(1.0), ptr.To(0.0), ptr.To(0)
	return r
}

// TestMetricMeanings checks that every metric a report can carry says
// what it means, so that no table has a row nobody can read.
func TestMetricMeanings(t *testing.T) {
	full := withTeams(metrics.Result{
		BalanceEfficiencyH: ptr.To(1.0), GPUAllocationRate: ptr.To(1.0), UnallocatedGPUPct: ptr.To(1.0), InexpressiblePods: ptr.To(0),
		UnallocatedGPUPctCurve: []metrics.CurvePoint{{ArrivedPct: 100}}, GroupWaitSeconds: &metrics.Percentiles{},
		MakespanSeconds: ptr.To(1.0), GPUBusyPct: ptr.To(1.0), GPUWorkPct: ptr.To(1.0), TopologyRequiredShare: ptr.To(1.0), TopologyPreferredShare: ptr.To(1.0), TopologyDomainsSpanned: ptr.To(1.0), TopologySlicesWhole: ptr.To(1.0),
	})
	keys := jsonKeys(t, full)
	all := slices.Concat(scenario.MetricKeys, scenario.TraceMetricKeys, scenario.QueueMetricKeys, slices.Collect(maps.Keys(keys)))
	for _, k := range all {
		if m, ok := Metrics[k]; !ok || m.Meaning == "" {
			t.Errorf("metric %s has no meaning in Metrics", k)
		}
	}
	if len(Metrics) != len(keys) {
		t.Errorf("Metrics has %d entries, a result %d keys", len(Metrics), len(keys))
	}
}

// jsonKeys returns the JSON keys of a result.
func jsonKeys(t *testing.T, r metrics.Result) map[string]any {
	t.Helper()
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(data, &keys); err != nil {
		t.Fatal(err)
	}
	return keys
}
