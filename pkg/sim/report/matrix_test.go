package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aisched/aisched/pkg/sim/metrics"
)

func TestMatrixCompare(t *testing.T) {
	h := func(v float64) *float64 { return &v }
	rep := &Report{Scenario: "s", Metrics: []string{"pending_pods", "balance_efficiency_h", "pods_per_second"}, Policies: []Policy{
		{Name: "default-scheduler", Runs: []Run{{Seed: 1, Result: metrics.Result{PendingPods: 2, BalanceEfficiencyH: h(0.5), PodsPerSecond: 10}}}},
		{Name: "aisched", Runs: []Run{{Seed: 1, Result: metrics.Result{PendingPods: 3, BalanceEfficiencyH: h(0.6), PodsPerSecond: 20}}}},
	}}
	other := &Report{Scenario: "only-one-policy", Metrics: []string{"pending_pods"}, Policies: []Policy{{Name: "aisched"}}}
	m := &Matrix{Reports: []*Report{rep, other}, Base: "default-scheduler", Candidate: "aisched", Skipped: []Skipped{{Scenario: "t", Reason: "no trace"}}}
	got, err := m.Compare()
	if err != nil {
		t.Fatal(err)
	}
	// Fewer pending is better, a higher H is better, pods/s has no direction.
	want := []Comparison{
		{Scenario: "s", Metric: "pending_pods", Base: 2.0, Candidate: 3.0, Verdict: "worse"},
		{Scenario: "s", Metric: "balance_efficiency_h", Base: 0.5, Candidate: 0.6, Verdict: "better"},
		{Scenario: "s", Metric: "pods_per_second", Base: 10.0, Candidate: 20.0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Compare (-want,+got):\n%s", diff)
	}
	var md bytes.Buffer
	if err := m.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"| s | pending_pods | 2 | 3 | worse |", "aisched: 1 better, 1 worse, 0 the same.", "- t: no trace", "Scenario only-one-policy"} {
		if !strings.Contains(md.String(), line) {
			t.Errorf("markdown lacks %q:\n%s", line, md.String())
		}
	}
}
