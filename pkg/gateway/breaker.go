package gateway

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/aisched/aisched/apis/platform/v1alpha1"
)

// Outcomes of a call that the breaker counts against the service.
var (
	errFailed   = errors.New("failed call")
	errSlow     = errors.New("slow call")
	errExcluded = errors.New("call not counted")
)

// breaker is a service's circuit breaker: gobreaker's two-step breaker
// with Sentinel's rule (ratio of bad calls over a rolling window, once a
// least number of calls completed) and a single probe while half-open.
type breaker struct {
	rule *v1alpha1.CircuitBreaker
	cb   *gobreaker.TwoStepCircuitBreaker[struct{}]
	// openUntil is when the open breaker lets a probe through (unix nanoseconds).
	openUntil atomic.Int64
}

// Values of aisched_gateway_breaker_state.
const (
	breakerClosed   = 0
	breakerHalfOpen = 1
	breakerOpen     = 2
)

func newBreaker(rule *v1alpha1.CircuitBreaker, state prometheus.Gauge) *breaker {
	b := &breaker{rule: rule}
	window := time.Duration(max(rule.WindowSeconds, 1)) * time.Second
	open := time.Duration(max(rule.OpenSeconds, 1)) * time.Second
	minRequests := uint32(max(rule.MinRequests, 1))
	threshold := uint32(rule.ThresholdPercent)
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		// One probe while half-open: its success closes the breaker.
		MaxRequests: 1,
		// A rolling window of ten buckets.
		Interval:     window,
		BucketPeriod: window / 10,
		Timeout:      open,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			done := c.TotalSuccesses + c.TotalFailures
			return done >= minRequests && c.TotalFailures*100 >= threshold*done
		},
		IsSuccessful: func(err error) bool { return err == nil },
		IsExcluded:   func(err error) bool { return errors.Is(err, errExcluded) },
		OnStateChange: func(_ string, _, to gobreaker.State) {
			switch to {
			case gobreaker.StateOpen:
				b.openUntil.Store(time.Now().Add(open).UnixNano())
				state.Set(breakerOpen)
			case gobreaker.StateHalfOpen:
				state.Set(breakerHalfOpen)
			default:
				state.Set(breakerClosed)
			}
		},
	})
	state.Set(breakerClosed)
	return b
}

// allow returns the function that reports the call's outcome, or the
// rejection while the breaker is open (or its probe is out).
func (b *breaker) allow(now time.Time) (func(error), *rejection) {
	done, err := b.cb.Allow()
	if err == nil {
		return done, nil
	}
	rej := reject(503, ReasonCircuitOpen, "the circuit breaker is open: the service failed too often; calls resume after a successful probe")
	rej.retryAfter = max(time.Duration(b.openUntil.Load()-now.UnixNano()), time.Second)
	if errors.Is(err, gobreaker.ErrTooManyRequests) {
		rej.message = "the circuit breaker is half-open: one probe call is in progress"
		rej.retryAfter = time.Second
	}
	return nil, rej
}

// outcome classifies a finished call for the breaker's strategy: errors
// (5xx, unreachable, timed out) for ErrorRatio, calls slower than the
// limit (and timed-out ones) for SlowCallRatio. Calls the client gave up
// on are not counted.
func (b *breaker) outcome(code int, elapsed time.Duration, clientGone bool) error {
	switch {
	case clientGone:
		return errExcluded
	case b.rule.Strategy == v1alpha1.SlowCallRatio:
		if code == 504 || b.rule.SlowCallMilliseconds != nil && elapsed > time.Duration(*b.rule.SlowCallMilliseconds)*time.Millisecond {
			return errSlow
		}
	case code >= 500:
		return errFailed
	}
	return nil
}
