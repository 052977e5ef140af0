package benchkit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Op is one operation of a closed-loop client: it returns once what it
// started has ended (a run done, its result back).
type Op func(ctx context.Context, client int) error

// Meter is read as a loop's measured window opens and again as it closes
// (commit counters, the database's clock).
type Meter interface {
	Open(ctx context.Context) error
	Close(ctx context.Context) error
}

// Loop runs clients in a closed loop: each starts its next operation as soon
// as the last one has ended.
type Loop struct {
	Clients int
	Window  Window
	// Meters are opened in order as the measured window opens and closed in
	// reverse order as it closes, so that a later meter's reads fall inside
	// an earlier one's window.
	Meters []Meter
}

// LoopResult is what a loop measured: the operations that ended inside the
// window, each timed from its start to its end by the client's clock.
type LoopResult struct {
	Latencies Latencies
	// Elapsed is the measured window's length by the client's clock.
	Elapsed time.Duration
}

// PerSecond is the operations that ended per second of the window.
func (r LoopResult) PerSecond() float64 { return float64(len(r.Latencies)) / r.Elapsed.Seconds() }

// sample is one operation's start and end.
type sample struct{ began, ended time.Time }

// Run runs op on every client until the window closes, then cancels the
// clients and waits for them. The first error of an operation (not caused
// by the window closing) stops the loop and is returned.
func (l Loop) Run(ctx context.Context, op Op) (LoopResult, error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	samples := make([][]sample, l.Clients)
	errs := make([]error, l.Clients+1)
	var wg sync.WaitGroup
	for i := range l.Clients {
		wg.Go(func() {
			for runCtx.Err() == nil {
				began := time.Now()
				if err := op(runCtx, i); err != nil {
					if runCtx.Err() == nil {
						errs[i] = fmt.Errorf("client %d: %w", i, err)
						cancel()
					}
					return
				}
				samples[i] = append(samples[i], sample{began, time.Now()})
			}
		})
	}
	g0, g1, err := l.window(runCtx)
	cancel()
	wg.Wait()
	errs[l.Clients] = err
	if err := errors.Join(errs...); err != nil {
		return LoopResult{}, err
	}
	// Operations count when their client saw them end inside the window.
	var lat Latencies
	for _, ss := range samples {
		for _, s := range ss {
			if !s.ended.Before(g0) && s.ended.Before(g1) {
				lat = append(lat, s.ended.Sub(s.began))
			}
		}
	}
	return LoopResult{Latencies: lat, Elapsed: g1.Sub(g0)}, nil
}

// window waits out the warm-up and the measured window, reading the meters
// at both ends, and returns the window's ends by the client's clock.
func (l Loop) window(ctx context.Context) (g0, g1 time.Time, err error) {
	if err := SleepCtx(ctx, l.Window.Warmup); err != nil {
		return g0, g1, err
	}
	for _, m := range l.Meters {
		if err := m.Open(ctx); err != nil {
			return g0, g1, err
		}
	}
	g0 = time.Now()
	if err := SleepCtx(ctx, l.Window.Duration); err != nil {
		return g0, g1, err
	}
	g1 = time.Now()
	for _, m := range slices.Backward(l.Meters) {
		if err := m.Close(ctx); err != nil {
			return g0, g1, err
		}
	}
	return g0, g1, nil
}
