package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/batonrun/baton/engine"
)

// StepTimeout bounds one step job. Tool calls are bounded by their own
// timeouts, which must stay under it.
const StepTimeout = 60 * time.Second

// StepWorker runs execution.step jobs.
type StepWorker struct {
	river.WorkerDefaults[StepArgs]
	Engine *engine.Engine
}

// Timeout bounds a step job.
func (w *StepWorker) Timeout(*river.Job[StepArgs]) time.Duration { return StepTimeout }

// NextRetry retries a failed step almost at once: a step is idempotent
// through its checkpoint's step_seq.
func (w *StepWorker) NextRetry(job *river.Job[StepArgs]) time.Time {
	return time.Now().Add(time.Duration(job.Attempt) * 100 * time.Millisecond)
}

// Work advances the execution and completes the job in the step's
// transaction. A step that must wait for a tool retry or an open breaker is
// snoozed. When the last attempt fails, the execution fails with it (a
// panic fails it at once: engine/recover.go).
func (w *StepWorker) Work(ctx context.Context, job *river.Job[StepArgs]) error {
	err := w.Engine.RunStepAttempt(ctx, job.Args.ExecutionID, job.Args.StepSeq, job.Attempt, func(ctx context.Context, tx pgx.Tx) error {
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
	var snooze *engine.SnoozeError
	if errors.As(err, &snooze) {
		// A tool retry's backoff or an open breaker: run again later with
		// the same checkpoint, spending no attempt.
		return river.JobSnooze(snooze.Delay)
	}
	return failOnLastAttempt(ctx, w.Engine, job.JobRow, job.Args.ExecutionID, job.Args.StepSeq, "step", err)
}

// outageSnooze is how long a job's last attempt waits when it met a
// database outage.
const outageSnooze = 5 * time.Second

// failOnLastAttempt fails the execution when the last attempt of a job that
// moves it (what: "step", "wait timeout") failed with err, so that it is
// not left with nothing to move it; stepSeq 0 fails it at any checkpoint.
// It returns err. A last attempt that met a database outage is snoozed
// instead: the outage, not the execution, is at fault, and failing it would
// need the database too.
func failOnLastAttempt(ctx context.Context, e *engine.Engine, job *rivertype.JobRow, executionID, stepSeq int64, what string, err error) error {
	if err == nil || job.Attempt < job.MaxAttempts {
		return err
	}
	if engine.IsUnavailable(err) {
		return river.JobSnooze(outageSnooze)
	}
	msg := fmt.Sprintf("%s failed after %d attempts: %v", what, job.Attempt, err)
	if ferr := e.Fail(context.WithoutCancel(ctx), executionID, stepSeq, engine.CodeStepFailed, msg); ferr != nil && !engine.IsTransitionError(ferr) {
		return fmt.Errorf("%w (and failing the execution: %v)", err, ferr)
	}
	return err
}

// DeliverWorker runs message.deliver jobs.
type DeliverWorker struct {
	river.WorkerDefaults[DeliverArgs]
	Engine *engine.Engine
}

// Timeout bounds one delivery round of a thread.
func (w *DeliverWorker) Timeout(*river.Job[DeliverArgs]) time.Duration { return 60 * time.Second }

// NextRetry backs off exponentially from a quarter second, capped at five
// minutes.
func (w *DeliverWorker) NextRetry(job *river.Job[DeliverArgs]) time.Time {
	d := 250 * time.Millisecond << min(max(job.Attempt-1, 0), 12)
	return time.Now().Add(min(d, 5*time.Minute))
}

// outboxBusySnooze is how long a delivery job that found its thread's outbox
// held by another deliverer waits before it looks again.
const outboxBusySnooze = time.Second

// Work delivers the thread's pending messages in order. When another
// deliverer holds the thread, the job snoozes (River does not count it as
// an attempt) rather than ending while messages are pending.
func (w *DeliverWorker) Work(ctx context.Context, job *river.Job[DeliverArgs]) error {
	err := w.Engine.DeliverThread(ctx, job.Args.ThreadID)
	if errors.Is(err, engine.ErrOutboxBusy) {
		return river.JobSnooze(outboxBusySnooze)
	}
	return err
}

// DrainWorker runs thread.drain jobs.
type DrainWorker struct {
	river.WorkerDefaults[DrainArgs]
	Engine *engine.Engine
}

// NextRetry retries a failed drain soon: it is idempotent under the thread
// row lock.
func (w *DrainWorker) NextRetry(job *river.Job[DrainArgs]) time.Time {
	return time.Now().Add(time.Duration(job.Attempt) * 200 * time.Millisecond)
}

// Work drains the thread and completes the job in the drain's transaction.
func (w *DrainWorker) Work(ctx context.Context, job *river.Job[DrainArgs]) error {
	return w.Engine.DrainThread(ctx, job.Args.ThreadID, func(ctx context.Context, tx pgx.Tx) error {
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

// StepReapWorker runs the periodic execution.step_reap job.
type StepReapWorker struct {
	river.WorkerDefaults[StepReapArgs]
	Engine *engine.Engine
}

// Work enqueues lost step jobs again and fails the executions that lost
// theirs too often.
func (w *StepReapWorker) Work(ctx context.Context, _ *river.Job[StepReapArgs]) error {
	_, err := w.Engine.ReapSteps(ctx)
	return err
}

// DeliverReapWorker runs the periodic message.deliver_reap job.
type DeliverReapWorker struct {
	river.WorkerDefaults[DeliverReapArgs]
	Engine *engine.Engine
}

// Work enqueues the delivery of messages left pending without a deliverer.
func (w *DeliverReapWorker) Work(ctx context.Context, _ *river.Job[DeliverReapArgs]) error {
	_, err := w.Engine.ReapOutboxes(ctx)
	return err
}

// LockReapWorker runs the periodic thread.lock_reap job.
type LockReapWorker struct {
	river.WorkerDefaults[LockReapArgs]
	Engine *engine.Engine
}

// Work clears stale locks and wakes the drains that need it.
func (w *LockReapWorker) Work(ctx context.Context, _ *river.Job[LockReapArgs]) error {
	_, err := w.Engine.ReapLocks(ctx)
	return err
}

// WaitTimeoutWorker runs execution.wait_timeout jobs.
type WaitTimeoutWorker struct {
	river.WorkerDefaults[WaitTimeoutArgs]
	Engine *engine.Engine
}

// NextRetry retries a failed timeout almost at once: it is idempotent
// through the execution's wait_seq.
func (w *WaitTimeoutWorker) NextRetry(job *river.Job[WaitTimeoutArgs]) time.Time {
	return time.Now().Add(time.Duration(job.Attempt) * 100 * time.Millisecond)
}

// Work applies the wait's timeout policy and completes the job in the same
// transaction; a job of a wait that is over does nothing. On its last
// attempt, a timeout that keeps failing fails the execution rather than
// leave it waiting for a timeout that will never come.
func (w *WaitTimeoutWorker) Work(ctx context.Context, job *river.Job[WaitTimeoutArgs]) error {
	err := w.Engine.HandleWaitTimeout(ctx, job.Args.ExecutionID, job.Args.WaitSeq, func(ctx context.Context, tx pgx.Tx) error {
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
	return failOnLastAttempt(ctx, w.Engine, job.JobRow, job.Args.ExecutionID, 0, "the wait's timeout", err)
}

// CallbackWorker runs workflow.callback jobs.
type CallbackWorker struct {
	river.WorkerDefaults[CallbackArgs]
	Engine *engine.Engine
}

// Timeout bounds one delivery attempt.
func (w *CallbackWorker) Timeout(*river.Job[CallbackArgs]) time.Duration { return 30 * time.Second }

// NextRetry backs off exponentially from one second, capped at ten minutes.
func (w *CallbackWorker) NextRetry(job *river.Job[CallbackArgs]) time.Time {
	d := time.Second << min(job.Attempt-1, 10)
	return time.Now().Add(min(d, 10*time.Minute))
}

// Work posts the result; a refusal that retrying cannot fix cancels the job.
func (w *CallbackWorker) Work(ctx context.Context, job *river.Job[CallbackArgs]) error {
	err := w.Engine.SendCallback(ctx, engine.CallbackJob{ExecutionID: job.Args.ExecutionID, MessageID: job.Args.MessageID,
		InputRequestWaitSeq: job.Args.InputRequestWaitSeq, Event: job.Args.Event, Payload: job.Args.Payload})
	if errors.Is(err, engine.ErrCallbackRefused) {
		return river.JobCancel(err)
	}
	return err
}
