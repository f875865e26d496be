package fgd

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/aisched/aisched/apis/config"
	"github.com/aisched/aisched/pkg/gpu"
)

// shape is a pod's request as FGD tells pods apart.
type shape struct {
	milliCPU, milli, count, gpuMemMiB, gpuMemPercent int64
	// constraints is the per-card constraints, as a comparable key.
	models           string
	memoryMiB, cores int64
}

func shapeOf(milliCPU int64, r gpu.Request) shape {
	s := shape{milliCPU: milliCPU, count: r.Count, models: strings.Join(r.Models, ","), memoryMiB: r.MemoryMiB, cores: r.Cores}
	switch {
	case r.Shared():
		s.milli, s.gpuMemMiB, s.gpuMemPercent = r.Milli, r.GPUMemMiB, r.GPUMemPercent
	case r.Count > 0:
		s.milli = gpu.WholeCardMilli
	}
	return s
}

// window learns the typical pod shapes from the last size pods seen.
type window struct {
	size     int
	coverage float64

	// fixed is set when the shapes were given (args.typicalPods): observe
	// then learns nothing.
	fixed bool

	mu     sync.Mutex
	ring   []entry // the pods in the window, oldest at next once full
	next   int
	counts map[shape]int
	total  int // the sum of counts
	seen   map[types.UID]bool
	// typical is computed from counts when stale, from kept, the shapes
	// it covers.
	typical []Typical
	kept    []counted
	stale   bool
}

type entry struct {
	uid   types.UID
	shape shape
}

func newWindow(size int, coveragePercent int32) *window {
	return &window{size: size, coverage: float64(coveragePercent) / 100, counts: map[shape]int{}, seen: map[types.UID]bool{}}
}

// newFixedWindow returns a window that holds the given shapes, each
// counted its weight, and learns nothing more.
func newFixedWindow(pods []config.FGDTypicalPod, coveragePercent int32) *window {
	w := &window{fixed: true, coverage: float64(coveragePercent) / 100, counts: map[shape]int{}, stale: true}
	for _, p := range pods {
		s := shape{milliCPU: p.MilliCPU, milli: p.GPUMilli, gpuMemMiB: p.GPUMemMiB, count: p.GPUCount}
		models := make([]string, len(p.Models))
		for i, m := range p.Models {
			models[i] = gpu.NormalizeModel(m)
		}
		s.models = strings.Join(models, ",")
		w.counts[s] += int(p.Weight)
		w.total += int(p.Weight)
	}
	return w
}

// observe adds a pod to the window, once per pod however often it is
// tried, and drops the oldest pod when the window is full.
func (w *window) observe(uid types.UID, s shape) {
	if w.fixed {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen[uid] {
		return
	}
	e := entry{uid: uid, shape: s}
	if len(w.ring) < w.size {
		w.ring = append(w.ring, e)
	} else {
		old := w.ring[w.next]
		delete(w.seen, old.uid)
		if w.counts[old.shape]--; w.counts[old.shape] == 0 {
			delete(w.counts, old.shape)
		}
		w.ring[w.next] = e
		w.next = (w.next + 1) % w.size
	}
	w.seen[uid] = true
	w.counts[s]++
	w.total = len(w.ring)
	w.stale = true
}

// Typical returns the most frequent shapes until they cover the coverage
// share of the window, with their frequencies renormalised to sum to 1
// (ties by shape, so that the list is the same for the same window). The
// slice is shared: do not modify it. It is the same slice until the list
// changes: a pod that leaves the typical shapes and their frequencies as
// they were (as every pod of one shape does, also while the window fills)
// keeps it, and the memos rely on that.
func (w *window) Typical() []Typical {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stale {
		return w.typical
	}
	w.stale = false
	all := make([]counted, 0, len(w.counts))
	for s, n := range w.counts {
		all = append(all, counted{s, n})
	}
	slices.SortFunc(all, func(a, b counted) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return compareShapes(a.s, b.s)
	})
	var covered int
	var kept []counted
	for _, c := range all {
		if float64(covered) >= w.coverage*float64(w.total) {
			break
		}
		kept = append(kept, c)
		covered += c.n
	}
	if w.typical != nil && slices.Equal(kept, w.kept) {
		// Frequencies are each count over their sum: unchanged too.
		return w.typical
	}
	out := make([]Typical, len(kept))
	for i, c := range kept {
		out[i] = Typical{
			MilliCPU: c.s.milliCPU, Milli: c.s.milli, Count: c.s.count, GPUMemMiB: c.s.gpuMemMiB, GPUMemPercent: c.s.gpuMemPercent,
			Req:  gpu.Request{Count: c.s.count, MemoryMiB: c.s.memoryMiB, Cores: c.s.cores},
			Freq: float64(c.n) / float64(covered),
		}
		if c.s.models != "" {
			out[i].Req.Models = strings.Split(c.s.models, ",")
		}
		out[i].constrained = c.s.models != "" || c.s.memoryMiB > 0 || c.s.cores > 0
	}
	if slices.EqualFunc(out, w.typical, sameTypical) {
		// New counts, the same shapes and frequencies (one shape while the
		// window fills): the memos keep holding.
		w.kept = kept
		return w.typical
	}
	w.typical, w.kept = out, kept
	return out
}

// sameTypical reports whether a and b are the same shape at the same
// frequency.
func sameTypical(a, b Typical) bool {
	return a.MilliCPU == b.MilliCPU && a.Milli == b.Milli && a.GPUMemMiB == b.GPUMemMiB && a.Count == b.Count &&
		a.Freq == b.Freq && a.constrained == b.constrained && a.Req.Equal(b.Req)
}

// counted is a shape and how many pods of the window have it.
type counted struct {
	s shape
	n int
}

func compareShapes(a, b shape) int {
	return cmp.Or(cmp.Compare(a.count, b.count), cmp.Compare(a.milli, b.milli), cmp.Compare(a.gpuMemMiB, b.gpuMemMiB), cmp.Compare(a.gpuMemPercent, b.gpuMemPercent), cmp.Compare(a.milliCPU, b.milliCPU),
		cmp.Compare(a.models, b.models), cmp.Compare(a.memoryMiB, b.memoryMiB), cmp.Compare(a.cores, b.cores))
}
