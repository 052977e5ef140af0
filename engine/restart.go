package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// EventRestarted is written on an execution that a restart replaced.
const EventRestarted = "workflow.restarted"

// RestartTx starts a fresh execution with the workflow version, input,
// context, thread, lane, priority and callback of an existing one, linked to
// it by restarted_from, in tx. A live
// execution is cancelled first, by cancelledBy (default "user") with reason
// (default "restarted"); a terminal one stays as it is. A restarted child
// runs on its own: no parent waits for the new execution.
func (e *Engine) RestartTx(ctx context.Context, tx pgx.Tx, tenantID, executionID, cancelledBy, reason string) (*Execution, error) {
	old, err := e.q.ExecutionViewByExecutionID(ctx, tx, &dbsqlc.ExecutionViewByExecutionIDParams{TenantID: tenantID, ExecutionID: executionID})
	if err != nil {
		return nil, notFound(err)
	}
	x := &old.AgentExecution
	if !IsTerminal(x.Status) {
		if reason == "" {
			reason = "restarted"
		}
		if _, err := e.CancelTx(ctx, tx, tenantID, executionID, cancelledBy, reason); err != nil {
			// It may have ended since it was read: then there is nothing to
			// cancel, and the restart goes on.
			var lost *TransitionError
			if !errors.As(err, &lost) {
				return nil, err
			}
		}
	}
	var input, execCtx map[string]any
	if err := jsonUnmarshal(x.Input, &input); err != nil {
		return nil, fmt.Errorf("reading the input of execution %s: %w", executionID, err)
	}
	if err := jsonUnmarshal(x.Context, &execCtx); err != nil {
		return nil, fmt.Errorf("reading the context of execution %s: %w", executionID, err)
	}
	fresh, err := e.StartExecution(ctx, tx, StartParams{
		TenantID: tenantID, WorkflowID: x.WorkflowID, Version: x.Version, ThreadID: old.ThreadKey, Lane: x.Lane,
		Input: input, Context: execCtx, CorrelationID: x.CorrelationID, CallbackURL: deref(x.CallbackUrl), CallbackEvents: x.CallbackEvents,
		Priority: int(x.Priority), SessionKey: deref(x.SessionKey), RestartedFrom: x.ID,
	})
	if err != nil {
		return nil, err
	}
	events := &eventLog{tenantID: tenantID, executionID: x.ID}
	events.add(EventRestarted, "info", "", fmt.Sprintf("Execution %s restarted as %s", executionID, fresh.ExecutionID),
		map[string]any{"execution_id": executionID, "restarted_as": fresh.ExecutionID})
	if err := events.write(ctx, e.q, tx); err != nil {
		return nil, err
	}
	return e.GetExecution(ctx, tx, tenantID, fresh.ExecutionID)
}
