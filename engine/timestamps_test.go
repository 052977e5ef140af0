package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

// With greetingWorkflow, these end in each terminal status: broken fails
// at its tool, confirm waits for input (and is cancelled or times out).
const (
	brokenWorkflow = `{"workflow_id": "broken", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "call"},
	  {"id": "call", "type": "task", "task": "boom", "next": "end"},
	  {"id": "end", "type": "end"}]}`
	inputWorkflow = `{"workflow_id": "confirm", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "confirm"},
	  {"id": "confirm", "type": "action", "actionType": "request_input",
	   "parameters": {"prompt": "¿Desea continuar?", "input_type": "confirm", "timeout": "{{timeout}}"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`
)

// An execution's updated_at is never older than its started_at or its
// completed_at, whatever way it ran (its first step in the start
// transaction, without a slot, or as a job) and however it ended:
// completed, failed, cancelled or timed out; a waiting one's is not older
// than its started_at either.
func TestUpdatedAtNotOlderThanStartedOrCompleted(t *testing.T) {
	t.Parallel()
	boom := func(context.Context, engine.ToolCall) (map[string]any, error) {
		return nil, &engine.ToolError{Class: engine.ClassValidation, Err: errors.New("the document is damaged")}
	}
	for name, opts := range map[string]setupOpts{
		"first step inline": {},
		"first step as job": {deferFirstStep: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts.tools = map[string]engine.ToolFunc{"boom": boom}
			b := setup(t, opts)
			b.define(t, greetingWorkflow)
			b.define(t, brokenWorkflow)
			b.define(t, inputWorkflow)

			completed := b.start(t, engine.StartParams{WorkflowID: "greeting",
				Input: map[string]any{"name": "Ana", "score": 7, "customer": map[string]any{"tier": "gold"}}})
			failed := b.start(t, engine.StartParams{WorkflowID: "broken"})
			cancelled := b.start(t, engine.StartParams{WorkflowID: "confirm", Input: map[string]any{"timeout": "1h"}})
			timedOut := b.start(t, engine.StartParams{WorkflowID: "confirm", Input: map[string]any{"timeout": "1s"}})

			waiting := b.waitFor(t, cancelled.ExecutionID, func(x *engine.Execution) bool { return x.Status == engine.StatusWaiting })
			requireTimesInOrder(t, waiting)
			_, err := b.engine.Cancel(context.Background(), b.tenant, cancelled.ExecutionID, "user", "no longer needed")
			require.NoError(t, err)

			for id, want := range map[string]engine.ExecutionStatus{
				completed.ExecutionID: engine.StatusCompleted, failed.ExecutionID: engine.StatusFailed,
				cancelled.ExecutionID: engine.StatusCancelled, timedOut.ExecutionID: engine.StatusTimeout,
			} {
				x := b.waitFor(t, id, terminal)
				require.Equal(t, want, x.Status)
				require.NotNil(t, x.CompletedAt, want)
				requireTimesInOrder(t, x)
				require.False(t, x.UpdatedAt.Before(*x.CompletedAt), "%s: updated_at %s is before completed_at %s", want, x.UpdatedAt, *x.CompletedAt)
				require.False(t, x.CompletedAt.Before(*x.StartedAt), "%s: completed_at %s is before started_at %s", want, *x.CompletedAt, *x.StartedAt)
			}
		})
	}
}

// requireTimesInOrder checks that a started execution was updated no
// earlier than it was created and started.
func requireTimesInOrder(t *testing.T, x *engine.Execution) {
	t.Helper()
	require.NotNil(t, x.StartedAt, x.Status)
	require.False(t, x.StartedAt.Before(x.CreatedAt), "%s: started_at %s is before created_at %s", x.Status, *x.StartedAt, x.CreatedAt)
	require.False(t, x.UpdatedAt.Before(*x.StartedAt), "%s: updated_at %s is before started_at %s", x.Status, x.UpdatedAt, *x.StartedAt)
}
