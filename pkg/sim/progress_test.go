package sim

import (
	"strings"
	"testing"
	"time"
)

func TestETA(t *testing.T) {
	for _, tc := range []struct {
		elapsed     time.Duration
		done, total int
		want        string
	}{
		// 1 of 4 in 10s: 3 more at 10s each.
		{10 * time.Second, 1, 4, "ETA 30s   "},
		{10 * time.Second, 0, 4, "ETA unknown"},
		{10 * time.Second, 4, 4, "done in 10s   "},
	} {
		if got := eta(tc.elapsed, tc.done, tc.total); got != tc.want {
			t.Errorf("eta(%s, %d, %d) = %q, want %q", tc.elapsed, tc.done, tc.total, got, tc.want)
		}
	}
}

// tickLines writes a line at every tenth of the work: 10 lines for 100
// pods ticked one by one, at 1, 11, ..., 91.
func TestTickLines(t *testing.T) {
	var out strings.Builder
	tick := tickLines(&out, "pods")
	for done := range 101 {
		tick(done, 100)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 10 {
		t.Fatalf("%d lines, want 10:\n%s", len(lines), out.String())
	}
	if !strings.HasPrefix(lines[0], "1/100 pods after 0s, ETA ") || !strings.HasPrefix(lines[9], "91/100 pods after ") {
		t.Errorf("lines:\n%s", out.String())
	}
}

// tickBar redraws at most ten times a second, but always at the end,
// which ends the line.
func TestTickBar(t *testing.T) {
	var out strings.Builder
	tick := tickBar(&out, "runs")
	tick(0, 4)
	tick(1, 4) // within 100ms of the first: not drawn
	tick(4, 4)
	want := "\r[" + strings.Repeat(" ", 40) + "] 0/4 runs, ETA unknown" +
		"\r[" + strings.Repeat("#", 40) + "] 4/4 runs, done in 0s   \n"
	if out.String() != want {
		t.Errorf("bar %q, want %q", out.String(), want)
	}
}
