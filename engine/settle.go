package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine/workflow"
)

// A settling start (engine/lane.go, "Runs that never hold a slot") runs
// under an id ExecutionReserve takes, and its step writes its row once, in
// the state the step leaves it in (stepRun.unsaved).

// reservation is a settling start's ExecutionReserve row and the moment
// its answer came back: started_at is the database's clock then, and the
// run's later times are that reading plus the time since, so that writing
// them needs no round trip of its own.
type reservation struct {
	*dbsqlc.ExecutionReserveRow
	answered time.Time
}

// now is the database's clock as the reservation reads it, to the
// microsecond, as timestamptz stores it.
func (r *reservation) now() time.Time {
	return r.StartedAt.Add(time.Since(r.answered)).Truncate(time.Microsecond)
}

// reserveExecution takes a settling start's reservation (ExecutionReserve).
func (e *Engine) reserveExecution(ctx context.Context, tx pgx.Tx, p *dbsqlc.ExecutionReserveParams) (*reservation, error) {
	res, err := e.q.ExecutionReserve(ctx, tx, p)
	if err != nil {
		return nil, fmt.Errorf("reserving execution: %w", err)
	}
	return &reservation{ExecutionReserveRow: res, answered: time.Now()}, nil
}

// settlingRow is the row of a settling start as ExecutionInsert would have
// written it running at its first step, with the id and times reserved for
// it; stepRun.save or the step's end writes it.
func settlingRow(res *reservation, p *dbsqlc.ExecutionInsertParams) *dbsqlc.AgentExecution {
	started := res.StartedAt
	return &dbsqlc.AgentExecution{
		ID: res.ID, TenantID: p.TenantID, ExecutionID: p.ExecutionID, WorkflowID: p.WorkflowID, Version: p.Version,
		Status: StatusRunning, Lane: p.Lane, ThreadID: p.ThreadID, CanInheritLock: p.CanInheritLock,
		RestartedFrom: p.RestartedFrom, CurrentNodeID: p.CurrentNodeID, CurrentStepStartedAt: &started,
		Input: p.Input, Context: p.Context, Variables: p.Variables, ConversationHistory: json.RawMessage("[]"),
		NodePath: []string{}, TotalSteps: p.TotalSteps, StepSeq: 1,
		CorrelationID: p.CorrelationID, IdempotencyKey: p.IdempotencyKey, CallbackUrl: p.CallbackUrl, CallbackEvents: p.CallbackEvents, Priority: p.Priority,
		SessionKey: p.SessionKey, CreatedAt: res.CreatedAt, StartedAt: &started, UpdatedAt: res.CreatedAt,
		QueuedAt: &res.CreatedAt, // the column's default, now()
	}
}

// needsRow reports whether running the node needs the execution's row
// written first: everything but start, decision, set_variables and end, and
// send_message on a thread whose lock lives in memory (heldThread.private),
// reads or updates the row or rows that refer to it, or makes the
// execution wait.
func (r *stepRun) needsRow(node *workflow.Node) bool {
	if r.unsaved == nil {
		return false
	}
	switch node.Type {
	case workflow.NodeStart, workflow.NodeDecision, workflow.NodeEnd:
		return false
	case workflow.NodeAction:
		return node.ActionType != workflow.ActionSetVariables && (node.ActionType != workflow.ActionSendMessage || !r.thread.private)
	}
	return true
}

// save writes an unsaved execution's row as it was when its step began:
// running at its first step. The step then updates it as usual.
func (r *stepRun) save(ctx context.Context) error {
	if r.unsaved == nil {
		return nil
	}
	return r.insertRow(ctx, r.row)
}

// finishStep ends the execution from its step: it updates the row, or, for
// an unsaved one, writes it ended, as ExecutionFinishStep leaves a row.
func (r *stepRun) finishStep(ctx context.Context, p *dbsqlc.ExecutionFinishStepParams) (*dbsqlc.AgentExecution, error) {
	if r.unsaved == nil {
		return r.e.q.ExecutionFinishStep(ctx, r.tx, p)
	}
	x := *r.row
	x.Status, x.CurrentNodeID, x.Variables, x.NodePath = p.Status, &p.CurrentNodeID, p.Variables, p.NodePath
	x.StepsCompleted, x.TotalSteps, x.StepSeq = p.StepsCompleted, p.TotalSteps, x.StepSeq+1
	x.ResultType, x.ResultSummary, x.Result = &p.ResultType, p.ResultSummary, p.Result
	x.ErrorCode, x.ErrorMessage, x.FailedNodeID, x.ErrorDetails = p.ErrorCode, p.ErrorMessage, p.FailedNodeID, p.ErrorDetails
	if err := r.insertRow(ctx, &x); err != nil {
		return nil, err
	}
	return r.row, nil
}

// insertRow writes the unsaved execution's row as x, at the reservation's
// clock; the write is held back to go with the transaction's next
// statement or its COMMIT, and the row it writes becomes the step's.
func (r *stepRun) insertRow(ctx context.Context, x *dbsqlc.AgentExecution) error {
	row := *x
	row.UpdatedAt = r.unsaved.now()
	if IsTerminal(row.Status) {
		row.CompletedAt = &row.UpdatedAt
	}
	explain := func(err error) error { return executionInsertError(err, x.ExecutionID) }
	err := r.e.q.ExecutionInsertSettled(ctx, later(r.tx, explain), &dbsqlc.ExecutionInsertSettledParams{
		ID: x.ID, TenantID: x.TenantID, ExecutionID: x.ExecutionID, WorkflowID: x.WorkflowID, Version: x.Version,
		Status: x.Status, Lane: x.Lane, ThreadID: x.ThreadID, CanInheritLock: x.CanInheritLock, RestartedFrom: x.RestartedFrom,
		CurrentNodeID: x.CurrentNodeID, Input: x.Input, Context: x.Context, Variables: x.Variables,
		CorrelationID: x.CorrelationID, IdempotencyKey: x.IdempotencyKey, CallbackUrl: x.CallbackUrl, CallbackEvents: x.CallbackEvents,
		Priority: x.Priority, TotalSteps: x.TotalSteps, StepsCompleted: x.StepsCompleted, NodePath: x.NodePath, StepSeq: x.StepSeq,
		ResultType: x.ResultType, ResultSummary: x.ResultSummary, Result: x.Result,
		ErrorCode: x.ErrorCode, ErrorMessage: x.ErrorMessage, FailedNodeID: x.FailedNodeID, ErrorDetails: x.ErrorDetails,
		CreatedAt: x.CreatedAt, StartedAt: x.StartedAt, CompletedAt: row.CompletedAt, UpdatedAt: row.UpdatedAt, SessionKey: x.SessionKey,
	})
	if err != nil {
		return err
	}
	r.row, r.unsaved = &row, nil
	return nil
}
