package engine_test

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

// fragileChild talks, then calls the fragile tool, then ends.
const fragileChild = `{"workflow_id": "fragile-child", "version": "1", "nodes": [
  {"id": "start", "type": "start", "next": "say"},
  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "working"}, "next": "work"},
  {"id": "work", "type": "task", "task": "fragile", "next": "end"},
  {"id": "end", "type": "end", "result": {"summary": "ok"}}]}`

// fragileParent starts fragile-child in lane solo, waits for it, then says
// how it ended.
const fragileParent = `{"workflow_id": "fragile-parent", "version": "1", "nodes": [
  {"id": "start", "type": "start", "next": "spawn"},
  {"id": "spawn", "type": "action", "actionType": "trigger_agent",
   "parameters": {"workflow_id": "fragile-child", "lane": "solo", "waitForCompletion": true}, "next": "after"},
  {"id": "after", "type": "action", "actionType": "send_message", "parameters": {"message": "child {{childExecutionStatus}}"}, "next": "end"},
  {"id": "end", "type": "end", "result": {"summary": "parent done"}}]}`

// A step that panics — in a Go tool, or inside its transaction (a tool
// output mustJSON cannot encode lands in the step_update event) — fails its
// execution at the node it was at, in one transaction that frees its lane
// slot (the run pending behind it is admitted), releases its thread lock
// (the parent's message after it goes out) and resumes its waiting parent;
// its step job completes instead of being retried.
func TestStepPanicFailsTheExecution(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		after func() (map[string]any, error)
		want  string
	}{
		{"in a Go tool", func() (map[string]any, error) { panic("kaboom") }, "kaboom"},
		{"in the step transaction", func() (map[string]any, error) {
			return map[string]any{"score": math.NaN()}, nil
		}, "unsupported value: NaN"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			called := make(chan struct{}, 8)
			release := make(chan struct{})
			var calls atomic.Int32
			b := setup(t, setupOpts{laneLimits: map[string]int{"solo": 1}, tools: map[string]engine.ToolFunc{
				"fragile": func(ctx context.Context, _ engine.ToolCall) (map[string]any, error) {
					calls.Add(1)
					called <- struct{}{}
					select {
					case <-release:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
					return c.after()
				},
				"steady": func(context.Context, engine.ToolCall) (map[string]any, error) { return map[string]any{"ok": true}, nil },
			}})
			b.define(t, fragileChild)
			b.define(t, fragileParent)
			b.define(t, taskWorkflow("steady-run", "steady"))

			parent := b.start(t, engine.StartParams{WorkflowID: "fragile-parent", ThreadID: "fragile-thread"})
			select {
			case <-called:
			case <-time.After(20 * time.Second):
				t.Fatal("the fragile tool was never called")
			}
			waiting := b.waitFor(t, parent.ExecutionID, func(x *engine.Execution) bool { return x.Status == engine.StatusWaiting })
			childID := waiting.Variables["triggeredExecutionId"].(string)
			// The child holds lane solo's only slot: the next run waits.
			queued := b.start(t, engine.StartParams{WorkflowID: "steady-run", Lane: "solo", Input: map[string]any{"lane": "solo"}})
			require.Equal(t, engine.StatusPending, queued.Status)

			close(release)
			child := b.waitFor(t, childID, terminal)
			require.Equal(t, engine.StatusFailed, child.Status)
			require.Equal(t, engine.CodeStepFailed, *child.ErrorCode)
			require.Equal(t, "work", *child.FailedNodeID)
			require.Contains(t, *child.ErrorMessage, "step panicked")
			require.Contains(t, *child.ErrorMessage, c.want)

			done := b.waitFor(t, parent.ExecutionID, terminal)
			require.Equal(t, engine.StatusCompleted, done.Status)
			require.Equal(t, "failed", done.Variables["childExecutionStatus"])
			require.Equal(t, []string{"working", "child failed"}, b.waitDelivered(t, "fragile-thread", 2))
			require.Equal(t, engine.StatusCompleted, b.waitFor(t, queued.ExecutionID, terminal).Status)

			require.Equal(t, int32(1), calls.Load(), "a panic is not retried")
			require.Equal(t, 0, countRows(t, b.pool, `SELECT count(*) FROM river_job WHERE kind = 'execution.step'
				AND (args->>'execution_id')::bigint = $1 AND (state <> 'completed' OR attempt > 1)`, child.ID))
			require.Equal(t, 0, countRows(t, b.pool, `SELECT count(*) FROM thread WHERE active_execution_id IS NOT NULL`))
		})
	}
}

// A variables document that is not a JSON object fails the execution at
// its step, loudly, without calling the tool with empty variables.
func TestCorruptVariablesFailTheStep(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	b := setup(t, setupOpts{tools: map[string]engine.ToolFunc{
		"steady": func(context.Context, engine.ToolCall) (map[string]any, error) {
			calls.Add(1)
			return map[string]any{"ok": true}, nil
		},
	}})
	b.define(t, taskWorkflow("corrupt", "steady"))
	ctx := context.Background()
	var x *engine.Execution
	require.NoError(t, b.engine.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		if x, err = b.engine.StartExecution(ctx, tx, engine.StartParams{TenantID: b.tenant, WorkflowID: "corrupt", Input: map[string]any{"lane": "main"}}); err != nil {
			return err
		}
		// Its step job runs once this commits.
		_, err = tx.Exec(ctx, `UPDATE agent_execution SET variables = '"not an object"' WHERE id = $1`, x.ID)
		return err
	}))
	require.Equal(t, engine.StatusRunning, x.Status)

	done := b.waitFor(t, x.ExecutionID, terminal)
	require.Equal(t, engine.StatusFailed, done.Status)
	require.Equal(t, engine.CodeStepFailed, *done.ErrorCode)
	require.Equal(t, "work", *done.FailedNodeID)
	require.Contains(t, *done.ErrorMessage, "variables are not valid JSON: ")
	require.Equal(t, int32(0), calls.Load())
}
