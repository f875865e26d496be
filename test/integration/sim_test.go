package integration

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aisched/aisched/pkg/sim"
	"github.com/aisched/aisched/pkg/sim/scenario"
)

// TestSimRun runs a tiny scenario end to end, each policy on a fresh
// cluster with the real scheduler, and compares the report with the
// expected one: the GPU pod asks for 20000 MiB per card, more than a T4
// has, so default-scheduler binds it to a T4 (1 of 2 cards allocated, one
// misplaced pod) and aisched's GPUFit leaves it pending (nothing
// allocated). The gang of 2 fits at once under both.
func TestSimRun(t *testing.T) {
	t.Parallel()
	s, err := scenario.Load(filepath.Join("testdata", "sim-tiny.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sim.Run(context.Background(), s, sim.Options{Settle: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := rep.WriteMarkdown(&got); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "sim-tiny.md"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got.String()); diff != "" {
		t.Errorf("report (-want,+got):\n%s", diff)
	}
}
