package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/pgtest"
)

// sessionRun is a run of a session lane as the database has it.
type sessionRun struct {
	session, prompt      string
	started, ended       time.Time
	delivered, completed bool
}

// TestSlotlessSessionRunsAcrossTwoProcesses races the inbound path whose
// runs start without a slot (their first step settles: they end in the
// router's transaction) against sessions whose runs call a tool and hold a
// slot of lane main (limit 2), through two processes at once. Every message
// gets exactly one run whose prompt it is; a session's runs never overlap
// and follow each sender's order; lane main never runs more than its
// limit; every settling run's message is delivered exactly once.
func TestSlotlessSessionRunsAcrossTwoProcesses(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	tools := engine.NewTools()
	tools.Register("work", func(ctx context.Context, call engine.ToolCall) (map[string]any, error) {
		time.Sleep(time.Duration(1+rand.IntN(4)) * time.Millisecond)
		return map[string]any{"done": true}, nil
	})
	channel := &engine.MemoryChannel{}
	cfg := engine.Config{LaneLimits: map[string]int{"main": 2}, Tools: tools, Channel: channel}
	a := laneProcessWith(t, dbURL, cfg)
	b := laneProcessWith(t, dbURL, cfg)
	ctx := context.Background()
	tenant := "tenant-slotless"
	for _, def := range []string{
		`{"workflow_id": "reply", "version": "1", "nodes": [
		  {"id": "start", "type": "start", "next": "note"},
		  {"id": "note", "type": "action", "actionType": "set_variables", "parameters": {"values": {"seen": true}}, "next": "check"},
		  {"id": "check", "type": "decision", "condition": "${seen}", "branches": {"true": "say", "false": "end"}},
		  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "re: {{lastResponse}}"}, "next": "end"},
		  {"id": "end", "type": "end"}]}`,
		`{"workflow_id": "agent", "version": "1", "nodes": [
		  {"id": "start", "type": "start", "next": "work"},
		  {"id": "work", "type": "task", "task": "work", "inputs": {"text": "{{lastResponse}}"}, "next": "end"},
		  {"id": "end", "type": "end"}]}`,
	} {
		_, _, err := a.DefineWorkflow(ctx, a.Pool(), tenant, []byte(def))
		require.NoError(t, err)
	}
	threads := map[string]string{"s1": "reply", "s2": "reply", "s3": "reply", "s4": "reply", "t1": "agent", "t2": "agent"}
	for th, wf := range threads {
		_, _, err := a.UpsertThread(ctx, a.Pool(), engine.ThreadUpsert{TenantID: tenant, ThreadID: th, Channel: "web", Contact: th,
			DefaultWorkflowID: wf, Queue: &engine.QueueSettings{Mode: "followup", DebounceMS: new(int)}})
		require.NoError(t, err)
	}

	stop := make(chan struct{})
	samplerDone := make(chan struct{})
	var samples, overLimit atomic.Int64
	go func() {
		defer close(samplerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var running int
			if err := b.Pool().QueryRow(ctx, `SELECT count(*) FROM agent_execution WHERE lane = 'main' AND status = 'running'`).Scan(&running); err == nil {
				samples.Add(1)
				if running > 2 {
					overLimit.Add(1)
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	// Twelve senders, two per thread, one per process; each sends its
	// messages one after the other.
	const perSender = 8
	var wg sync.WaitGroup
	sender := 0
	for th := range threads {
		for _, eng := range []*engine.Engine{a, b} {
			sender++
			g := sender
			wg.Go(func() {
				for i := range perSender {
					text := fmt.Sprintf("%s g%d %02d", th, g, i)
					require.NoError(t, eng.WithTx(ctx, func(tx pgx.Tx) error {
						_, err := eng.ReceiveInboundTx(ctx, tx, engine.InboundParams{TenantID: tenant, ThreadID: th, Text: text, MessageID: text})
						return err
					}))
				}
			})
		}
	}
	wg.Wait()
	total := perSender * 2 * len(threads)
	require.Eventually(t, func() bool {
		var runs, open, queued, pending int
		require.NoError(t, a.Pool().QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status <> 'completed'),
			(SELECT count(*) FROM thread_message WHERE direction = 'in' AND status <> 'consumed'),
			(SELECT count(*) FROM thread_message WHERE direction = 'out' AND status <> 'delivered') FROM agent_execution`).Scan(&runs, &open, &queued, &pending))
		return runs == total && open == 0 && queued == 0 && pending == 0
	}, 90*time.Second, 50*time.Millisecond)
	close(stop)
	<-samplerDone
	require.Greater(t, samples.Load(), int64(10))
	require.Zero(t, overLimit.Load(), "a sample saw lane main running more than its limit")

	rows, err := a.Pool().Query(ctx, `SELECT x.session_key, x.variables->>'lastResponse', x.started_at, x.completed_at,
		EXISTS (SELECT 1 FROM thread_message m WHERE m.execution_id = x.id AND m.direction = 'out' AND m.status = 'delivered'),
		x.status = 'completed'
		FROM agent_execution x ORDER BY x.session_key, x.started_at`)
	require.NoError(t, err)
	runs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (sessionRun, error) {
		var s sessionRun
		return s, r.Scan(&s.session, &s.prompt, &s.started, &s.ended, &s.delivered, &s.completed)
	})
	require.NoError(t, err)
	require.Len(t, runs, total)
	seen := map[string]bool{}
	lastOf := map[string]string{} // session and sender → last prompt
	for i, r := range runs {
		require.False(t, seen[r.prompt], "two runs for %q", r.prompt)
		seen[r.prompt] = true
		if i > 0 && runs[i-1].session == r.session {
			require.False(t, r.started.Before(runs[i-1].ended), "runs of %s overlap: %q and %q", r.session, runs[i-1].prompt, r.prompt)
		}
		var th, from string
		var n int
		_, err := fmt.Sscanf(r.prompt, "%s %s %d", &th, &from, &n)
		require.NoError(t, err)
		key := r.session + " " + from
		require.Less(t, lastOf[key], r.prompt, "%s ran out of its sender's order", r.prompt)
		lastOf[key] = r.prompt
		if threads[th] == "reply" {
			require.True(t, r.delivered, "the reply to %q was not delivered", r.prompt)
		}
	}
	// The path under test ran: reply runs that needed no step job.
	var slotless int
	require.NoError(t, a.Pool().QueryRow(ctx, `SELECT count(*) FROM agent_execution x WHERE x.workflow_id = 'reply'
		AND NOT EXISTS (SELECT 1 FROM river_job j WHERE j.kind = 'execution.step' AND (j.args->>'execution_id')::bigint = x.id)`).Scan(&slotless))
	t.Logf("%d of %d reply runs started without a slot", slotless, perSender*2*4)
	require.Positive(t, slotless)
	delivered := map[int64]int{}
	for _, m := range channel.Messages() {
		delivered[m.ID]++
	}
	require.Len(t, delivered, perSender*2*4, "one reply per message on the four reply threads")
	for id, n := range delivered {
		require.Equal(t, 1, n, "message %d delivered %d times", id, n)
	}
}
