package integration

import (
	"context"
	"testing"
	"time"

	"github.com/aisched/aisched/pkg/bench"
	"github.com/aisched/aisched/pkg/scheduler"
)

// TestBenchThroughput runs the throughput benchmark at toy scale, plain
// pods and 4-pod groups, so that the command the figures come from keeps
// working.
func TestBenchThroughput(t *testing.T) {
	t.Parallel()
	res, err := bench.Throughput(context.Background(), bench.ThroughputOptions{
		Nodes: 4, Pods: 20, GPU: true, Rounds: 1, Timeout: 2 * time.Minute,
		Profiles: []string{"default-scheduler", scheduler.AischedProfile, scheduler.AischedProfile + "@4"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Profiles) != 3 {
		t.Fatalf("got %d profile results, want 3", len(res.Profiles))
	}
	for _, p := range res.Profiles {
		if p.Scheduled != 20 || p.PodsPerSecond <= 0 {
			t.Errorf("profile %s: %d pods scheduled at %.1f pods/s, want 20 at a positive rate", p.Name, p.Scheduled, p.PodsPerSecond)
		}
	}
	for _, p := range res.Profiles {
		if r := res.Ratios[p.Name]; r <= 0 {
			t.Errorf("ratio of %s %v, want a positive number", p.Name, r)
		}
	}
	if _, err := bench.Throughput(context.Background(), bench.ThroughputOptions{Nodes: 1, Pods: 10, Profiles: []string{"aisched@3"}}); err == nil {
		t.Error("10 pods in groups of 3: no error, want one")
	}
}
