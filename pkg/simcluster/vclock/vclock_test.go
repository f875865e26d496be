package vclock

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestStepOrder(t *testing.T) {
	c := New(t0)
	late := c.NewTimer(3 * time.Second)
	early := c.NewTimer(time.Second)
	tick := c.NewTicker(2 * time.Second)
	stopped := c.NewTimer(time.Second)
	if !stopped.Stop() || stopped.Stop() {
		t.Error("Stop: want true once, then false")
	}
	done := make(chan struct{})
	c.AfterFunc(1500*time.Millisecond, func() { close(done) })

	if next, ok := c.Next(); !ok || !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("Next = %v, %t; want t0+1s", next, ok)
	}
	limit := t0.Add(10 * time.Second)
	var got []time.Duration
	for range 4 {
		if !c.Step(limit) {
			t.Fatal("Step fired nothing")
		}
		got = append(got, c.Now().Sub(t0))
	}
	// 1s: early; 1.5s: the func; 2s: the ticker; 3s: late.
	want := []time.Duration{time.Second, 1500 * time.Millisecond, 2 * time.Second, 3 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("steps at %v, want %v", got, want)
		}
	}
	if v := <-early.C(); !v.Equal(t0.Add(time.Second)) {
		t.Errorf("early fired at %v", v)
	}
	if v := <-late.C(); !v.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("late fired at %v", v)
	}
	<-done
	<-tick.C()
	// The ticker is due again at 4s, then 6s.
	if next, _ := c.Next(); !next.Equal(t0.Add(4 * time.Second)) {
		t.Errorf("ticker re-armed at %v, want t0+4s", next)
	}
	tick.Stop()
	if _, ok := c.Next(); ok {
		t.Error("a stopped ticker still waits")
	}
	// Nothing due: the clock moves to the limit, never back.
	if c.Step(limit) || !c.Now().Equal(limit) {
		t.Errorf("Step with nothing due: now %v, want %v", c.Now(), limit)
	}
	c.Step(t0)
	if !c.Now().Equal(limit) {
		t.Error("the clock went back")
	}
	// Reset moves a timer.
	r := c.NewTimer(time.Hour)
	if !r.Reset(time.Second) {
		t.Error("Reset of a waiting timer returned false")
	}
	c.Step(limit.Add(time.Hour))
	if !c.Now().Equal(limit.Add(time.Second)) {
		t.Errorf("reset timer fired at %v, want limit+1s", c.Now())
	}
}
