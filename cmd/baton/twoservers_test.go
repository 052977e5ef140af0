package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTwoServersShareOneDatabase runs two `baton serve` processes on one
// database and starts executions through both at once, each talking on one
// of a few shared threads: it says "uno", calls a slow tool (while holding
// the thread, so that the others queue) and says "dos". Nothing is shared
// between the processes but the database. The test checks the invariants
// that must hold across them:
//   - every execution completes once;
//   - every message is delivered exactly once, by one of the two, and
//     each delivered some;
//   - on each thread, messages go out in outbox order, each execution's
//     together and in its own order (nobody talks over the holder), and
//     executions whose messages were queued are served in the order of
//     their first queued message;
//   - the lane's limit (3) bounds the tool calls in flight across both
//     processes, and is reached;
//   - each thread's lock events alternate: one holder at a time.
func TestTwoServersShareOneDatabase(t *testing.T) {
	t.Parallel()
	const (
		executions = 90
		threads    = 2
		laneLimit  = 3
	)
	var inFlight, maxInFlight, calls atomic.Int32
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		calls.Add(1)
		// Hold the call until the lane's limit of calls is in flight (or
		// for a second at most, for the last few runs), so that the limit
		// is reached however slowly a loaded machine starts the runs.
		for held := time.Now(); inFlight.Load() < laneLimit && time.Since(held) < time.Second; {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(40+rand.IntN(40)) * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok": true}`))
	}))
	t.Cleanup(tool.Close)

	env, pool, count := serveDatabase(t, fmt.Sprintf(
		`{agents: {defaults: {maxConcurrent: %d}}, tools: {slow: {type: "http", url: %q, timeout: "20s", retry: {max: 0}}}}`,
		laneLimit, tool.URL))

	servers := []*server{startServer(t, env), startServer(t, env)}
	servers[0].define(t, `{"workflow_id": "talk", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "uno"},
	  {"id": "uno", "type": "action", "actionType": "send_message", "parameters": {"message": "{{n}} uno"}, "next": "mid"},
	  {"id": "mid", "type": "task", "task": "slow", "inputs": {"n": "{{n}}"}, "next": "dos"},
	  {"id": "dos", "type": "action", "actionType": "send_message", "parameters": {"message": "{{n}} dos"}, "next": "end"},
	  {"id": "end", "type": "end", "result": {"summary": "ok"}}]}`)

	var wg sync.WaitGroup
	sem := make(chan struct{}, 12)
	for i := range executions {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			id := fmt.Sprintf("x%03d", i)
			status, body := servers[i%2].post(t, "/api/v1/workflow/execute", map[string]any{
				"workflow_id": "talk", "execution_id": id, "thread_id": fmt.Sprintf("th-%d", i%threads), "input": map[string]any{"n": id}})
			require.Equal(t, http.StatusAccepted, status, "%s", body)
		}()
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		return count(`SELECT count(*) FROM agent_execution WHERE status = 'completed'`) == executions &&
			count(`SELECT count(*) FROM thread_message WHERE direction = 'out' AND status = 'delivered'`) == 2*executions
	}, 120*time.Second, 100*time.Millisecond, "completed %d, delivered %d",
		count(`SELECT count(*) FROM agent_execution WHERE status = 'completed'`),
		count(`SELECT count(*) FROM thread_message WHERE direction = 'out' AND status = 'delivered'`))
	require.Equal(t, executions, count(`SELECT count(*) FROM agent_execution`))
	require.Equal(t, executions, count(`SELECT count(*) FROM execution_event WHERE action = 'workflow.completed'`), "one completion per execution")
	require.Equal(t, executions, int(calls.Load()), "one tool call per execution")

	// Exactly once, across both processes; each delivered some.
	delivered := map[int64]int{}
	for i, s := range servers {
		ids := s.deliveredIDs()
		require.NotEmpty(t, ids, "server %d delivered nothing", i)
		for id, n := range ids {
			delivered[id] += n
		}
	}
	require.Len(t, delivered, 2*executions)
	for id, n := range delivered {
		require.Equal(t, 1, n, "message %d delivered %d times", id, n)
	}

	// The lane bounds the work in flight across both processes.
	t.Logf("tool calls in flight: at most %d (limit %d)", maxInFlight.Load(), laneLimit)
	require.LessOrEqual(t, maxInFlight.Load(), int32(laneLimit), "tool calls in flight above the lane's limit")
	require.Equal(t, int32(laneLimit), maxInFlight.Load(), "the lane's limit was never reached: the test proves nothing")

	queuedAny := false
	for th := range threads {
		thread := fmt.Sprintf("th-%d", th)
		// The order the channel took them in (delivered_at: one deliverer
		// per thread, each recorded as soon as it is taken) is outbox order.
		var byOutbox, byDelivery []int64
		require.NoError(t, pool.QueryRow(context.Background(), `
			SELECT array_agg(m.id ORDER BY m.delivery_seq, m.id), array_agg(m.id ORDER BY m.delivered_at, m.id)
			FROM thread_message m JOIN thread h ON h.id = m.thread_id
			WHERE h.thread_id = $1 AND m.direction = 'out'`, thread).Scan(&byOutbox, &byDelivery))
		require.Equal(t, byOutbox, byDelivery, "thread %s: delivered out of outbox order", thread)

		rows, err := pool.Query(context.Background(), `
			SELECT x.execution_id, m.body, EXISTS (
			         SELECT 1 FROM execution_event e
			         WHERE e.execution_id = m.execution_id AND e.action = 'thread.message_queued'
			           AND e.payload ->> 'message_id' = m.id::text)
			FROM thread_message m JOIN thread h ON h.id = m.thread_id JOIN agent_execution x ON x.id = m.execution_id
			WHERE h.thread_id = $1 AND m.direction = 'out'
			ORDER BY m.delivery_seq, m.id`, thread)
		require.NoError(t, err)
		var speakers, bodies []string
		queuedOrder := []string{} // executions in the order of their first queued message
		firstQueued := map[string]bool{}
		for rows.Next() {
			var x, b string
			var queued bool
			require.NoError(t, rows.Scan(&x, &b, &queued))
			speakers, bodies = append(speakers, x), append(bodies, b)
			if queued && !firstQueued[x] {
				firstQueued[x] = true
				queuedAny = true
			}
		}
		require.NoError(t, rows.Err())
		require.Len(t, bodies, 2*executions/threads, "thread %s", thread)
		for i := 0; i < len(bodies); i += 2 {
			require.Equal(t, speakers[i], speakers[i+1], "thread %s: %s spoke between %s's messages", thread, speakers[i+1], speakers[i])
			require.Equal(t, []string{speakers[i] + " uno", speakers[i] + " dos"}, bodies[i:i+2], "thread %s", thread)
			if firstQueued[speakers[i]] {
				queuedOrder = append(queuedOrder, speakers[i])
			}
		}
		// The drain serves queued executions by their first queued message.
		var wantQueued []string
		require.NoError(t, pool.QueryRow(context.Background(), `
			SELECT coalesce(array_agg(execution_id ORDER BY first_queued), '{}') FROM (
			  SELECT x.execution_id, min((e.payload ->> 'message_id')::bigint) AS first_queued
			  FROM execution_event e JOIN agent_execution x ON x.id = e.execution_id JOIN thread h ON h.id = x.thread_id
			  WHERE h.thread_id = $1 AND e.action = 'thread.message_queued'
			  GROUP BY x.execution_id) q`, thread).Scan(&wantQueued))
		require.Equal(t, wantQueued, queuedOrder, "thread %s: queued executions served out of order", thread)

		// One holder at a time: acquired and released alternate.
		var lockEvents []string
		require.NoError(t, pool.QueryRow(context.Background(), `
			SELECT array_agg(e.action ORDER BY e.id) FROM execution_event e
			WHERE e.action IN ('thread.lock_acquired', 'thread.lock_released') AND e.payload ->> 'thread_id' = $1`, thread).Scan(&lockEvents))
		require.NotEmpty(t, lockEvents)
		for i, a := range lockEvents {
			require.Equal(t, map[bool]string{true: "thread.lock_acquired", false: "thread.lock_released"}[i%2 == 0], a,
				"thread %s: lock event %d of %v", thread, i, lockEvents)
		}
	}
	require.True(t, queuedAny, "no message was ever queued: the test proves nothing about turns")
}
