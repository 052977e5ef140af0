package engine_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/jobs"
)

const greetingWorkflow = `{
  "workflow_id": "greeting", "version": "1.0.0", "name": "Greeting",
  "nodes": [
    {"id": "start", "type": "start", "next": "set"},
    {"id": "set", "type": "action", "actionType": "set_variables",
     "parameters": {"values": {"greeting": "Hola {{name}}", "tier": "${customer.tier}"}}, "next": "decide"},
    {"id": "decide", "type": "decision", "condition": "${customer.tier} == 'gold' && score > 5",
     "branches": {"true": "vip", "false": "plain"}},
    {"id": "vip", "type": "action", "actionType": "send_message",
     "parameters": {"message": "{{greeting}}, cliente {{tier}}"}, "next": "end"},
    {"id": "plain", "type": "action", "actionType": "send_message",
     "parameters": {"message": "{{greeting}}"}, "next": "end"},
    {"id": "end", "type": "end", "result": {"summary": "Saludo enviado a {{name}}"}}
  ]}`

func TestWorkflowRunsToCompletionThroughRiver(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{deferFirstStep: true})
	b.define(t, greetingWorkflow)

	x := b.start(t, engine.StartParams{WorkflowID: "greeting", ThreadID: "whatsapp:+5215550001", Priority: 5,
		Input: map[string]any{"name": "Ana", "score": 7, "customer": map[string]any{"tier": "gold"}}})
	require.Equal(t, engine.StatusRunning, x.Status) // its first step is an execution.step job

	done := b.waitFor(t, x.ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, done.Status)
	require.Equal(t, []string{"start", "set", "decide", "vip", "end"}, done.NodePath)
	require.Equal(t, float64(100), done.Percentage())
	require.Equal(t, 5, done.StepsCompleted)
	require.Equal(t, "Hola Ana", done.Variables["greeting"])
	require.Equal(t, "gold", done.Variables["tier"])
	require.Equal(t, "success", *done.ResultType)
	require.Equal(t, "Saludo enviado a Ana", *done.ResultSummary)
	require.Equal(t, "whatsapp:+5215550001", done.ThreadID)

	// The message is stored once and delivered once.
	require.Eventually(t, func() bool {
		return countRows(t, b.pool, `SELECT count(*) FROM thread_message WHERE execution_id = $1 AND status = 'delivered'`, x.ID) == 1
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM thread_message WHERE execution_id = $1`, x.ID))
	delivered := b.channel.Messages()
	require.Len(t, delivered, 1)
	require.Equal(t, "Hola Ana, cliente gold", delivered[0].Body)
	require.Equal(t, x.ExecutionID, delivered[0].ExecutionID)

	logs, err := b.engine.Logs(context.Background(), b.pool, b.tenant, x.ExecutionID, 0, 100)
	require.NoError(t, err)
	var actions, steps []string
	var last engine.LogEntry
	deliveredEvents := 0
	for _, l := range logs {
		if l.Action == engine.EventMessageDelivered {
			// Delivery runs in its own job, so it may come before or after
			// the end of the execution.
			deliveredEvents++
			require.Equal(t, x.ExecutionID, l.Payload["execution_id"])
			continue
		}
		actions = append(actions, l.Action)
		last = l
		if l.Action == engine.EventStepUpdate {
			steps = append(steps, *l.NodeID)
		}
	}
	require.Equal(t, 1, deliveredEvents)
	require.Equal(t, engine.EventStarted, actions[0])
	require.Equal(t, engine.EventCompleted, actions[len(actions)-1])
	require.Equal(t, []string{"start", "set", "decide", "vip", "end"}, steps)
	require.Equal(t, "successful", last.Payload["status"])
	require.Equal(t, "Execution "+x.ExecutionID+" completed with result: success", last.Message)
}

func TestDecisionTakesTheOtherBranch(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, greetingWorkflow)
	// customer is missing entirely: ${customer.tier} is nil, not an error.
	x := b.start(t, engine.StartParams{WorkflowID: "greeting", Input: map[string]any{"name": "Luis", "score": 9}})
	// Nothing in this workflow waits or calls a tool: the first step, run in
	// the start transaction, took it to the end.
	require.Equal(t, engine.StatusCompleted, x.Status)
	done := b.waitFor(t, x.ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, done.Status, "%+v", done)
	require.Equal(t, []string{"start", "set", "decide", "plain", "end"}, done.NodePath)
}

// Fifty goroutines race to cancel, fail and advance (to completion) one
// execution: exactly one terminal transition wins, every loser gets the
// typed error, and the log has one terminal event.
func TestTransitionsRaceOneWinner(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{insertOnly: true})
	b.define(t, greetingWorkflow)
	for round := 0; round < 10; round++ {
		x := b.start(t, engine.StartParams{WorkflowID: "greeting", Input: map[string]any{"name": "Eva"}})

		var (
			wg                   sync.WaitGroup
			cancelWins, failWins atomic.Int32
			stepCommits          atomic.Int32
			gate                 = make(chan struct{})
		)
		for i := 0; i < 50; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				ctx := context.Background()
				switch i % 3 {
				case 0:
					_, err := b.engine.Cancel(ctx, b.tenant, x.ExecutionID, "user", "race")
					if err == nil {
						cancelWins.Add(1)
						return
					}
					require.True(t, engine.IsTransitionError(err), "cancel: %v", err)
				case 1:
					err := b.engine.Fail(ctx, x.ID, 0, engine.CodeStepFailed, "race")
					if err == nil {
						failWins.Add(1)
						return
					}
					require.True(t, engine.IsTransitionError(err), "fail: %v", err)
				case 2:
					err := b.engine.RunStep(ctx, x.ID, x.StepSeq, func(context.Context, pgxTx) error {
						stepCommits.Add(1)
						return nil
					})
					require.NoError(t, err)
				}
			}()
		}
		close(gate)
		wg.Wait()

		final := b.get(t, x.ExecutionID)
		require.True(t, engine.IsTerminal(final.Status))
		t.Logf("round %d: %s won (step commits %d)", round, final.Status, stepCommits.Load())
		completed := 0
		if final.Status == engine.StatusCompleted {
			completed = 1
		}
		require.Equal(t, 1, int(cancelWins.Load()+failWins.Load())+completed,
			"round %d: cancel %d, fail %d, final %s", round, cancelWins.Load(), failWins.Load(), final.Status)
		require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM execution_event WHERE execution_id = $1 AND action = 'workflow.completed'`, x.ID))
		if final.Status == engine.StatusCompleted {
			require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM thread_message WHERE execution_id = $1`, x.ID))
		}
		// A terminal execution never changes again, whoever tries.
		_, err := b.engine.Cancel(context.Background(), b.tenant, x.ExecutionID, "user", "late")
		var te *engine.TransitionError
		require.True(t, errors.As(err, &te))
		require.Equal(t, final.Status, te.Status)
		_, err = b.pool.Exec(context.Background(), `UPDATE agent_execution SET status = 'running' WHERE id = $1`, x.ID)
		require.ErrorContains(t, err, "cannot become running")
	}
}

// The River client is stopped while a task's tool call is in flight; a new
// client picks the execution up from its checkpoint and no node's effect
// happens twice.
func TestStepSurvivesClientRestart(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	tenant := "tenant-restart"

	var (
		calls    atomic.Int32
		keys     sync.Map
		blocking atomic.Bool
		entered  = make(chan struct{}, 4)
	)
	blocking.Store(true)
	tool := func(ctx context.Context, call engine.ToolCall) (map[string]any, error) {
		calls.Add(1)
		keys.Store(call.IdempotencyKey, true)
		if blocking.Load() {
			entered <- struct{}{}
			<-ctx.Done() // hangs until the client is stopped
			return nil, ctx.Err()
		}
		return map[string]any{"language": "es"}, nil
	}
	newEngine := func() (*engine.Engine, *engine.MemoryChannel) {
		tools := engine.NewTools()
		tools.Register("slow", tool)
		ch := &engine.MemoryChannel{}
		eng, err := engine.New(engine.Config{Pool: pool, Tools: tools, Channel: ch})
		require.NoError(t, err)
		return eng, ch
	}

	engA, chA := newEngine()
	clientA, err2 := jobs.NewClient(pool, jobs.Config{Engine: engA})
	require.NoError(t, err2)
	require.NoError(t, clientA.Start(context.Background()))

	_, _, err = engA.DefineWorkflow(context.Background(), pool, tenant, []byte(`{
	  "workflow_id": "restart", "version": "1",
	  "nodes": [
	    {"id": "start", "type": "start", "next": "hello"},
	    {"id": "hello", "type": "action", "actionType": "send_message", "parameters": {"message": "first"}, "next": "work"},
	    {"id": "work", "type": "task", "task": "slow", "output": "document", "next": "bye"},
	    {"id": "bye", "type": "action", "actionType": "send_message", "parameters": {"message": "second {{document.language}}"}, "next": "end"},
	    {"id": "end", "type": "end"}
	  ]}`))
	require.NoError(t, err)
	var x *engine.Execution
	require.NoError(t, engA.WithTx(context.Background(), func(tx pgxTx) error {
		x, err = engA.StartExecution(context.Background(), tx, engine.StartParams{TenantID: tenant, WorkflowID: "restart"})
		return err
	}))

	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the tool was never called")
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	require.NoError(t, clientA.StopAndCancel(stopCtx))
	cancel()

	mid, err := engA.GetExecution(context.Background(), pool, tenant, x.ExecutionID)
	require.NoError(t, err)
	require.Equal(t, engine.StatusRunning, mid.Status)
	require.Equal(t, "work", *mid.CurrentNodeID)
	require.Equal(t, []string{"start", "hello"}, mid.NodePath)

	blocking.Store(false)
	engB, chB := newEngine()
	clientB, err := jobs.NewClient(pool, jobs.Config{Engine: engB})
	require.NoError(t, err)
	startClient(t, clientB)

	deadline := time.Now().Add(20 * time.Second)
	for {
		cur, err := engB.GetExecution(context.Background(), pool, tenant, x.ExecutionID)
		require.NoError(t, err)
		if engine.IsTerminal(cur.Status) {
			require.Equal(t, engine.StatusCompleted, cur.Status)
			require.Equal(t, []string{"start", "hello", "work", "bye", "end"}, cur.NodePath)
			break
		}
		require.True(t, time.Now().Before(deadline), "execution did not finish after restart: %s", cur.Status)
		time.Sleep(20 * time.Millisecond)
	}
	require.Eventually(t, func() bool {
		return countRows(t, pool, `SELECT count(*) FROM thread_message WHERE execution_id = $1 AND status = 'delivered'`, x.ID) == 2
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 2, countRows(t, pool, `SELECT count(*) FROM thread_message WHERE execution_id = $1`, x.ID))
	var bodies []string
	for _, m := range append(chA.Messages(), chB.Messages()...) {
		bodies = append(bodies, m.Body)
	}
	require.ElementsMatch(t, []string{"first", "second es"}, bodies)
	// The tool ran twice (once interrupted), both times with one idempotency key.
	require.Equal(t, int32(2), calls.Load())
	n := 0
	keys.Range(func(any, any) bool { n++; return true })
	require.Equal(t, 1, n)
}

type pgxTx = pgx.Tx
