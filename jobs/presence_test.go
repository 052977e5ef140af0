package jobs

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// presenceEngine returns a pool on a new database and an engine on it.
func presenceEngine(t *testing.T) (*pgxpool.Pool, *engine.Engine) {
	t.Helper()
	pool := pgtest.NewPool(t)
	eng, err := engine.New(engine.Config{Pool: pool})
	require.NoError(t, err)
	return pool, eng
}

// startPresence starts a presence whose sweep loop never runs on its own
// (the test calls Sweep), and stops it at cleanup.
func startPresence(t *testing.T, pool *pgxpool.Pool, eng *engine.Engine, clientID string, grace time.Duration) *Presence {
	t.Helper()
	p, err := StartPresence(context.Background(), pool, PresenceConfig{Engine: eng, ClientID: clientID, SweepInterval: time.Hour, Grace: grace})
	require.NoError(t, err)
	t.Cleanup(func() { p.Stop(context.Background()) })
	return p
}

// die ends p the way SIGKILL would: its connection closes, its row stays.
// It returns once the server's backend is gone (and with it the lock).
func (p *Presence) die(t *testing.T, pool *pgxpool.Pool) {
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	pid := p.conn.PgConn().PID()
	_ = p.conn.Close(context.Background())
	p.conn = nil
	p.mu.Unlock()
	require.Eventually(t, func() bool {
		var alive bool
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, pid).Scan(&alive))
		return !alive
	}, 10*time.Second, 5*time.Millisecond)
}

// runningJob inserts a River job running under the clients in attemptedBy
// (the last one runs it) and returns its id.
func runningJob(t *testing.T, pool *pgxpool.Pool, attempt, maxAttempts int, metadata string, attemptedBy ...string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, pool.QueryRow(context.Background(), `
		INSERT INTO river_job (kind, args, state, attempt, max_attempts, attempted_at, attempted_by, queue, priority, metadata)
		VALUES ('execution.step', '{}', 'running', $1, $2, now(), $3, 'high', 1, $4)
		RETURNING id`, attempt, maxAttempts, attemptedBy, metadata).Scan(&id))
	return id
}

type jobRow struct {
	State     string
	Errors    []json.RawMessage
	Finalized bool
	Due       bool
}

func readJob(t *testing.T, pool *pgxpool.Pool, id int64) jobRow {
	t.Helper()
	var r jobRow
	require.NoError(t, pool.QueryRow(context.Background(), `
		SELECT state::text, coalesce(errors, '{}'), finalized_at IS NOT NULL, scheduled_at <= now()
		FROM river_job WHERE id = $1`, id).Scan(&r.State, &r.Errors, &r.Finalized, &r.Due))
	return r
}

