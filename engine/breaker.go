package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
)

// toolBreaker is one tool's circuit breaker (sony/gobreaker), in process
// memory: each baton process keeps its own.
type toolBreaker struct {
	cb       *gobreaker.CircuitBreaker[map[string]any]
	cooldown time.Duration

	mu       sync.Mutex
	openedAt time.Time
}

func newToolBreaker(name string, s BreakerSettings) *toolBreaker {
	if s.Failures <= 0 {
		s.Failures = 5
	}
	if s.Cooldown <= 0 {
		s.Cooldown = 30 * time.Second
	}
	b := &toolBreaker{cooldown: s.Cooldown}
	failures := uint32(s.Failures)
	b.cb = gobreaker.NewCircuitBreaker[map[string]any](gobreaker.Settings{
		Name:        name,
		MaxRequests: 1, // one half-open probe
		Timeout:     s.Cooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		OnStateChange: func(_ string, _, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				b.mu.Lock()
				b.openedAt = time.Now()
				b.mu.Unlock()
			}
		},
		// Only failures a healthy tool would not repeat count: 4xx and
		// validation errors say nothing about the tool's health.
		IsSuccessful: func(err error) bool { return err == nil || !classify(err).Class.Retryable() },
		// A call cut short because this worker is stopping is not the tool's.
		IsExcluded: func(err error) bool { return errors.Is(err, context.Canceled) },
	})
	return b
}

// run calls fn through the breaker. When the breaker refuses the call, wait
// says how long to wait before trying again and fn is not called.
func (b *toolBreaker) run(fn func() (map[string]any, error)) (out map[string]any, wait time.Duration, err error) {
	out, err = b.cb.Execute(fn)
	switch {
	case errors.Is(err, gobreaker.ErrOpenState):
		return nil, b.untilProbe(), nil
	case errors.Is(err, gobreaker.ErrTooManyRequests):
		// The half-open probe is in flight: look again shortly.
		return nil, min(max(b.cooldown/4, 50*time.Millisecond), time.Second), nil
	}
	return out, 0, err
}

// untilProbe is the time left before an open breaker lets a probe through.
func (b *toolBreaker) untilProbe() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(time.Until(b.openedAt.Add(b.cooldown)), 50*time.Millisecond)
}

func (b *toolBreaker) status(name string) BreakerStatus {
	st := BreakerStatus{Tool: name, State: b.cb.State().String(), ConsecutiveFailures: b.cb.Counts().ConsecutiveFailures}
	if b.cb.State() == gobreaker.StateOpen {
		b.mu.Lock()
		st.OpenUntil = b.openedAt.Add(b.cooldown)
		b.mu.Unlock()
	}
	return st
}
