package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// One of two `baton serve` processes is SIGKILLed while four of
// its executions hold every slot of lane main mid-step (their tool call in
// flight) and a fifth waits for a slot. The other process notices the death
// through the dead one's presence lock (jobs/presence.go) and hands its
// running steps back: the four run their step again and finish, and the
// fifth gets its slot: the sweep's log line shows that the steps came back
// through presence, not through River's rescuer, which alone took 65–103 s.
// How long each round took is logged, not asserted: on a loaded machine
// under -race a wall-clock bound fails for reasons of its own. Five kills,
// the survivor of each round serving the next.
func TestKilledProcessHandsBackItsStepsInSeconds(t *testing.T) {
	t.Parallel()
	const (
		rounds = 5
		slots  = 4
	)
	var released atomic.Bool
	var entered atomic.Int32
	stop := make(chan struct{})
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !released.Load() {
			entered.Add(1)
			select { // in flight until its process dies
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok": true}`))
	}))
	t.Cleanup(tool.Close)
	t.Cleanup(func() { close(stop) })
	env, pool, count := serveDatabase(t, fmt.Sprintf(`{lanes: {main: %d}, tools: {slow: {type: "http", url: %q, timeout: "50s", retry: {max: 0}}}}`, slots, tool.URL))

	lone := startServer(t, env)
	lone.define(t, crashFlows()[0]) // midstep: a message, the slow tool, a message
	var took []time.Duration
	for round := range rounds {
		released.Store(false)
		entered.Store(0)
		ids := make([]string, slots+1)
		for i := range ids {
			ids[i] = fmt.Sprintf("r%d-%d", round, i)
			status, body := lone.post(t, "/api/v1/workflow/execute", map[string]any{
				"workflow_id": "midstep", "execution_id": ids[i], "thread_id": "th-" + ids[i], "input": map[string]any{"n": ids[i]}})
			require.Equal(t, http.StatusAccepted, status, "%s", body)
		}
		require.Eventually(t, func() bool {
			return entered.Load() == slots &&
				count(`SELECT count(*) FROM agent_execution WHERE execution_id = ANY($1) AND status = 'pending'`, ids) == 1
		}, 30*time.Second, 20*time.Millisecond, "round %d", round)

		next := startServer(t, env)
		released.Store(true)
		lone.kill(t)
		killed := time.Now()
		if !assert.Eventually(t, func() bool {
			return count(`SELECT count(*) FROM agent_execution WHERE execution_id = ANY($1) AND status = 'completed'`, ids) == slots+1
		}, 90*time.Second, 20*time.Millisecond, "round %d", round) {
			dumpRound(t, pool, ids)
			t.FailNow()
		}
		took = append(took, time.Since(killed))
		require.Equal(t, slots+1, count(`SELECT count(*) FROM execution_event e JOIN agent_execution x ON x.id = e.execution_id
			WHERE x.execution_id = ANY($1) AND e.action = 'workflow.completed'`, ids), "round %d: each finished once", round)
		require.True(t, next.logged(sweepLog) || lone.logged(sweepLog),
			"round %d: the sweep, not River's rescuer, handed the steps back", round)
		lone = next
	}
	slices.Sort(took)
	t.Logf("kill → the four handed-back executions and the one waiting for a slot completed, over %d kills: min %v, median %v, max %v (all %v)",
		rounds, took[0], took[len(took)/2], took[len(took)-1], took)
}

// dumpRound logs the executions and step jobs of a round that did not end.
func dumpRound(t *testing.T, pool *pgxpool.Pool, ids []string) {
	rows, err := pool.Query(context.Background(), `
		SELECT x.execution_id, x.status, x.step_seq, coalesce(j.state::text, ''), coalesce(j.attempted_by, '{}'), coalesce(j.attempt, 0)
		FROM agent_execution x LEFT JOIN river_job j ON j.kind = 'execution.step' AND (j.args->>'execution_id')::bigint = x.id
		WHERE x.execution_id = ANY($1) ORDER BY x.execution_id, j.id`, ids)
	require.NoError(t, err)
	for rows.Next() {
		var x, status, state string
		var seq int64
		var by []string
		var attempt int
		require.NoError(t, rows.Scan(&x, &status, &seq, &state, &by, &attempt))
		t.Logf("%s %s step_seq=%d job=%s attempt=%d attempted_by=%v", x, status, seq, state, attempt, by)
	}
	var procs []string
	rows, err = pool.Query(context.Background(), `SELECT client_id || ' lost=' || coalesce(lock_lost_at::text, '-') FROM baton_process`)
	require.NoError(t, err)
	procs, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	t.Logf("baton_process: %v", procs)
}

// sweepLog is the line a process logs when it hands back a dead one's jobs.
const sweepLog = "worker processes died; their running jobs were handed back"

// logged reports whether the process wrote a log line with this message.
func (s *server) logged(msg string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.logs, func(l map[string]any) bool { return l["msg"] == msg })
}

// locks.reapInterval is honoured: with "1s", a lock that has gone stale is
// cleared about a second later, not at River's 30 s default.
func TestLockReapIntervalIsHonoured(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env, pool, count := serveDatabase(t, `{locks: {timeout: "2s", reapInterval: "1s"}}`)
	s := startServer(t, env)
	s.define(t, crashFlows()[1]) // waitlong: a message, then a wait of an hour
	status, body := s.post(t, "/api/v1/workflow/execute", map[string]any{
		"workflow_id": "waitlong", "execution_id": "holder", "thread_id": "th-held", "input": map[string]any{"n": "x"}})
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	require.Eventually(t, func() bool {
		return count(`SELECT count(*) FROM agent_execution WHERE execution_id = 'holder' AND status = 'waiting'`) == 1
	}, 30*time.Second, 20*time.Millisecond)

	// The waiting execution holds the thread, as a child killed mid-turn
	// would have: the lock goes stale 2 s after this.
	var lockedAt time.Time
	require.NoError(t, pool.QueryRow(ctx, `
		UPDATE thread t SET active_execution_id = x.id, execution_locked_at = now()
		FROM agent_execution x WHERE x.execution_id = 'holder' AND t.id = x.thread_id
		RETURNING t.execution_locked_at`).Scan(&lockedAt))
	stale := lockedAt.Add(2 * time.Second)
	require.Eventually(t, func() bool {
		return count(`SELECT count(*) FROM thread WHERE thread_id = 'th-held' AND active_execution_id IS NULL`) == 1
	}, 40*time.Second, 20*time.Millisecond)
	var clearedAt time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT updated_at FROM thread WHERE thread_id = 'th-held'`).Scan(&clearedAt))
	late := clearedAt.Sub(stale)
	t.Logf("stale lock cleared %v after it went stale (reapInterval 1s)", late)
	require.Less(t, late, 2500*time.Millisecond, "reaped on the configured 1 s interval, not the 30 s default")
	require.True(t, s.logged("Thread th-held lock is stale, clearing"), "the reaper logged the clearing")
}
