package collect

import (
	"runtime"
	"testing"
	"time"
)

// TestLive reads the machine the test runs on. Containers and CI runners may
// lack physical NICs and disks in their /sys, so only CPU and memory must be
// known.
func TestLive(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux /proc and /sys")
	}
	c := &Collector{Root: "/"}
	prev, err := c.Snapshot(time.Now())
	if err != nil {
		t.Logf("first snapshot: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	cur, err := c.Snapshot(time.Now())
	if err != nil {
		t.Logf("second snapshot: %v", err)
	}
	u := Utilize(prev, cur)
	for _, r := range []struct {
		name string
		v    *float64
	}{{"CPU", u.CPU}, {"memory", u.Memory}} {
		if r.v == nil {
			t.Errorf("%s utilisation unknown", r.name)
		} else if *r.v < 0 || *r.v > 1 {
			t.Errorf("%s utilisation %v not in [0,1]", r.name, *r.v)
		}
	}
	t.Logf("CPU %v, memory %v, network %v, disk %v", show(u.CPU), show(u.Memory), show(u.Network), show(u.Disk))
	if cur.Network != nil {
		t.Logf("interfaces: %+v", cur.Network.Interfaces)
	}
	if cur.Disk != nil {
		t.Logf("disks: %+v", cur.Disk.Disks)
	}

	p, err := c.Performance()
	if err != nil {
		t.Logf("performance: %v", err)
	}
	t.Logf("performance: %+v; runtime.NumCPU() = %d", p, runtime.NumCPU())
	// A container's CPU affinity can make NumCPU smaller than the node's
	// count.
	if p.Cores <= 0 {
		t.Errorf("Cores = %d, want > 0", p.Cores)
	}
	if p.MemoryBytes <= 0 {
		t.Errorf("MemoryBytes = %d, want > 0", p.MemoryBytes)
	}
}

func show(v *float64) any {
	if v == nil {
		return "unknown"
	}
	return *v
}

// BenchmarkSample is what the agent spends on the live node per sample: one
// Snapshot and one Utilize.
func BenchmarkSample(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("needs Linux /proc and /sys")
	}
	c := &Collector{Root: "/"}
	prev, _ := c.Snapshot(time.Now())
	b.ReportAllocs()
	for b.Loop() {
		cur, _ := c.Snapshot(time.Now())
		Utilize(prev, cur)
		prev = cur
	}
}
