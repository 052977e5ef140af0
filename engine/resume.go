package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine/workflow"
)

// resumeSpec is what a resume merges into a waiting execution.
type resumeSpec struct {
	// vars are the execution's variables after the merge.
	vars workflow.Variables
	// eventData is stored as the execution's event_data.
	eventData map[string]any
	// cause names what resumed it: an event type, INPUT, TIMEOUT or
	// SCHEDULE_REACHED.
	cause string
	// timedOut is the value of the timedOut variable after the resume.
	timedOut bool
	// events collects the transaction's events; nil means a new log.
	events *eventLog
}

// resumeLocked moves a waiting execution, locked by the caller, to running
// at its wait node's next node: the variables merged, the workflow.resumed
// event and the next step job, in the caller's transaction. The
// compare-and-swap on wait_seq makes a second resume of the same wait (or a
// resume racing its timeout) change nothing and say so.
func (e *Engine) resumeLocked(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution, spec resumeSpec) (*dbsqlc.AgentExecution, error) {
	out, _, err := e.resume(ctx, tx, row, spec)
	if err != nil {
		return nil, err
	}
	return out, e.enqueueResumed(ctx, tx, out)
}

// resumeNow is resumeLocked for a transaction that runs no step of its own
// (an event, an input, an inbound message): when the run keeps running, its
// next nodes settle (they end it or make it wait, with no tool call and no
// child on the way) and its thread row is free or already the caller's,
// they run right here instead of in a step job, as a settling start's do.
func (e *Engine) resumeNow(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution, spec resumeSpec) (*dbsqlc.AgentExecution, error) {
	out, def, err := e.resume(ctx, tx, row, spec)
	if err != nil {
		return nil, err
	}
	if out.Status != StatusRunning || !def.StepSettlesFrom(deref(out.CurrentNodeID), e.cfg.MaxNodesPerStep) {
		return out, e.enqueueResumed(ctx, tx, out)
	}
	// The caller holds the execution row: the thread row may only be tried
	// (lock order: threads before executions).
	thread, err := e.q.ThreadTryLock(ctx, tx, out.ThreadID)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, e.enqueueResumed(ctx, tx, out)
	}
	if err != nil {
		return nil, fmt.Errorf("locking thread %d: %w", out.ThreadID, err)
	}
	run := newStepRun(e, tx, def, out)
	run.thread = holds(thread)
	if run.varsErr == nil {
		if _, err := e.takeSteered(ctx, tx, out, run.vars); err != nil {
			return nil, err
		}
	}
	if err := run.advance(ctx, nil); err != nil {
		return nil, err
	}
	observed := run.events.after
	afterCommit(tx, func() { observed.report(e.metrics) })
	if run.last != nil {
		return run.last, nil
	}
	return out, nil
}

// enqueueResumed enqueues the step of a resumed execution that keeps
// running; one that went pending waits for admission.
func (e *Engine) enqueueResumed(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution) error {
	if row.Status != StatusRunning {
		return nil
	}
	if err := e.jobs.InsertStep(ctx, tx, row.ID, row.StepSeq, riverPriority(int(row.Priority))); err != nil {
		return fmt.Errorf("enqueueing step after resume: %w", err)
	}
	return nil
}

// resume moves a waiting execution to running, or to pending when its lane
// or session is full, and returns it with its definition.
func (e *Engine) resume(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution, spec resumeSpec) (*dbsqlc.AgentExecution, *workflow.Definition, error) {
	def, err := e.definitionByKey(ctx, tx, row.TenantID, row.WorkflowID, row.Version)
	if err != nil {
		return nil, nil, err
	}
	waitNode := def.Node(deref(row.CurrentNodeID))
	if waitNode == nil {
		return nil, nil, fmt.Errorf("resuming execution %s: wait node %q is not in the definition", row.ExecutionID, deref(row.CurrentNodeID))
	}
	vars := spec.vars
	if vars == nil {
		if vars, err = decodeVariables(row.Variables); err != nil {
			return nil, nil, fmt.Errorf("resuming execution %s: %w", row.ExecutionID, err)
		}
	}
	vars["timedOut"] = spec.timedOut
	var eventData []byte
	if spec.eventData != nil {
		eventData = mustJSON(spec.eventData)
	}
	next := waitNode.Next
	out, err := e.q.ExecutionResume(ctx, tx, &dbsqlc.ExecutionResumeParams{
		ID: row.ID, WaitSeq: row.WaitSeq, CurrentNodeID: next, Variables: mustJSON(vars),
		TotalSteps: row.StepsCompleted + int32(def.Remaining(next)), EventData: eventData,
	})
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil, e.lostTransition(ctx, tx, row.ID, "resume")
		}
		return nil, nil, fmt.Errorf("resuming execution: %w", err)
	}
	events := spec.events
	if events == nil {
		events = &eventLog{tenantID: row.TenantID, executionID: row.ID}
	}
	msg := fmt.Sprintf("Resuming execution %s", row.ExecutionID)
	events.add(EventResumed, "info", waitNode.ID, msg, map[string]any{
		"cause": spec.cause, "waiting_for": deref(row.WaitingFor), "wait_seq": row.WaitSeq,
		"timed_out": spec.timedOut, "next_node": nilIfEmpty(next),
	})
	if err := events.write(ctx, e.q, tx); err != nil {
		return nil, nil, err
	}
	// Back through admission, ahead of new work (engine/lane.go).
	if out, err = e.admitResumed(ctx, tx, out); err != nil {
		return nil, nil, err
	}
	if err := e.enqueueStatus(ctx, tx, out); err != nil {
		return nil, nil, err
	}
	attrs := []any{"execution_id", row.ExecutionID, "tenant_id", row.TenantID, "thread_id", row.ThreadID, "correlation_id", row.CorrelationID}
	e.InfoContext(ctx, msg, append(attrs, "cause", spec.cause, "waiting_for", deref(row.WaitingFor))...)
	e.DebugContext(ctx, fmt.Sprintf("Updating state: shouldWait=false, lastResponse=%q", workflow.RenderText(vars["lastResponse"])), attrs...)
	e.InfoContext(ctx, "Continuing from checkpoint", append(attrs, "node_id", next, "step_seq", out.StepSeq)...)
	return out, def, nil
}

