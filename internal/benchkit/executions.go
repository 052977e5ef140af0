package benchkit

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/engine"
)

// ExecutionRun is what RunExecutions measured.
type ExecutionRun struct {
	Concurrency int
	// Count is the executions clients saw end inside the window.
	Count     int64
	PerSecond float64
	// P50 and P99 are start call → execution seen terminal, by the client's
	// clock.
	P50, P99 time.Duration
	// TxPer is the transactions committed per execution over the window,
	// the watch's polling left out.
	TxPer float64
}

// StartParams says what client i starts next.
type StartParams func(client int) engine.StartParams

// RunExecutions starts executions in a closed loop at concurrency clients,
// each through engine.StartExecution in a transaction of its own, and waits
// for each to be terminal (a Watch polling every WatchPoll) before starting
// the next. Each client's start call → its execution seen terminal is
// timed by the client's clock (the database's timestamps cannot tell: a run
// that ends in its start transaction has its created_at at that
// transaction's start, after the client began waiting for a connection).
// After the window it drains River and fails when an execution that ended
// in the window did not complete all nodes nodes.
func RunExecutions(ctx context.Context, pool *pgxpool.Pool, b *Baton, w Window, concurrency, nodes int, params StartParams) (ExecutionRun, error) {
	watch := NewExecutionWatch(pool)
	commits := &CommitMeter{Pool: pool, Polls: watch.Polls}
	clock := &ClockMeter{Pool: pool}
	loop := Loop{Clients: concurrency, Window: w, Meters: []Meter{commits, clock}}
	res, err := RunWatched(ctx, loop, watch, func(ctx context.Context, client int) error {
		x, err := b.Start(ctx, params(client))
		if err != nil || engine.IsTerminal(x.Status) {
			// Ended in its start transaction, which has committed.
			return err
		}
		select {
		case <-watch.Wait(x.ID):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err != nil {
		return ExecutionRun{}, err
	}
	if err := DrainJobs(ctx, pool); err != nil {
		return ExecutionRun{}, err
	}
	if err := checkWindow(ctx, pool, clock, nodes); err != nil {
		return ExecutionRun{}, err
	}
	n := int64(len(res.Latencies))
	return ExecutionRun{
		Concurrency: concurrency, Count: n, PerSecond: res.PerSecond(),
		P50: res.Latencies.Percentile(0.50), P99: res.Latencies.Percentile(0.99),
		// The clock's two reads fall inside the commit meter's window.
		TxPer: float64(commits.Counted()-2) / float64(max(n, 1)),
	}, nil
}

// sqlWindowBad counts the executions that ended in a window without
// completing all their nodes.
const sqlWindowBad = `SELECT count(*) FILTER (WHERE status <> 'completed' OR cardinality(node_path) <> $3)
FROM agent_execution WHERE completed_at >= $1 AND completed_at < $2`

func checkWindow(ctx context.Context, pool *pgxpool.Pool, clock *ClockMeter, nodes int) error {
	var bad int64
	if err := pool.QueryRow(ctx, sqlWindowBad, clock.From, clock.To, nodes).Scan(&bad); err != nil {
		return fmt.Errorf("measuring the window: %w", err)
	}
	if bad > 0 {
		return fmt.Errorf("%d executions ended in the window without completing all %d nodes", bad, nodes)
	}
	return nil
}
