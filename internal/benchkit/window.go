package benchkit

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
)

// Window is how long a figure runs before it is measured, and then how long
// it is measured.
type Window struct {
	// Warmup runs before the measured window opens.
	Warmup time.Duration
	// Duration is the measured window's length.
	Duration time.Duration
}

// Rate is a count over a measured window.
type Rate struct {
	Count     int64
	PerSecond float64
	// TxPer is how many transactions the database committed per counted
	// unit over the window (statistics are flushed about once a second, so
	// this is approximate).
	TxPer float64
}

// Bench-only reads of the scratch database.
const (
	sqlCommits = `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`
	// sqlLiveWork counts the River jobs left to work and the outbound
	// messages left to deliver: a message delivered right after its
	// commit has no job. It leaves out the jobs scheduled more than a
	// minute ahead (the timeouts of runs left waiting), which no figure
	// waits for.
	sqlLiveWork = `SELECT (SELECT count(*) FROM river_job WHERE state NOT IN ('completed', 'discarded', 'cancelled')
AND scheduled_at < now() + interval '1 minute')
 + (SELECT count(*) FROM thread_message WHERE status = 'pending')`
)

// Commits returns the database's committed transactions so far, read-only
// ones included.
func Commits(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var n int64
	if err := pool.QueryRow(ctx, sqlCommits).Scan(&n); err != nil {
		return 0, fmt.Errorf("reading pg_stat_database: %w", err)
	}
	return n, nil
}

// Measure waits out the warm-up, then counts what done gains over the
// measured window.
func Measure(ctx context.Context, pool *pgxpool.Pool, w Window, done *atomic.Int64) (Rate, error) {
	if err := SleepCtx(ctx, w.Warmup); err != nil {
		return Rate{}, err
	}
	x0, err := Commits(ctx, pool)
	if err != nil {
		return Rate{}, err
	}
	c0, t0 := done.Load(), time.Now()
	if err := SleepCtx(ctx, w.Duration); err != nil {
		return Rate{}, err
	}
	n := done.Load() - c0
	elapsed := time.Since(t0)
	x1, err := Commits(ctx, pool)
	if err != nil {
		return Rate{}, err
	}
	return Rate{Count: n, PerSecond: float64(n) / elapsed.Seconds(), TxPer: float64(x1-x0) / float64(max(n, 1))}, nil
}

// DrainJobs waits until River has no job left to work within the next
// minute and no message waits for delivery, so that one figure's leftovers
// do not run in the next one's window.
func DrainJobs(ctx context.Context, pool *pgxpool.Pool) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var n int
		if err := pool.QueryRow(ctx, sqlLiveWork).Scan(&n); err != nil {
			return fmt.Errorf("counting live jobs and pending messages: %w", err)
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d River jobs and pending messages still live a minute after the figure", n)
		}
		if err := SleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// StopClient stops a River client, cancelling its jobs when they do not
// finish within 15 s.
func StopClient(ctx context.Context, client *river.Client[pgx.Tx]) {
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		_ = client.StopAndCancel(stopCtx)
	}
}

// SleepCtx sleeps for d, or until ctx is done.
func SleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
