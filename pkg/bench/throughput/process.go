package throughput

import (
	"runtime"
	"time"

	"github.com/prometheus/procfs"
)

// Memory is what a measurement's process holds once every pod is bound.
// The process runs the whole control plane (etcd, apiserver, controllers,
// simulated nodes) besides the scheduler, so its RSS is mostly theirs and
// the same for every profile; SchedulerHeapMiB is the scheduler's part.
type Memory struct {
	// RSSMiB and PeakRSSMiB are the process's resident memory then and
	// at its highest (VmRSS, VmHWM); 0 where /proc has none.
	RSSMiB     float64 `json:"rss_mib"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	// SchedulerHeapMiB is the Go heap live after a collection once every
	// pod is bound, less the same just before the scheduler started: what
	// the scheduler holds (its informers' caches, its snapshot, its
	// plugins' and shared state), the pods it bound counted once.
	SchedulerHeapMiB float64 `json:"scheduler_heap_mib"`
}

// heapAfterGC is the heap live after a collection, in bytes.
func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// memoryOf measures the process now; heapBefore is heapAfterGC before the
// scheduler started.
func memoryOf(heapBefore uint64) Memory {
	var m Memory
	heap := heapAfterGC()
	if heap > heapBefore {
		m.SchedulerHeapMiB = mib(heap - heapBefore)
	}
	if p, err := procfs.Self(); err == nil {
		if s, err := p.NewStatus(); err == nil {
			m.RSSMiB, m.PeakRSSMiB = mib(s.VmRSS), mib(s.VmHWM)
		}
	}
	return m
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// processCPU is the CPU time this process has used, 0 where /proc has none.
func processCPU() time.Duration {
	p, err := procfs.Self()
	if err != nil {
		return 0
	}
	st, err := p.Stat()
	if err != nil {
		return 0
	}
	return time.Duration(st.CPUTime() * float64(time.Second))
}

// loadAverage is the machine's 1-minute load average, 0 where /proc has
// none.
func loadAverage() float64 {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0
	}
	l, err := fs.LoadAvg()
	if err != nil {
		return 0
	}
	return l.Load1
}
