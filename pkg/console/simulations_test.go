package console

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/aisched/aisched/scenarios"
)

// TestShippedScenarios checks that the simulations page offers every
// embedded scenario but the trace replays, which need the trace's files.
func TestShippedScenarios(t *testing.T) {
	files, err := fs.Glob(scenarios.Files, "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	offered := map[string]bool{}
	for _, s := range (&Simulations{}).scenarios() {
		if s.Description == "" {
			t.Errorf("scenario %s has no description", s.Name)
		}
		offered[s.Name] = true
	}
	traces := 0
	for _, f := range files {
		name := strings.TrimSuffix(f, ".yaml")
		trace := strings.HasPrefix(name, "trace-")
		if trace {
			traces++
		}
		if offered[name] == trace {
			t.Errorf("%s: offered %v, want %v (a scenario's name is its file's)", f, offered[name], !trace)
		}
	}
	if traces == 0 || len(offered) == 0 {
		t.Errorf("%d trace scenarios and %d offered among %d files, want some of each", traces, len(offered), len(files))
	}
}
