package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

// inboundBundle: a thread whose default workflow blocks in a tool until
// released, so a session run stays active while messages arrive.
func (b *testBundle) inbound(t *testing.T, thread, text, id string) *engine.InboundResult {
	t.Helper()
	var res *engine.InboundResult
	require.NoError(t, b.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
		var err error
		res, err = b.engine.ReceiveInboundTx(context.Background(), tx, engine.InboundParams{TenantID: b.tenant, ThreadID: thread, Text: text, MessageID: id})
		return err
	}))
	return res
}

func sessionRuns(t *testing.T, b *testBundle, thread string) []*engine.Execution {
	t.Helper()
	xs, err := b.engine.ListExecutions(context.Background(), b.pool, b.tenant, engine.ExecutionFilter{ThreadID: thread, Limit: 100})
	require.NoError(t, err)
	for i, j := 0, len(xs)-1; i < j; i, j = i+1, j-1 {
		xs[i], xs[j] = xs[j], xs[i]
	}
	return xs
}

// TestInboundCollectDebounceCapSummarizeAndCommand: the first message
// starts a run; while it is busy, messages are collected under the cap with
// the overflow summarized; after the run ends and the debounce passes, one
// run gets the collected prompt; a /queue command changes the session.
func TestInboundCollectDebounceCapSummarizeAndCommand(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := setup(t, setupOpts{tools: map[string]engine.ToolFunc{
		"block": blockUntil(release),
	}})
	b.define(t, taskWorkflow("agent", "block"))
	_, _, err := b.engine.UpsertThread(context.Background(), b.pool, engine.ThreadUpsert{TenantID: b.tenant, ThreadID: "th", Channel: "whatsapp", Contact: "+52", DefaultWorkflowID: "agent"})
	require.NoError(t, err)

	cmd := b.inbound(t, "th", "/queue collect debounce:300ms cap:2 drop:summarize", "m0")
	require.Equal(t, engine.OutcomeCommand, cmd.Outcome)
	th, err := b.engine.GetThread(context.Background(), b.pool, b.tenant, "th")
	require.NoError(t, err)
	require.Equal(t, engine.EffectiveQueueSettings{Mode: "collect", DebounceMS: 300, Cap: 2, Drop: "summarize",
		Sources: map[string]string{"mode": "session", "debounce_ms": "session", "cap": "session", "drop": "session"}}, th.Queue)

	first := b.inbound(t, "th", "hola", "m1")
	require.Equal(t, engine.OutcomeStarted, first.Outcome)
	require.NotNil(t, first.ExecutionID)
	// A repeated message id replays the answer.
	require.Equal(t, first, b.inbound(t, "th", "hola", "m1"))
	for i, text := range []string{"uno", "dos", "tres"} {
		r := b.inbound(t, "th", text, "q"+string(rune('a'+i)))
		require.Equal(t, engine.OutcomeQueued, r.Outcome)
		require.Nil(t, r.ExecutionID)
	}
	require.Len(t, sessionRuns(t, b, "th"), 1)
	close(release)
	ended := time.Now()
	runs := func() []*engine.Execution { return sessionRuns(t, b, "th") }
	require.Eventually(t, func() bool { return len(runs()) == 2 }, 20*time.Second, 20*time.Millisecond)
	second := b.waitFor(t, runs()[1].ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, second.Status)
	require.Equal(t, "[Queue overflow] Dropped 1 messages due to cap. Summary:\n- uno\n\n[Queued messages while agent was busy]\n\n---\nQueued #1\ndos\n\n---\nQueued #2\ntres",
		second.Variables["lastResponse"])
	require.Len(t, second.Variables["inboundMessages"], 2)
	// Debounce: the queued run waited for the quiet window after the last
	// message (loose bound).
	require.True(t, second.CreatedAt.After(ended.Add(-time.Second)))
	time.Sleep(300 * time.Millisecond)
	require.Len(t, runs(), 2, "nothing is answered twice")
	var typing int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM execution_event WHERE action = 'thread.typing'`).Scan(&typing))
	require.Equal(t, 4, typing) // started + three queued behind the active run
}

// TestInboundQueuedMessagesSurviveCancelledRun: messages queued while the
// active run is cancelled are answered afterwards, once.
func TestInboundQueuedMessagesSurviveCancelledRun(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{tools: map[string]engine.ToolFunc{
		"block": func(ctx context.Context, call engine.ToolCall) (map[string]any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
		"noop": func(context.Context, engine.ToolCall) (map[string]any, error) { return map[string]any{}, nil },
	}})
	b.define(t, taskWorkflow("agent", "block"))
	_, _, err := b.engine.UpsertThread(context.Background(), b.pool, engine.ThreadUpsert{TenantID: b.tenant, ThreadID: "tc", Channel: "web", Contact: "c", DefaultWorkflowID: "agent",
		Queue: &engine.QueueSettings{Mode: "followup", DebounceMS: new(int)}})
	require.NoError(t, err)
	first := b.inbound(t, "tc", "a", "")
	require.Equal(t, engine.OutcomeStarted, first.Outcome)
	require.Equal(t, engine.OutcomeQueued, b.inbound(t, "tc", "b", "").Outcome)
	require.Equal(t, engine.OutcomeQueued, b.inbound(t, "tc", "c", "").Outcome)
	_, err = b.engine.Cancel(context.Background(), b.tenant, *first.ExecutionID, "user", "test")
	require.NoError(t, err)
	// followup: one run per message, in order; each blocks until cancelled.
	for _, want := range []string{"b", "c"} {
		var x *engine.Execution
		require.Eventually(t, func() bool {
			rs := sessionRuns(t, b, "tc")
			x = rs[len(rs)-1]
			return x.Variables["lastResponse"] == want
		}, 20*time.Second, 20*time.Millisecond)
		_, err = b.engine.Cancel(context.Background(), b.tenant, x.ExecutionID, "user", "test")
		require.NoError(t, err)
	}
	time.Sleep(300 * time.Millisecond)
	require.Len(t, sessionRuns(t, b, "tc"), 3)
}
