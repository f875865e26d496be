// Package vclock is a virtual clock for the simulator's fast engine: time
// moves only when the simulation advances it, timers and tickers fire in
// order of their deadlines, and the simulation can ask when the next one
// is due, so that it jumps from one event to the next instead of waiting.
// It implements k8s.io/utils/clock's interfaces, so the scheduler's queue,
// the simulated kubelets, the job queue and the plugins run on it
// unchanged.
package vclock

import (
	"container/heap"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Clock is a virtual clock. Its zero value is not usable; use New.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	waiters waiterHeap
}

var _ clock.WithTickerAndDelayedExecution = &Clock{}

// New returns a clock that reads start until it is advanced.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now implements clock.PassiveClock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Since implements clock.PassiveClock.
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Next returns the deadline of the earliest waiting timer or ticker; ok is
// false when none waits.
func (c *Clock) Next() (t time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waiters) == 0 {
		return time.Time{}, false
	}
	return c.waiters[0].at, true
}

// Step fires every timer and ticker due at the earliest deadline not
// after limit, with the clock set to that deadline, and reports whether
// it fired any; with none due by limit it sets the clock to limit (never
// backwards). Callers let the fired work settle before the next Step, so
// that events happen in the order of their times.
func (c *Clock) Step(limit time.Time) bool {
	c.mu.Lock()
	if len(c.waiters) == 0 || c.waiters[0].at.After(limit) {
		if limit.After(c.now) {
			c.now = limit
		}
		c.mu.Unlock()
		return false
	}
	at := c.waiters[0].at
	if at.After(c.now) {
		c.now = at
	}
	var due []*waiter
	for len(c.waiters) > 0 && !c.waiters[0].at.After(at) {
		w := heap.Pop(&c.waiters).(*waiter)
		due = append(due, w)
		if w.period > 0 {
			w.at = w.at.Add(w.period)
			c.pushLocked(w)
		}
	}
	now := c.now
	c.mu.Unlock()
	for _, w := range due {
		w.fire(now)
	}
	return true
}

// waiter is one timer or ticker.
type waiter struct {
	at     time.Time
	seq    uint64
	period time.Duration // > 0 for a ticker
	index  int           // in the heap, -1 when not in it
	ch     chan time.Time
	fn     func()
}

func (w *waiter) fire(now time.Time) {
	if w.fn != nil {
		go w.fn()
		return
	}
	select {
	case w.ch <- now:
	default: // a slow receiver misses ticks, as with time.Ticker
	}
}

func (c *Clock) pushLocked(w *waiter) {
	c.seq++
	w.seq = c.seq
	heap.Push(&c.waiters, w)
}

func (c *Clock) add(d time.Duration, period time.Duration, fn func()) *waiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &waiter{at: c.now.Add(d), period: period, fn: fn, ch: make(chan time.Time, 1)}
	c.pushLocked(w)
	return w
}

// stop removes w; it reports whether w was waiting.
func (c *Clock) stop(w *waiter) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.index < 0 {
		return false
	}
	heap.Remove(&c.waiters, w.index)
	return true
}

// reset makes w fire d from now; it reports whether w was waiting.
func (c *Clock) reset(w *waiter, d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	active := w.index >= 0
	if active {
		heap.Remove(&c.waiters, w.index)
	}
	w.at = c.now.Add(d)
	c.pushLocked(w)
	return active
}

// After implements clock.Clock.
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

// NewTimer implements clock.Clock.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	return &timer{c: c, w: c.add(d, 0, nil)}
}

// AfterFunc implements clock.WithDelayedExecution: f runs in its own
// goroutine when the clock reaches now+d.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return &timer{c: c, w: c.add(d, 0, f)}
}

// Sleep implements clock.Clock: it returns once the clock has been
// advanced by d.
func (c *Clock) Sleep(d time.Duration) { <-c.After(d) }

// Tick implements clock.Clock.
func (c *Clock) Tick(d time.Duration) <-chan time.Time { return c.NewTicker(d).C() }

// NewTicker implements clock.WithTicker.
func (c *Clock) NewTicker(d time.Duration) clock.Ticker {
	if d <= 0 {
		panic("vclock: non-positive ticker period")
	}
	return &ticker{c: c, w: c.add(d, d, nil)}
}

type timer struct {
	c *Clock
	w *waiter
}

func (t *timer) C() <-chan time.Time        { return t.w.ch }
func (t *timer) Stop() bool                 { return t.c.stop(t.w) }
func (t *timer) Reset(d time.Duration) bool { return t.c.reset(t.w, d) }

type ticker struct {
	c *Clock
	w *waiter
}

func (t *ticker) C() <-chan time.Time { return t.w.ch }
func (t *ticker) Stop()               { t.c.stop(t.w) }

// waiterHeap orders waiters by deadline, then by creation.
type waiterHeap []*waiter

func (h waiterHeap) Len() int { return len(h) }
func (h waiterHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h waiterHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *waiterHeap) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waiterHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	w.index = -1
	return w
}
