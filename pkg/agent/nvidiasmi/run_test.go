package nvidiasmi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeSMI writes a fake nvidia-smi into a new directory, which becomes the
// whole PATH for the rest of the test, and returns the fake's path and the
// log to which it appends the --query-gpu list of each call. Like the real
// one, the fake exits 2 unless called with --query-gpu and
// --format=csv,noheader,nounits; then it runs body, a shell script that
// finds cat, sleep and the test data in $cat, $sleep and $testdata, and
// the query in $query.
func fakeSMI(t *testing.T, body string) (path, log string) {
	t.Helper()
	testdata, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	var tools []string
	for _, tool := range []string{"cat", "sleep"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("no %s for the fake nvidia-smi: %v", tool, err)
		}
		tools = append(tools, p)
	}
	dir := t.TempDir()
	path = filepath.Join(dir, "nvidia-smi")
	log = filepath.Join(dir, "calls.log")
	script := fmt.Sprintf(`#!/bin/sh
cat=%q sleep=%q testdata=%q
query= format=
for arg; do
	case $arg in
	--query-gpu=*) query=${arg#--query-gpu=} ;;
	--format=*) format=${arg#--format=} ;;
	esac
done
echo "$query" >>%q
if [ -z "$query" ] || [ "$format" != csv,noheader,nounits ]; then
	echo "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help." >&2
	exit 2
fi
%s
`, tools[0], tools[1], testdata, log, body)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	return path, log
}

// calls returns the --query-gpu lists that the fake was called with.
func calls(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

func TestRunnerCards(t *testing.T) {
	tests := []struct {
		name string
		// body is the fake nvidia-smi's script, see fakeSMI.
		body string
		// file holds the output that Cards should parse; none when empty.
		file string
		// wantCalls are the queries nvidia-smi should get.
		wantCalls []string
		// wantErr is the substring of the error; wantNotFound says it
		// wraps ErrNotFound.
		wantErr      string
		wantNotFound bool
	}{
		{
			name:      "A100 node",
			body:      `"$cat" "$testdata/a100-sxm4-80gb-x8.csv"`,
			file:      "a100-sxm4-80gb-x8.csv",
			wantCalls: []string{Query},
		},
		{
			name:      "T4 node",
			body:      `"$cat" "$testdata/tesla-t4-x2.csv"`,
			file:      "tesla-t4-x2.csv",
			wantCalls: []string{Query},
		},
		{
			// Driver 470 rejects compute_cap; Cards asks again without it.
			name: "old driver",
			body: `case $query in *compute_cap*)
	echo 'Field "compute_cap" is not a valid field to query.'
	exit 2
esac
"$cat" "$testdata/tesla-t4-x2-r470.csv"`,
			file:      "tesla-t4-x2-r470.csv",
			wantCalls: []string{Query, legacyQuery},
		},
		{
			// A field unknown even to the retry is not retried again.
			name:      "invalid field twice",
			body:      `echo 'Field "index" is not a valid field to query.'; exit 2`,
			wantCalls: []string{Query, legacyQuery},
			wantErr:   `Field "index" is not a valid field to query.`,
		},
		{
			name:         "no devices",
			body:         `echo 'No devices were found'; exit 6`,
			wantCalls:    []string{Query},
			wantErr:      "No devices were found",
			wantNotFound: true,
		},
		{
			name:      "driver not loaded",
			body:      `echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."; exit 9`,
			wantCalls: []string{Query},
			wantErr:   "exit status 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
		},
		{
			name:      "failure without message",
			body:      `exit 15`,
			wantCalls: []string{Query},
			wantErr:   "--query-gpu=" + Query + ": exit status 15",
		},
		{
			// The cards of the good lines come back with the error.
			name: "bad line",
			body: `"$cat" "$testdata/h100-80gb-hbm3.csv"
echo '1, GPU-x, NVIDIA H100 80GB HBM3, lots, 0, 0, 1980, 9.0'`,
			file:      "h100-80gb-hbm3.csv",
			wantCalls: []string{Query},
			wantErr:   `line 2: memory.total "lots": not a number`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, log := fakeSMI(t, tc.body)
			got, err := Runner{}.Cards(t.Context())
			var wantCards []Card
			if tc.file != "" {
				wantCards, _ = Parse(readTestdata(t, tc.file))
			}
			if diff := cmp.Diff(wantCards, got); diff != "" {
				t.Errorf("Cards (-want,+got):\n%s", diff)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Cards: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Cards error = %v, want one containing %q", err, tc.wantErr)
			}
			if gotNotFound := errors.Is(err, ErrNotFound); gotNotFound != tc.wantNotFound {
				t.Errorf("errors.Is(%v, ErrNotFound) = %v, want %v", err, gotNotFound, tc.wantNotFound)
			}
			if diff := cmp.Diff(tc.wantCalls, calls(t, log)); diff != "" {
				t.Errorf("nvidia-smi calls (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestRunnerPath checks that Runner.Path is used instead of PATH.
func TestRunnerPath(t *testing.T) {
	path, log := fakeSMI(t, `"$cat" "$testdata/rtx-4090.csv"`)
	t.Setenv("PATH", t.TempDir())
	got, err := Runner{Path: path}.Cards(t.Context())
	if err != nil {
		t.Fatalf("Cards: %v", err)
	}
	want, _ := Parse(readTestdata(t, "rtx-4090.csv"))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Cards (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{Query}, calls(t, log)); diff != "" {
		t.Errorf("nvidia-smi calls (-want,+got):\n%s", diff)
	}
}

// TestRunnerNotFound checks that a node without nvidia-smi reports
// ErrNotFound, whether looked up on PATH or named.
func TestRunnerNotFound(t *testing.T) {
	tests := []struct {
		name   string
		runner Runner
	}{
		{name: "not on PATH"},
		{name: "named path absent", runner: Runner{Path: "/nonexistent/nvidia-smi"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PATH", t.TempDir())
			got, err := tc.runner.Cards(t.Context())
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("Cards error = %v, want ErrNotFound", err)
			}
			if got != nil {
				t.Errorf("Cards = %v, want none", got)
			}
		})
	}
}

// TestRunnerTimeout checks that a hung nvidia-smi is killed once the
// timeout passes, and that the error says so.
func TestRunnerTimeout(t *testing.T) {
	fakeSMI(t, `exec "$sleep" 60`)
	start := time.Now()
	_, err := Runner{Timeout: 100 * time.Millisecond}.Cards(t.Context())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Cards error = %v, want context.DeadlineExceeded", err)
	}
	// Far below the 60s sleep; generous for loaded machines.
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("Cards returned after %v, want soon after the 100ms timeout", elapsed)
	}
}