func TestSweepHandsBackTheJobsOfADeadProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, eng := presenceEngine(t)
	const grace = 300 * time.Millisecond
	alive := startPresence(t, pool, eng, "alive", grace)
	doomed := startPresence(t, pool, eng, "doomed", grace)

	retry := runningJob(t, pool, 1, 25, `{}`, "alive", "doomed")
	last := runningJob(t, pool, 25, 25, `{}`, "doomed")
	cancelled := runningJob(t, pool, 1, 25, `{"cancel_attempted_at": "2026-01-01T00:00:00Z"}`, "doomed")
	others := runningJob(t, pool, 2, 25, `{}`, "doomed", "alive")
	_, err := pool.Exec(ctx, `INSERT INTO river_leader (leader_id, elected_at, expires_at) VALUES ('doomed', now(), now() + interval '1 hour')`)
	require.NoError(t, err)
	listener, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer listener.Release()
	_, err = listener.Exec(ctx, `LISTEN "public.river_leadership"`)
	require.NoError(t, err)

	// Both alive: nothing to do.
	s, err := alive.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, Sweep{Ran: true}, s)

	doomed.die(t, pool)
	// Found free, but not for Grace yet: recorded, not dead.
	s, err = alive.Sweep(ctx)
	require.NoError(t, err)
	require.Empty(t, s.Dead)
	var lost bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT lock_lost_at IS NOT NULL FROM baton_process WHERE client_id = 'doomed'`).Scan(&lost))
	require.True(t, lost)
	require.Equal(t, "running", readJob(t, pool, retry).State)

	time.Sleep(grace)
	s, err = alive.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"doomed"}, s.Dead)
	require.Equal(t, 3, s.HandedBack)

	r := readJob(t, pool, retry)
	require.Equal(t, "available", r.State)
	require.True(t, r.Due, "available now, not after a backoff")
	require.False(t, r.Finalized)
	require.Len(t, r.Errors, 1)
	var attemptErr struct {
		At      time.Time `json:"at"`
		Attempt int       `json:"attempt"`
		Error   string    `json:"error"`
	}
	require.NoError(t, json.Unmarshal(r.Errors[0], &attemptErr), "River must read the error: %s", r.Errors[0])
	require.Equal(t, 1, attemptErr.Attempt)
	require.Contains(t, attemptErr.Error, "process sweep")
	require.False(t, attemptErr.At.IsZero())

	r = readJob(t, pool, last)
	require.Equal(t, "discarded", r.State, "no attempt left")
	require.True(t, r.Finalized)
	r = readJob(t, pool, cancelled)
	require.Equal(t, "cancelled", r.State)
	require.True(t, r.Finalized)
	require.Equal(t, "running", readJob(t, pool, others).State, "the live process's job is left alone")

	var processes []string
	rows, err := pool.Query(ctx, `SELECT client_id FROM baton_process ORDER BY id`)
	require.NoError(t, err)
	processes, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"alive"}, processes)

	var leaders int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_leader`).Scan(&leaders))
	require.Zero(t, leaders, "a dead leader's row is deleted")
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := listener.Conn().WaitForNotification(waitCtx)
	require.NoError(t, err)
	require.JSONEq(t, `{"leader_id": "doomed", "action": "resigned"}`, n.Payload)

	// Nothing is handed back twice.
	time.Sleep(grace)
	s, err = alive.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, Sweep{Ran: true}, s)
}

// A process whose connection drops (a database restart, a failover) takes
// its lock back within a second and is never declared dead meanwhile.
func TestReconnectingProcessIsNotDeclaredDead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, eng := presenceEngine(t)
	const grace = time.Second
	sweeper := startPresence(t, pool, eng, "sweeper", grace)
	p, err := StartPresence(ctx, pool, PresenceConfig{Engine: eng, ClientID: "flaky", SweepInterval: 20 * time.Millisecond, Grace: grace})
	require.NoError(t, err)
	defer p.Stop(ctx)
	job := runningJob(t, pool, 1, 25, `{}`, "flaky")

	for range 3 {
		var before time.Time
		require.NoError(t, pool.QueryRow(ctx, `SELECT locked_at FROM baton_process WHERE client_id = 'flaky'`).Scan(&before))
		p.mu.Lock()
		pid := p.conn.PgConn().PID()
		p.mu.Unlock()
		_, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
		require.NoError(t, err)
		deadline := time.Now().Add(3 * grace)
		for time.Now().Before(deadline) {
			s, err := sweeper.Sweep(ctx)
			require.NoError(t, err)
			require.Empty(t, s.Dead)
			time.Sleep(50 * time.Millisecond)
		}
		var after time.Time
		var lost bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT locked_at, lock_lost_at IS NOT NULL FROM baton_process WHERE client_id = 'flaky'`).Scan(&after, &lost))
		require.True(t, after.After(before), "the lock was taken again")
		require.False(t, lost)
	}
	require.Equal(t, "running", readJob(t, pool, job).State)
}

// One sweep at a time: a sweep that finds the sweep lock taken does nothing.
func TestOneSweepAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, eng := presenceEngine(t)
	p := startPresence(t, pool, eng, "one", time.Millisecond)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, sweepLockKey)
	require.NoError(t, err)
	s, err := p.Sweep(ctx)
	require.NoError(t, err)
	require.False(t, s.Ran)
	require.NoError(t, tx.Rollback(ctx))
	s, err = p.Sweep(ctx)
	require.NoError(t, err)
	require.True(t, s.Ran)
}
