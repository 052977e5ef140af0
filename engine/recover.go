package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// Panics in steps.
//
// A step that panics — in a Go tool, in its transaction, in encoding an
// event — must not leave its execution running: River would retry the job,
// each attempt would panic again, and the execution would keep its lane
// slot and thread lock until the job ran out of attempts, and then some.
// RunStepAttempt defers recoverStep, which logs the panic with its stack at
// error level and fails the execution at the node it was at
// (workflow.execute.step_failed, "step panicked: <value>") in one
// transaction that also does what every terminal transition does
// (finalize: the lane slot, the thread lock, a parent waiting for it) and
// completes the step job. The step's own transaction, if the panic came
// from inside it, has rolled back by then (withTx's deferred rollback).

// recoverStep is deferred by RunStepAttempt: when the step panicked, it
// fails the execution (failPanicked) and sets *errp to what that returns.
func (e *Engine) recoverStep(ctx context.Context, executionID, stepSeq int64, complete CompleteFunc, errp *error) {
	p := recover()
	if p == nil {
		return
	}
	*errp = e.failPanicked(ctx, executionID, stepSeq, p, debug.Stack(), complete)
}

// failPanicked fails the execution whose step job, expecting the checkpoint
// stepSeq, panicked with p: it logs the panic and stack at error level and
// fails the execution with CodeStepFailed in one transaction, through
// finalize, in which complete completes the step job. It returns nil when
// the execution is failed, or when it has moved on since (nothing of that
// step is left to fail), and an error that names the panic when failing it
// did not commit, so that the job runs again.
func (e *Engine) failPanicked(ctx context.Context, executionID, stepSeq int64, p any, stack []byte, complete CompleteFunc) error {
	msg := fmt.Sprintf("step panicked: %v", p)
	e.ErrorContext(ctx, msg, "execution_row_id", executionID, "step_seq", stepSeq, "panic", fmt.Sprint(p), "stack", string(stack))
	ctx = context.WithoutCancel(ctx) // the panic is recorded even when the worker is stopping
	var events *eventLog
	err := e.WithTx(ctx, func(tx pgx.Tx) error {
		cur, err := e.q.ExecutionGetByID(ctx, tx, executionID)
		if err != nil {
			return notFound(err)
		}
		if events, err = e.failTx(ctx, tx, cur, stepSeq, CodeStepFailed, msg); err != nil {
			return err
		}
		return complete(ctx, tx)
	})
	switch {
	case err == nil:
		events.after.report(e.metrics)
		return nil
	case IsTransitionError(err), errors.Is(err, ErrNotFound):
		return nil
	}
	return fmt.Errorf("%s (and failing the execution: %w)", msg, err)
}

// failTx fails a live execution from outside its step, in tx, as Fail does:
// its thread row first, then the compare-and-swap (only at checkpoint
// stepSeq when it is not zero), then finalize, which frees its lane slot,
// releases its thread lock and resumes a parent waiting for it. The
// execution fails at its current node. A terminal or moved-on execution is
// a *TransitionError. The caller reports the returned events' observations
// once tx has committed.
func (e *Engine) failTx(ctx context.Context, tx pgx.Tx, cur *dbsqlc.AgentExecution, stepSeq int64, code, message string) (*eventLog, error) {
	if _, err := e.lockThread(ctx, tx, cur.ThreadID); err != nil {
		return nil, err
	}
	var seq *int64
	if stepSeq > 0 {
		seq = &stepSeq
	}
	row, err := e.q.ExecutionFail(ctx, tx, &dbsqlc.ExecutionFailParams{ID: cur.ID, ErrorCode: code, ErrorMessage: message, StepSeq: seq})
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, e.lostTransition(ctx, tx, cur.ID, "fail")
		}
		return nil, fmt.Errorf("failing execution %s: %w", cur.ExecutionID, err)
	}
	e.WarnContext(ctx, "step failed", "execution_id", row.ExecutionID, "tenant_id", row.TenantID, "thread_id", row.ThreadID,
		"correlation_id", row.CorrelationID, "node_id", deref(row.FailedNodeID), "error_code", code, "error", message)
	events := &eventLog{tenantID: row.TenantID, executionID: row.ID}
	return events, e.finalize(ctx, tx, row, events, finish{freed: true})
}
