package integration

import (
	"context"
	"testing"
	"time"

	"github.com/aisched/aisched/pkg/bench"
	"github.com/aisched/aisched/pkg/scheduler"
)

// TestBenchThroughput runs the throughput benchmark at toy scale, so that
// the command the figures come from keeps working.
func TestBenchThroughput(t *testing.T) {
	t.Parallel()
	res, err := bench.Throughput(context.Background(), bench.ThroughputOptions{
		Nodes: 4, Pods: 20, GPU: true, Rounds: 1, Timeout: 2 * time.Minute,
		Profiles: []string{"default-scheduler", scheduler.AischedProfile},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Profiles) != 2 {
		t.Fatalf("got %d profile results, want 2", len(res.Profiles))
	}
	for _, p := range res.Profiles {
		if p.Scheduled != 20 || p.PodsPerSecond <= 0 {
			t.Errorf("profile %s: %d pods scheduled at %.1f pods/s, want 20 at a positive rate", p.Name, p.Scheduled, p.PodsPerSecond)
		}
	}
	if res.Ratio <= 0 {
		t.Errorf("ratio %v, want a positive number", res.Ratio)
	}
}
