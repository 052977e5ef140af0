package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

// timerRow is a timer job as River holds it.
type timerRow struct {
	state       string
	scheduledAt time.Time
}

func readTimer(t *testing.T, pool *pgxpool.Pool, waitSeq int32) timerRow {
	t.Helper()
	var r timerRow
	require.NoError(t, pool.QueryRow(context.Background(), `
		SELECT state::text, scheduled_at FROM river_job
		WHERE kind = 'execution.wait_timeout' AND (args->>'wait_seq')::int = $1`, waitSeq).Scan(&r.state, &r.scheduledAt))
	return r
}

// insertTimer inserts a wait timeout due at at, with waitSeq to find it by.
func insertTimer(t *testing.T, pool *pgxpool.Pool, ins *Inserter, waitSeq int32, at time.Time) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := ins.InsertWaitTimeout(ctx, tx, engine.WaitTimer{ExecutionRowID: 1, WaitSeq: waitSeq, At: at})
		return err
	}))
}

// A timer due beyond TimerLookahead is inserted scheduled, as River UI
// expects of a job due later; one due within it is inserted available, its
// time kept, so that no scheduler round can make it late. PromoteTimers
// makes the scheduled timers whose time has come within TimerLookahead
// available, their time kept, and leaves the others and other kinds alone.
func TestTimersAreScheduledUntilTheirLastSeconds(t *testing.T) {
	t.Parallel()
	pool, eng := presenceEngine(t)
	client, err := NewClient(pool, Config{Engine: eng, InsertOnly: true})
	require.NoError(t, err)
	ins := &Inserter{Client: client}
	ctx := context.Background()

	week := time.Now().Add(168 * time.Hour)
	soon := time.Now().Add(TimerLookahead / 2)
	insertTimer(t, pool, ins, 1, week)
	insertTimer(t, pool, ins, 2, soon)
	insertTimer(t, pool, ins, 3, week)
	requireTimer(t, readTimer(t, pool, 1), "scheduled", week)
	requireTimer(t, readTimer(t, pool, 2), "available", soon)

	// A scheduled job of another kind.
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := client.InsertTx(ctx, tx, DeliverArgs{ThreadID: 1}, &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
		return err
	}))

	// Time passes for timer 3 and the delivery: they are now due in a
	// second.
	_, err = pool.Exec(ctx, `UPDATE river_job SET scheduled_at = now() + interval '1 second'
		WHERE kind = 'message.deliver' OR (args->>'wait_seq')::int = 3`)
	require.NoError(t, err)
	due := readTimer(t, pool, 3).scheduledAt
	promoted, err := PromoteTimers(ctx, pool)
	require.NoError(t, err)
	require.EqualValues(t, 1, promoted)
	requireTimer(t, readTimer(t, pool, 3), "available", due)
	requireTimer(t, readTimer(t, pool, 1), "scheduled", week)
	var deliver string
	require.NoError(t, pool.QueryRow(ctx, `SELECT state::text FROM river_job WHERE kind = 'message.deliver'`).Scan(&deliver))
	require.Equal(t, "scheduled", deliver)
}

// requireTimer checks a timer's state, and that its time is at (to the
// microsecond Postgres keeps).
func requireTimer(t *testing.T, got timerRow, state string, at time.Time) {
	t.Helper()
	require.Equal(t, state, got.state)
	require.WithinDuration(t, at, got.scheduledAt, time.Microsecond)
}

// A wait whose timeout is beyond TimerLookahead waits as a scheduled job,
// then times out through the timers loop and River's workers.
func TestScheduledWaitTimeoutFires(t *testing.T) {
	t.Parallel()
	pool, eng := presenceEngine(t)
	client, err := NewClient(pool, Config{Engine: eng})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(stopCtx)
	})
	timers := StartTimers(ctx, pool, TimersConfig{})
	t.Cleanup(timers.Stop)
	_, _, err = eng.DefineWorkflow(ctx, pool, "acme", []byte(`{"workflow_id": "w", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "w"},
	  {"id": "w", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "ev", "timeout": "7s", "onTimeout": "continue"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`))
	require.NoError(t, err)
	var x *engine.Execution
	require.NoError(t, eng.WithTx(ctx, func(tx pgx.Tx) error {
		x, err = eng.StartExecution(ctx, tx, engine.StartParams{TenantID: "acme", WorkflowID: "w"})
		return err
	}))
	require.Eventually(t, func() bool {
		var state string
		err := pool.QueryRow(ctx, `SELECT state::text FROM river_job WHERE kind = 'execution.wait_timeout'`).Scan(&state)
		return err == nil && state == "scheduled"
	}, 5*time.Second, 20*time.Millisecond, "the 7s timer waits as a scheduled job")
	require.Eventually(t, func() bool {
		got, err := eng.GetExecution(ctx, pool, "acme", x.ExecutionID)
		return err == nil && got.Status == engine.StatusCompleted
	}, time.Minute, 50*time.Millisecond, "the wait times out and the execution ends")
}

// olderWaitTimeoutArgs are the args of an execution.wait_timeout job as
// builds before TenantID and Execution enqueued it.
type olderWaitTimeoutArgs struct {
	ExecutionID int64 `json:"execution_id"`
	WaitSeq     int32 `json:"wait_seq"`
}

func (olderWaitTimeoutArgs) Kind() string { return WaitTimeoutArgs{}.Kind() }

// A wait's timeout job carries the execution's tenant and exec-… id, and
// one enqueued by an earlier build, with neither, still fires: the wait
// times out and goes on, and the wait's own timer, which the transaction
// that ended the wait deleted, never fires.
func TestOlderWaitTimeoutArgsStillFire(t *testing.T) {
	t.Parallel()
	pool, eng := presenceEngine(t)
	client, err := NewClient(pool, Config{Engine: eng})
	require.NoError(t, err)
	ctx := context.Background()
	_, _, err = eng.DefineWorkflow(ctx, pool, "acme", []byte(`{"workflow_id": "w", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "w"},
	  {"id": "w", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "ev", "timeout": "1h", "onTimeout": "continue"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`))
	require.NoError(t, err)
	var x *engine.Execution
	require.NoError(t, eng.WithTx(ctx, func(tx pgx.Tx) error {
		x, err = eng.StartExecution(ctx, tx, engine.StartParams{TenantID: "acme", WorkflowID: "w"})
		return err
	}))
	var args WaitTimeoutArgs
	require.NoError(t, pool.QueryRow(ctx, `SELECT args FROM river_job WHERE kind = 'execution.wait_timeout'`).Scan(&args))
	require.Equal(t, WaitTimeoutArgs{ExecutionID: x.ID, WaitSeq: 1, TenantID: "acme", Execution: x.ExecutionID}, args)

	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := client.InsertTx(ctx, tx, olderWaitTimeoutArgs{ExecutionID: x.ID, WaitSeq: 1}, &river.InsertOpts{Queue: QueueHigh})
		return err
	}))
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(stopCtx)
	})
	require.Eventually(t, func() bool {
		got, err := eng.GetExecution(ctx, pool, "acme", x.ExecutionID)
		return err == nil && got.Status == engine.StatusCompleted && got.Variables["timedOut"] == true
	}, time.Minute, 20*time.Millisecond, "the older job times the wait out")
	var states []string
	rows, err := pool.Query(ctx, `SELECT state::text FROM river_job WHERE kind = 'execution.wait_timeout'`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		states = append(states, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"completed"}, states, "the older job completed; the wait's own timer is gone")
}
