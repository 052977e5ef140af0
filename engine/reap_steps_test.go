package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

// reaperOpts run the step reaper every 100 ms on executions unchanged for
// 300 ms.
func reaperOpts(o setupOpts) setupOpts {
	o.stepReapInterval = 100 * time.Millisecond
	o.stepRescueAfter = 300 * time.Millisecond
	return o
}

func steadyTool(context.Context, engine.ToolCall) (map[string]any, error) {
	return map[string]any{"ok": true}, nil
}

func (b *testBundle) stepRecoveries(t *testing.T, id int64) int {
	t.Helper()
	return countRows(t, b.pool, `SELECT step_recoveries FROM agent_execution WHERE id = $1`, id)
}

func (b *testBundle) countEvents(t *testing.T, executionID, action string) int {
	t.Helper()
	logs, err := b.engine.Logs(context.Background(), b.pool, b.tenant, executionID, 0, 1000)
	require.NoError(t, err)
	n := 0
	for _, l := range logs {
		if l.Action == action {
			n++
		}
	}
	return n
}

// A running execution whose step job is deleted by hand gets a new one from
// the step reaper and completes.
func TestStepReaperReplacesALostStepJob(t *testing.T) {
	t.Parallel()
	b := setup(t, reaperOpts(setupOpts{tools: map[string]engine.ToolFunc{"steady": steadyTool}}))
	b.define(t, taskWorkflow("lost", "steady"))
	ctx := context.Background()
	var x *engine.Execution
	require.NoError(t, b.engine.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		if x, err = b.engine.StartExecution(ctx, tx, engine.StartParams{TenantID: b.tenant, WorkflowID: "lost", Input: map[string]any{"lane": "main"}}); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM river_job WHERE kind = 'execution.step' AND (args->>'execution_id')::bigint = $1`, x.ID)
		if err != nil {
			return err
		}
		require.Equal(t, int64(1), tag.RowsAffected())
		return nil
	}))
	require.Equal(t, engine.StatusRunning, x.Status)

	done := b.waitFor(t, x.ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, done.Status, "%+v", done)
	require.Equal(t, 1, b.stepRecoveries(t, x.ID))
	require.Equal(t, 1, b.countEvents(t, x.ExecutionID, engine.EventStepRecovered))
}

// An execution whose step job keeps vanishing is recovered
// MaxStepRecoveries times (3 by default), then failed at its node, which
// frees its lane slot for the run pending behind it.
func TestStepReaperFailsAfterMaxRecoveries(t *testing.T) {
	t.Parallel()
	b := setup(t, reaperOpts(setupOpts{laneLimits: map[string]int{"solo": 1}, tools: map[string]engine.ToolFunc{"steady": steadyTool}}))
	b.define(t, taskWorkflow("vanishing", "steady"))
	b.define(t, taskWorkflow("steady-run", "steady"))
	ctx := context.Background()
	// Every step job of a vanishing execution is deleted as it is inserted.
	_, err := b.pool.Exec(ctx, `
		CREATE FUNCTION drop_vanishing_step() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			DELETE FROM river_job j USING agent_execution e
			WHERE j.id = NEW.id AND e.id = (NEW.args->>'execution_id')::bigint AND e.workflow_id = 'vanishing';
			RETURN NULL;
		END $$;
		CREATE TRIGGER drop_vanishing_step AFTER INSERT ON river_job
			FOR EACH ROW WHEN (NEW.kind = 'execution.step') EXECUTE FUNCTION drop_vanishing_step();`)
	require.NoError(t, err)

	x := b.start(t, engine.StartParams{WorkflowID: "vanishing", Lane: "solo", Input: map[string]any{"lane": "solo"}})
	require.Equal(t, engine.StatusRunning, x.Status)
	queued := b.start(t, engine.StartParams{WorkflowID: "steady-run", Lane: "solo", Input: map[string]any{"lane": "solo"}})
	require.Equal(t, engine.StatusPending, queued.Status)

	done := b.waitFor(t, x.ExecutionID, terminal)
	require.Equal(t, engine.StatusFailed, done.Status)
	require.Equal(t, engine.CodeStepFailed, *done.ErrorCode)
	require.Equal(t, "work", *done.FailedNodeID)
	require.Contains(t, *done.ErrorMessage, "after 3 recoveries")
	require.Contains(t, *done.ErrorMessage, "MaxStepRecoveries")
	require.Equal(t, engine.DefaultMaxStepRecoveries, b.stepRecoveries(t, x.ID))
	require.Equal(t, engine.DefaultMaxStepRecoveries, b.countEvents(t, x.ExecutionID, engine.EventStepRecovered))
	require.Equal(t, engine.StatusCompleted, b.waitFor(t, queued.ExecutionID, terminal).Status)
	require.Equal(t, 0, b.stepRecoveries(t, queued.ID))
}
