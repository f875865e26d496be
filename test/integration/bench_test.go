package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aisched/aisched/pkg/bench/latency"
	"github.com/aisched/aisched/pkg/bench/throughput"
	"github.com/aisched/aisched/pkg/scheduler"
)

// TestBenchThroughput runs the throughput benchmark at toy scale, plain
// pods and 4-pod groups, so that the command the figures come from keeps
// working.
func TestBenchThroughput(t *testing.T) {
	t.Parallel()
	res, err := throughput.Run(context.Background(), throughput.Options{
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
	if _, err := throughput.Run(context.Background(), throughput.Options{Nodes: 1, Pods: 10, Profiles: []string{"aisched@3"}}); err == nil {
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
		"--profiles", "default-scheduler,"+throughput.NativeCase+"@4")
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("aisched bench: %v\n%s", err, stderr.String())
	}
	var res throughput.Result
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

// TestBenchGateway runs the gateway benchmark at toy scale: the demo model
// and the gateway as child processes, a short load at a low rate. It checks
// that every request passes and that the gateway's goroutines do not grow,
// not how fast it is: the machine may be busy.
func TestBenchGateway(t *testing.T) {
	t.Parallel()
	out, err := runCommand(t, "bench", "gateway", "--rates", "200", "--duration", "2s", "--warmup", "500ms", "--idle", "1s")
	if err != nil {
		t.Fatalf("aisched bench gateway: %v\n%s", err, out)
	}
	// Progress comes first, on stderr; the JSON starts with a line "{".
	start := strings.Index("\n"+out, "\n{\n")
	if start < 0 {
		t.Fatalf("no JSON in the output:\n%s", out)
	}
	var res latency.GatewayResult
	var raw struct {
		Rates []map[string]json.RawMessage `json:"rates"`
	}
	if err := json.NewDecoder(strings.NewReader(out[start:])).Decode(&res); err != nil {
		t.Fatalf("bench output: %v\n%s", err, out)
	}
	if err := json.NewDecoder(strings.NewReader(out[start:])).Decode(&raw); err != nil {
		t.Fatalf("bench output: %v\n%s", err, out)
	}
	if len(res.Rates) != 1 || len(raw.Rates) != 1 {
		t.Fatalf("got %d rate results, want 1:\n%s", len(res.Rates), out)
	}
	r := res.Rates[0]
	for name, run := range map[string]latency.LoadResult{"direct": r.Direct, "gateway": r.Gateway} {
		if run.AchievedRate <= 0 || run.OK == 0 || run.Errors != 0 || run.Non200 != 0 {
			t.Errorf("%s: %d answers 200 at %.1f/s, %d errors, %d not 200; want some at a positive rate and no other (first error %q)",
				name, run.OK, run.AchievedRate, run.Errors, run.Non200, run.FirstError)
		}
	}
	// On Linux the machine's and the gateway's CPU are read from /proc.
	if r.Gateway.GatewayCPUMicrosPerRequest <= 0 || r.Gateway.MachineBusyPercent <= 0 {
		t.Errorf("gateway CPU %.1f us per request, machine %.0f%% busy: want both measured", r.Gateway.GatewayCPUMicrosPerRequest, r.Gateway.MachineBusyPercent)
	}
	for _, key := range []string{"added_p50_ms", "added_p99_ms"} {
		if _, ok := raw.Rates[0][key]; !ok {
			t.Errorf("no %s in the result:\n%s", key, out)
		}
	}
	if res.GoroutinesBefore <= 0 || res.GoroutinesAfter > res.GoroutinesBefore+20 {
		t.Errorf("gateway goroutines %d before, %d after: want a count before and at most 20 more after", res.GoroutinesBefore, res.GoroutinesAfter)
	}
}
