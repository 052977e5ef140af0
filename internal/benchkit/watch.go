package benchkit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// WatchPoll is how often a Watch looks.
const WatchPoll = 2 * time.Millisecond

// Lookup returns which of keys have ended.
type Lookup[K comparable] func(ctx context.Context, keys []K) ([]K, error)

// Watch tells waiters when their keys (executions, messages, workflows)
// have ended, polling for all of them with one query every WatchPoll.
type Watch[K comparable] struct {
	lookup  Lookup[K]
	polls   atomic.Int64
	mu      sync.Mutex
	waiting map[K]chan struct{}
}

// NewWatch returns a watch that asks lookup which keys have ended.
func NewWatch[K comparable](lookup Lookup[K]) *Watch[K] {
	return &Watch[K]{lookup: lookup, waiting: map[K]chan struct{}{}}
}

// sqlTerminal is the lookup of NewExecutionWatch.
const sqlTerminal = `SELECT id FROM agent_execution WHERE id = ANY($1::bigint[]) AND status IN ('completed', 'failed', 'timeout', 'cancelled')`

// NewExecutionWatch watches Baton executions, by row id, until they are
// terminal.
func NewExecutionWatch(pool *pgxpool.Pool) *Watch[int64] {
	return NewWatch(func(ctx context.Context, ids []int64) ([]int64, error) {
		rows, err := pool.Query(ctx, sqlTerminal, ids)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[int64])
	})
}

// Wait returns a channel closed once key has ended.
func (w *Watch[K]) Wait(key K) <-chan struct{} {
	ch := make(chan struct{})
	w.mu.Lock()
	w.waiting[key] = ch
	w.mu.Unlock()
	return ch
}

// Polls is how many lookups the watch has made.
func (w *Watch[K]) Polls() int64 { return w.polls.Load() }

// Poll looks for ended keys until ctx is done; it returns nil then, and an
// error when a lookup fails.
func (w *Watch[K]) Poll(ctx context.Context) error {
	t := time.NewTicker(WatchPoll)
	defer t.Stop()
	keys := make([]K, 0, 64)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		keys = keys[:0]
		w.mu.Lock()
		for k := range w.waiting {
			keys = append(keys, k)
		}
		w.mu.Unlock()
		if len(keys) == 0 {
			continue
		}
		w.polls.Add(1)
		ended, err := w.lookup(ctx, keys)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("polling for ended runs: %w", err)
		}
		w.mu.Lock()
		for _, k := range ended {
			if ch, ok := w.waiting[k]; ok {
				close(ch)
				delete(w.waiting, k)
			}
		}
		w.mu.Unlock()
	}
}

// RunWatched runs loop with watch polling alongside it, for ops that wait on
// the watch; the watch stops with the loop, and its error, if any, is
// returned with the loop's.
func RunWatched[K comparable](ctx context.Context, loop Loop, watch *Watch[K], op Op) (LoopResult, error) {
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watchErr := make(chan error, 1)
	go func() {
		err := watch.Poll(watchCtx)
		if err != nil {
			stopWatch() // the waiters would wait forever
		}
		watchErr <- err
	}()
	res, err := loop.Run(watchCtx, op)
	stopWatch()
	return res, errors.Join(err, <-watchErr)
}
