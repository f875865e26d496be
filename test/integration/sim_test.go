package integration

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aisched/aisched/pkg/sim"
	"github.com/aisched/aisched/pkg/sim/scenario"
	"github.com/aisched/aisched/pkg/sim/trace"
	"github.com/aisched/aisched/pkg/simcluster"
	"github.com/aisched/aisched/pkg/simcluster/apiserver"
)

// TestSimRun runs a tiny scenario end to end on both engines, each policy
// on a fresh cluster with the real scheduler, and compares the report with
// the expected one: the GPU pod asks for 20000 MiB per card, more than a
// T4 has, so default-scheduler binds it to a T4 (1 of 2 cards allocated,
// one misplaced pod) and aisched's GPUFit leaves it pending (nothing
// allocated). The gang of 2 fits at once under both.
func TestSimRun(t *testing.T) {
	t.Parallel()
	s, err := scenario.Load(filepath.Join("testdata", "sim-tiny.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "sim-tiny.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, engine := range []simcluster.Engine{apiserver.Engine, simcluster.Fast} {
		rep, err := sim.Run(context.Background(), s, sim.Options{Engine: engine, Settle: 2 * time.Second})
		if err != nil {
			t.Fatalf("%s engine: %v", engine.Name, err)
		}
		var got bytes.Buffer
		if err := rep.WriteMarkdown(&got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), got.String()); diff != "" {
			t.Errorf("%s engine: report (-want,+got):\n%s", engine.Name, diff)
		}
	}
}

// TestSimTrace replays the shipped sample trace end to end with the FGD
// protocol, under a profile that shares cards and one that does not, on
// the apiserver engine (the fast one replays it in TestEnginesAgree).
// Replay itself checks that the bound pods add up to what it counted and
// that no card holds more than a card.
func TestSimTrace(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "pkg", "sim", "trace", "testdata")
	nodes := readCSV(t, filepath.Join(dir, "nodes.csv"), trace.ReadNodes)
	pods := readCSV(t, filepath.Join(dir, "pods.csv"), trace.ReadPods)
	const seed = 7
	rep, err := sim.Replay(context.Background(), sim.ReplayOptions{
		Engine: apiserver.Engine, Name: "sample", Nodes: nodes, Pods: pods, Policies: sim.ProfilePolicies("BestFit", "default-scheduler"),
		Seeds: []int64{seed}, Inflate: 1.3,
	})
	if err != nil {
		t.Fatal(err)
	}
	seq := trace.Workload(pods, seed, 1.3, trace.CapacityMilli(nodes))
	shared := 0
	for _, p := range seq {
		if p.Shared() {
			shared++
		}
	}
	if shared == 0 {
		t.Fatal("the sample has no shared pods; the test would prove nothing")
	}
	for _, p := range rep.Policies {
		res := p.Runs[0].Result
		wantInexpressible := 0
		if p.Name == "default-scheduler" {
			wantInexpressible = shared
		}
		if res.InexpressiblePods == nil || *res.InexpressiblePods != wantInexpressible {
			t.Errorf("%s: inexpressible pods %v, want %d", p.Name, res.InexpressiblePods, wantInexpressible)
		}
		if res.UnallocatedGPUPct == nil || *res.UnallocatedGPUPct < 0 || *res.UnallocatedGPUPct > 100 {
			t.Errorf("%s: unallocated GPU at 100%% = %v, want a percentage", p.Name, res.UnallocatedGPUPct)
		}
		if len(res.UnallocatedGPUPctCurve) == 0 {
			t.Errorf("%s: no curve", p.Name)
		}
		if bound := len(seq) - res.PendingPods - wantInexpressible; bound <= 0 {
			t.Errorf("%s: no pod bound", p.Name)
		}
		t.Logf("%s: unallocated GPU at 100%% %.2f%%, %d pods did not fit, %d inexpressible", p.Name, *res.UnallocatedGPUPct, res.PendingPods, *res.InexpressiblePods)
	}
}

// TestSimTraceDRA replays the sample trace with GPUs requested through
// claims of NVIDIA's DRA driver: upstream's first fit (default-scheduler)
// can then express the shared pods too, and Replay checks that the bound
// pods' claims add up to what it counted, no device beyond its shares.
func TestSimTraceDRA(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "pkg", "sim", "trace", "testdata")
	nodes := readCSV(t, filepath.Join(dir, "nodes.csv"), trace.ReadNodes)
	pods := readCSV(t, filepath.Join(dir, "pods.csv"), trace.ReadPods)
	opts := sim.ReplayOptions{
		Engine: apiserver.Engine, Name: "sample", Nodes: nodes, Pods: pods, Policies: sim.ProfilePolicies("default-scheduler", "aisched"),
		Seeds: []int64{7}, Inflate: 1.3, DRA: true,
	}
	rep, err := sim.Replay(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	seq := trace.Workload(pods, 7, 1.3, trace.CapacityMilli(nodes))
	for _, p := range rep.Policies {
		res := p.Runs[0].Result
		if res.InexpressiblePods == nil || *res.InexpressiblePods != 0 {
			t.Errorf("%s: inexpressible pods %v, want none through DRA", p.Name, res.InexpressiblePods)
		}
		if res.UnallocatedGPUPct == nil || len(seq)-res.PendingPods <= 0 {
			t.Fatalf("%s: unallocated GPU %v, %d of %d pods pending: want pods bound through their claims", p.Name, res.UnallocatedGPUPct, res.PendingPods, len(seq))
		}
		t.Logf("%s: unallocated GPU at 100%% %.2f%%, %d pods did not fit", p.Name, *res.UnallocatedGPUPct, res.PendingPods)
	}
}

func readCSV[T any](t *testing.T, path string, read func(io.Reader, string) ([]T, error)) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := read(f, path)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
