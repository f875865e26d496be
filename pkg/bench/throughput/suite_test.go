package throughput

import (
	"context"
	"strings"
	"testing"
)

// The table says, row by row, both cases' pods/s with every round, the
// ratio against the goal and whether it is met, and the load; rows that
// report memory get a table of their own.
func TestWriteTable(t *testing.T) {
	res := []RowResult{
		{Row: Suite[0], Result: &Result{
			Profiles: []ProfileResult{
				{Name: "default-scheduler", PodsPerSecond: 200, Rounds: []float64{190, 200, 210}, Load: [2]float64{1.5, 2}},
				{Name: "aisched", PodsPerSecond: 196, Rounds: []float64{196, 180, 199}, Load: [2]float64{1, 2.5}},
			},
			Ratios: map[string]float64{"default-scheduler": 1, "aisched": 0.98},
			Load:   [2]float64{1, 2.5},
		}},
		{Row: Suite[3], Result: &Result{
			Profiles: []ProfileResult{{Name: "default-scheduler", PodsPerSecond: 100}, {Name: "aisched", PodsPerSecond: 100}},
			Ratios:   map[string]float64{"default-scheduler": 1, "aisched": 1},
		}},
		{Row: Suite[1], Result: &Result{
			Profiles: []ProfileResult{
				{Name: "default-scheduler", PodsPerSecond: 100, Memory: Memory{RSSMiB: 3000, PeakRSSMiB: 3100, SchedulerHeapMiB: 400}},
				{Name: "aisched", PodsPerSecond: 100, Memory: Memory{RSSMiB: 3100, PeakRSSMiB: 3200, SchedulerHeapMiB: 480}},
			},
			Ratios: map[string]float64{"default-scheduler": 1, "aisched": 1},
		}},
	}
	var b strings.Builder
	if err := WriteTable(&b, res); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"| CPU pods, 5,000 nodes, 10,000 pods | default-scheduler: 200.0 [190 200 210] | aisched: 196.0 [196 180 199] | 0.98 | >= 0.95 | yes | 1.0-2.5 |",
		// Equal is not above 1.
		"| the same, 50% of the cards held before | default-scheduler: 100.0 | aisched: 100.0 | 1.00 | > 1.00 | no |",
		"| CPU pods, 15,000 nodes, 30,000 pods, aisched | 3100 (3200) | 480 | 1.20 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

// Bad --rows and rows without --suite are refused by the command; the
// library refuses a row it cannot run before starting any cluster.
func TestRunSuiteRefusesBadRows(t *testing.T) {
	row := Suite[4]
	row.Pods = 5000 // 90% full leaves 1,000 cards
	if _, err := RunSuite(context.Background(), []Row{row}, Options{}); err == nil || !strings.Contains(err.Error(), "lower --pods or --fill") {
		t.Errorf("RunSuite of 5,000 pods on 1,000 free cards: %v, want the cards left named", err)
	}
}

// The difference of two snapshots of the scheduler's metrics is the time
// per attempt of the measurement alone.
func TestMetricsSub(t *testing.T) {
	before := schedulerMetrics{seconds: map[string]float64{"Filter": 1, "Algorithm": 2}, attempts: 100, batching: map[string]float64{"batch_attempts_total/no_hint": 100}}
	after := schedulerMetrics{seconds: map[string]float64{"Filter": 1.5, "Algorithm": 3, "Score": 0.2}, attempts: 200, batching: map[string]float64{"batch_attempts_total/no_hint": 300}}
	us, batching := after.sub(before)
	want := map[string]float64{"Filter": 5000, "Algorithm": 10000, "Score": 2000}
	for k, v := range want {
		if d := us[k] - v; d > 1e-6 || d < -1e-6 {
			t.Errorf("%s: %v us per attempt, want %v", k, us[k], v)
		}
	}
	if batching["batch_attempts_total/no_hint"] != 200 {
		t.Errorf("batching %v, want 200 attempts without hint", batching)
	}
}
