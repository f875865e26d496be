package engine

import (
	"context"
	"testing"
	"time"
)

func TestTmpIdleHour(t *testing.T) {
	c := startTestClusterWith(t, Options{MetricsInterval: -1})
	f := c.(*fastCluster)
	began := time.Now()
	steps := 0
	ctx := context.Background()
	limit := c.Now().Add(10 * time.Minute)
	for {
		if err := f.quiesce(ctx); err != nil {
			t.Fatal(err)
		}
		if next, ok := f.clock.Next(); ok && steps < 40 {
			t.Logf("step to +%v", next.Sub(limit.Add(-10*time.Minute)))
		}
		if !f.clock.Step(limit) {
			break
		}
		steps++
	}
	t.Logf("10 idle virtual minutes: %d steps in %v", steps, time.Since(began))
}