// InputParams answer an execution's input request (POST …/input).
type InputParams struct {
	// TenantID owns the execution.
	TenantID string
	// ExecutionID is the execution's external id.
	ExecutionID string
	// NodeID, when set, must be the request_input node the execution waits
	// at.
	NodeID string
	// InputRequestID, when set, must be the request_id of the input request
	// the execution waits on (workflow.input_request): an answer to an
	// earlier request is refused.
	InputRequestID string
	// Input becomes variables.
	Input map[string]any
}

// ProvideInputTx resumes an execution waiting for input, in tx: the input's
// fields become variables (and the whole input the variable "input"). An
// execution not waiting for input there, or for another input request than
// p.InputRequestID, is a *ConflictError with code
// workflow.input.not_waiting, and nothing changes.
func (e *Engine) ProvideInputTx(ctx context.Context, tx pgx.Tx, p InputParams) (*Execution, error) {
	row, err := e.q.ExecutionLockByExecutionID(ctx, tx, &dbsqlc.ExecutionLockByExecutionIDParams{TenantID: p.TenantID, ExecutionID: p.ExecutionID})
	if err != nil {
		return nil, notFound(err)
	}
	if row.Status != StatusWaiting || deref(row.WaitingFor) != "input" {
		return nil, &ConflictError{Code: "workflow.input.not_waiting",
			Message: fmt.Sprintf("execution %s is %s%s, not waiting for input", row.ExecutionID, row.Status, waitingSuffix(row))}
	}
	if p.NodeID != "" && p.NodeID != deref(row.CurrentNodeID) {
		return nil, &ConflictError{Code: "workflow.input.not_waiting",
			Message: fmt.Sprintf("execution %s waits for input at node %s, not %s", row.ExecutionID, deref(row.CurrentNodeID), p.NodeID)}
	}
	if err := checkInputRequestID(row, p.InputRequestID); err != nil {
		return nil, err
	}
	vars, err := decodeVariables(row.Variables)
	if err != nil {
		return nil, fmt.Errorf("providing input to execution %s: %w", row.ExecutionID, err)
	}
	for k, v := range p.Input {
		vars[k] = v
	}
	vars["input"] = orEmpty(p.Input)
	if _, err := e.resumeNow(ctx, tx, row, resumeSpec{vars: vars, eventData: orEmpty(p.Input), cause: "INPUT"}); err != nil {
		return nil, err
	}
	return e.GetExecution(ctx, tx, p.TenantID, p.ExecutionID)
}

// checkInputRequestID refuses an answer that names another input request
// than the one the execution waits on; an empty id names none.
func checkInputRequestID(row *dbsqlc.AgentExecution, id string) error {
	if id == "" {
		return nil
	}
	var waiting struct {
		RequestID string `json:"request_id"`
	}
	if err := jsonUnmarshal(row.WaitingData, &waiting); err != nil {
		return fmt.Errorf("execution %s: waiting_data is not valid JSON: %w", row.ExecutionID, err)
	}
	if waiting.RequestID != id {
		return &ConflictError{Code: "workflow.input.not_waiting",
			Message: fmt.Sprintf("execution %s waits on input request %q, not %q", row.ExecutionID, waiting.RequestID, id)}
	}
	return nil
}

func waitingSuffix(row *dbsqlc.AgentExecution) string {
	if row.Status == StatusWaiting {
		return " (waiting for " + deref(row.WaitingFor) + ")"
	}
	return ""
}
