package agent

import (
	"runtime"
	"testing"
	"time"

	"github.com/aisched/aisched/pkg/agent/collect"
)

// BenchmarkNodeReads is what the agent reads on the live node per sample,
// publishing and nvidia-smi aside: two snapshots, the utilisation between
// them and the performance.
func BenchmarkNodeReads(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("needs Linux /proc and /sys")
	}
	c := &collect.Collector{}
	b.ReportAllocs()
	for b.Loop() {
		prev, _ := c.Snapshot(time.Now())
		cur, _ := c.Snapshot(time.Now())
		collect.Utilize(prev, cur)
		_, _ = c.Performance()
	}
}
