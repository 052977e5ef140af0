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
	r, err := e.resume(ctx, tx, row, spec)
	if err != nil {
		return nil, err
	}
	out, err := e.admitResumedRun(ctx, tx, r.row)
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
// When, besides, its lane is global and has room and no queue, and the run
// has no session, they run without a slot, as a settling start's do
// (engine/lane.go, "Runs that never hold a slot"): the run is never seen
// running outside this transaction, so it takes no lane row and frees no
// slot.
func (e *Engine) resumeNow(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution, spec resumeSpec) (*dbsqlc.AgentExecution, error) {
	r, err := e.resume(ctx, tx, row, spec)
	if err != nil {
		return nil, err
	}
	out := r.row
	if !r.room {
		if out, err = e.admitResumedRun(ctx, tx, out); err != nil {
			return nil, err
		}
		if out.Status != StatusRunning || !r.def.StepSettlesFrom(deref(out.CurrentNodeID), e.cfg.MaxNodesPerStep) {
			return out, e.enqueueResumed(ctx, tx, out)
		}
	}
	thread, err := e.tryThread(ctx, tx, out.ThreadID)
	if err != nil {
		return nil, err
	}
	if thread == nil {
		// Another transaction holds the thread: the run goes on in a job,
		// and holds a slot until then.
		if r.room {
			if out, err = e.admitResumedRun(ctx, tx, out); err != nil {
				return nil, err
			}
		}
		return out, e.enqueueResumed(ctx, tx, out)
	}
	run := newStepRun(e, tx, r.def, out)
	run.thread, run.messageID = holds(thread), r.messageID
	if r.room {
		if err := run.goSlotless(ctx); err != nil {
			return nil, err
		}
	}
	if out, err = run.continueResumed(ctx); err != nil {
		return nil, err
	}
	return out, run.writePrivateLock(ctx)
}

// goSlotless makes a resumed run, whose transaction holds its thread row,
// go on without a slot: it is never seen running outside the transaction.
// Its thread's lock lives in memory when it is free and nothing is queued
// on the thread (lockIsPrivate), as a settling start's does.
func (r *stepRun) goSlotless(ctx context.Context) error {
	if err := r.e.enqueueStatus(ctx, r.tx, r.row); err != nil {
		return err
	}
	r.slotless = true
	var err error
	r.thread.private, err = r.e.lockIsPrivate(ctx, r.tx, r.thread.Thread, false)
	return err
}

// tryThread takes the thread row if no other transaction holds it, and
// returns nil if one does. The caller holds an execution row, so the thread
// row may only be tried (lock order: threads before executions).
func (e *Engine) tryThread(ctx context.Context, tx pgx.Tx, threadID int64) (*dbsqlc.Thread, error) {
	thread, err := e.q.ThreadTryLock(ctx, tx, threadID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("locking thread %d: %w", threadID, err)
	}
	return thread, nil
}

// continueResumed runs a resumed run's next nodes in its transaction, which
// holds its thread row, and returns its row as they leave it.
func (r *stepRun) continueResumed(ctx context.Context) (*dbsqlc.AgentExecution, error) {
	if r.varsErr == nil {
		if _, err := r.e.takeSteered(ctx, r.tx, r.row, r.vars); err != nil {
			return nil, err
		}
	}
	if err := r.advance(ctx, nil); err != nil {
		return nil, err
	}
	observed, metrics := r.events.after, r.e.metrics
	afterCommit(r.tx, func() { observed.report(metrics) })
	if r.last != nil {
		return r.last, nil
	}
	return r.row, nil
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

// admitResumedRun puts a resumed run through admission (admitResumed) and
// reports the status it leaves it in.
func (e *Engine) admitResumedRun(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution) (*dbsqlc.AgentExecution, error) {
	out, err := e.admitResumed(ctx, tx, row)
	if err != nil {
		return nil, err
	}
	return out, e.enqueueStatus(ctx, tx, out)
}

// resumed is a run resume moved from waiting to running, before
// admission.
type resumed struct {
	row *dbsqlc.AgentExecution
	def *workflow.Definition
	// room says the run may go on without a slot (resumeNow): its next
	// nodes settle, it has no session, and its global lane had room and no
	// queue when its row was written (ExecutionResume).
	room bool
	// messageID, when not 0, is an id drawn for the first message its next
	// nodes send (stepRun.messageID).
	messageID int64
}

// resume moves a waiting execution to running at its wait node's next node,
// with the workflow.resumed event.
func (e *Engine) resume(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution, spec resumeSpec) (*resumed, error) {
	def, err := e.definitionByKey(ctx, tx, row.TenantID, row.WorkflowID, row.Version)
	if err != nil {
		return nil, err
	}
	waitNode := def.Node(deref(row.CurrentNodeID))
	if waitNode == nil {
		return nil, fmt.Errorf("resuming execution %s: wait node %q is not in the definition", row.ExecutionID, deref(row.CurrentNodeID))
	}
	vars := spec.vars
	if vars == nil {
		if vars, err = decodeVariables(row.Variables); err != nil {
			return nil, fmt.Errorf("resuming execution %s: %w", row.ExecutionID, err)
		}
	}
	vars["timedOut"] = spec.timedOut
	var eventData []byte
	if spec.eventData != nil {
		eventData = mustJSON(spec.eventData)
	}
	next := waitNode.Next
	params := &dbsqlc.ExecutionResumeParams{
		ID: row.ID, WaitSeq: row.WaitSeq, CurrentNodeID: next, Variables: mustJSON(vars),
		TotalSteps: row.StepsCompleted + int32(def.Remaining(next)), EventData: eventData,
	}
	if def.StepSettlesFrom(next, e.cfg.MaxNodesPerStep) {
		params.DrawMessage = def.SendsMessages()
		if row.SessionKey == nil && e.isGlobalLane(row.Lane) {
			params.LaneLimit = int32(e.laneLimit(row.Lane))
		}
	}
	moved, err := e.q.ExecutionResume(ctx, tx, params)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, e.lostTransition(ctx, tx, row.ID, "resume")
		}
		return nil, fmt.Errorf("resuming execution: %w", err)
	}
	out := &moved.AgentExecution
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
		return nil, err
	}
	attrs := []any{"execution_id", row.ExecutionID, "tenant_id", row.TenantID, "thread_id", row.ThreadID, "correlation_id", row.CorrelationID}
	e.InfoContext(ctx, msg, append(attrs, "cause", spec.cause, "waiting_for", deref(row.WaitingFor))...)
	e.DebugContext(ctx, "Updating state: shouldWait=false, lastResponse="+withheld(vars["lastResponse"]), attrs...)
	e.InfoContext(ctx, "Continuing from checkpoint", append(attrs, "node_id", next, "step_seq", out.StepSeq)...)
	return &resumed{row: out, def: def, room: moved.Room, messageID: moved.MessageID}, nil
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
