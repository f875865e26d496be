package sim

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/aisched/aisched/pkg/sim/scenario"
	"github.com/aisched/aisched/pkg/simcluster"
)

// BenchmarkScenarioRun is one policy and one seed of a shipped
// scenario (gpu-mixed, aisched) on the fast engine:
// a fresh cluster, 20 pods, the settle, the measurement.
//
//	go test -run '^$' -bench ScenarioRun ./pkg/sim/
func BenchmarkScenarioRun(b *testing.B) {
	s, err := scenario.Load(filepath.Join("..", "..", "scenarios", "gpu-mixed.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	s.Seeds = s.Seeds[:1]
	s.Policies = s.Policies[1:]
	for b.Loop() {
		if _, err := Run(context.Background(), s, Options{Engine: simcluster.Fast, Parallel: 1}); err != nil {
			b.Fatal(err)
		}
	}
}
