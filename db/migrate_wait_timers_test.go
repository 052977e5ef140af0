package db_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/db"
	"github.com/batonrun/baton/internal/pgtest"
)

// Migration 00032 takes over the timers of an earlier build: a waiting
// execution gets its wait's execution.wait_timeout job id, and the timers
// still to fire of waits that are over (the execution went on, or waits
// again in a later wait) are deleted. A timer a worker runs, and other
// kinds of jobs, stay.
func TestWaitTimersMigrationTakesOverEarlierTimers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	provider, err := goose.NewProvider(goose.DialectPostgres, stdlib.OpenDBFromPool(pool), db.Migrations(),
		goose.WithDisableGlobalRegistry(true))
	require.NoError(t, err)
	_, err = provider.DownTo(ctx, 31)
	require.NoError(t, err)

	var thread int64
	require.NoError(t, pool.QueryRow(ctx,
		`INSERT INTO thread (tenant_id, thread_id, channel, contact) VALUES ('acme', 'th-1', 'test', 'someone') RETURNING id`).Scan(&thread))
	execution := func(key, status string, waitSeq int) int64 {
		var id int64
		require.NoError(t, pool.QueryRow(ctx, `
			INSERT INTO agent_execution (tenant_id, execution_id, workflow_id, version, thread_id, status, wait_seq)
			VALUES ('acme', $1, 'wf', 'v1', $2, $3, $4) RETURNING id`, key, thread, status, waitSeq).Scan(&id))
		return id
	}
	job := func(kind string, executionID int64, waitSeq int, state string) int64 {
		var id int64
		require.NoError(t, pool.QueryRow(ctx, `
			INSERT INTO river_job (kind, args, state, queue, max_attempts, scheduled_at)
			VALUES ($1, jsonb_build_object('execution_id', $2::bigint, 'wait_seq', $3::integer), $4::river_job_state, 'high', 25, now() + interval '1 hour')
			RETURNING id`, kind, executionID, waitSeq, state).Scan(&id))
		return id
	}
	waits := execution("ex-waits", "waiting", 2)
	done := execution("ex-done", "completed", 1)
	const timer = "execution.wait_timeout"
	current := job(timer, waits, 2, "scheduled")
	job(timer, waits, 1, "scheduled") // of an earlier wait
	job(timer, done, 1, "available")  // of a wait that is over
	running := job(timer, done, 1, "running")
	step := job("execution.step", done, 1, "scheduled")

	_, err = provider.UpTo(ctx, 32)
	require.NoError(t, err)
	var named *int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT wait_timeout_job_id FROM agent_execution WHERE id = $1`, waits).Scan(&named))
	require.Equal(t, &current, named)
	require.NoError(t, pool.QueryRow(ctx, `SELECT wait_timeout_job_id FROM agent_execution WHERE id = $1`, done).Scan(&named))
	require.Nil(t, named)
	require.ElementsMatch(t, []int64{current, running, step}, jobIDs(t, pool))
}

func jobIDs(t *testing.T, pool *pgxpool.Pool) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id FROM river_job`)
	require.NoError(t, err)
	var ids []int64
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	return ids
}
