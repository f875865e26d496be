package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
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

// TestBenchNative runs the bench command with the native case, upstream
// GangScheduling on native PodGroups. The command measures each case in a
// child process, which keeps the GenericWorkload gate out of this one.
func TestBenchNative(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "bench", "throughput", "--nodes", "4", "--pods", "8", "--rounds", "1",
		"--profiles", "default-scheduler,"+bench.NativeCase+"@4")
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("aisched bench: %v\n%s", err, stderr.String())
	}
	var res bench.ThroughputResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("bench output %q: %v", out, err)
	}
	if len(res.Profiles) != 2 {
		t.Fatalf("got %d results, want 2: %s", len(res.Profiles), out)
	}
	for _, p := range res.Profiles {
		if p.Scheduled != 8 || res.Ratios[p.Name] <= 0 {
			t.Errorf("case %s: %d pods scheduled, ratio %v; want 8 and a positive ratio", p.Name, p.Scheduled, res.Ratios[p.Name])
		}
	}
}
