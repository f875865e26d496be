package nvidiasmi

import (
	"bytes"
	"path/filepath"
	"testing"
)

// FuzzParse checks that Parse never panics, returns cards only with the
// values the inventory accepts, one per index, never more than the output
// has lines, and an error whenever it returns no card.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.csv"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		f.Add(readTestdata(f, filepath.Base(file)))
	}
	f.Add([]byte(""))
	f.Add([]byte("0, GPU-a, Tesla T4, 15360, [N/A], [Not Supported], [N/A], [N/A]\r\n"))
	f.Add([]byte("0, GPU-a, Tesla T4, -1, 3, 101, 1590, 7\n0, GPU-a\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		cards, err := Parse(out)
		if len(cards) == 0 && err == nil {
			t.Fatalf("Parse(%q) returned neither cards nor an error", out)
		}
		if lines := bytes.Count(out, []byte("\n")) + 1; len(cards) > lines {
			t.Fatalf("Parse(%q) returned %d cards from %d lines", out, len(cards), lines)
		}
		seen := map[int32]bool{}
		for _, c := range cards {
			switch {
			case seen[c.Index]:
				t.Fatalf("Parse(%q): index %d twice", out, c.Index)
			case c.Index < 0 || c.Name == "" || c.MemoryTotalMiB <= 0 || c.MemoryUsedMiB < 0 || c.MaxClockMHz < 0:
				t.Fatalf("Parse(%q) returned an invalid card %+v", out, c)
			case c.UtilizationPercent != nil && (*c.UtilizationPercent < 0 || *c.UtilizationPercent > 100):
				t.Fatalf("Parse(%q): utilization %d", out, *c.UtilizationPercent)
			case c.ComputeCapability != "" && !computeCapability.MatchString(c.ComputeCapability):
				t.Fatalf("Parse(%q): compute capability %q", out, c.ComputeCapability)
			}
			seen[c.Index] = true
		}
	})
}
