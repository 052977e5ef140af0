package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// The step reaper re-enqueues a step for any running execution with no live
// step job (docs/architecture.md, "How an execution moves").
//
// A running execution moves only through its execution.step job. Every
// transition that makes an execution running enqueues that job in its own
// transaction, so a running execution without one means the job was lost:
// deleted by hand, or discarded by River without its execution failing.
// ReapSteps, run periodically on River's leader (jobs' execution.step_reap),
// finds running executions unchanged for Config.StepRescueAfter with no job
// of kind execution.step waiting or running for them, and, for each, in one
// transaction: takes its thread row, then its row at the checkpoint it was
// listed with (ExecutionLockForStep), and, if still no step job is live,
// bumps its step_seq (so that only the new job may advance it), counts the
// recovery in step_recoveries, enqueues the step and writes a
// workflow.step_recovered event. An execution whose step job is lost again
// after Config.MaxStepRecoveries recoveries is failed instead
// (workflow.execute.step_failed), through finalize, which frees its lane
// slot, releases its thread lock and resumes a parent waiting for it.

// EventStepRecovered is written when the step reaper enqueues the lost step
// job of a running execution again.
const EventStepRecovered = "workflow.step_recovered"

// stepReapBatch bounds how many executions one ReapSteps handles; the next
// run takes the rest.
const stepReapBatch = 100

// StepReap is what one ReapSteps did.
type StepReap struct {
	// Recovered are the executions whose step was enqueued again.
	Recovered int
	// Failed are the executions failed for having lost their step job more
	// than MaxStepRecoveries times.
	Failed int
}

// ReapSteps enqueues the lost step of every stranded running execution, or
// fails it when it has been recovered MaxStepRecoveries times already. An
// execution it could not handle does not stop the others; their errors are
// returned together.
func (e *Engine) ReapSteps(ctx context.Context) (StepReap, error) {
	var out StepReap
	rows, err := e.q.ExecutionListStranded(ctx, e.pool, &dbsqlc.ExecutionListStrandedParams{
		IdleSeconds: e.cfg.StepRescueAfter.Seconds(), Max: stepReapBatch,
	})
	if err != nil {
		return out, fmt.Errorf("listing stranded executions: %w", err)
	}
	var errs []error
	for _, r := range rows {
		recovered, failed, err := e.rescueStep(ctx, r)
		if err != nil {
			errs = append(errs, fmt.Errorf("rescuing the step of execution %d: %w", r.ID, err))
			continue
		}
		if recovered {
			out.Recovered++
		}
		if failed {
			out.Failed++
		}
	}
	return out, errors.Join(errs...)
}

// rescueStep handles one listed execution in a transaction of its own.
func (e *Engine) rescueStep(ctx context.Context, r *dbsqlc.ExecutionListStrandedRow) (recovered, failed bool, err error) {
	var events *eventLog
	err = e.WithTx(ctx, func(tx pgx.Tx) error {
		events, recovered, failed = nil, false, false // WithTx may run this again
		// The thread first, then the execution, in lock order.
		if _, err := e.lockThread(ctx, tx, r.ThreadID); err != nil {
			return err
		}
		row, err := e.q.ExecutionLockForStep(ctx, tx, &dbsqlc.ExecutionLockForStepParams{ID: r.ID, StepSeq: r.StepSeq})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // it moved on since it was listed
		}
		if err != nil {
			return fmt.Errorf("locking execution %d: %w", r.ID, err)
		}
		// Under the row lock, this sees every job committed with the row.
		live, err := e.q.ExecutionHasLiveStep(ctx, tx, row.ID)
		if err != nil {
			return fmt.Errorf("looking for the step job of execution %s: %w", row.ExecutionID, err)
		}
		if live {
			return nil
		}
		node := deref(row.CurrentNodeID)
		if int(row.StepRecoveries) >= e.cfg.MaxStepRecoveries {
			msg := fmt.Sprintf("the step job of node %s was lost again after %d recoveries; the step reaper gives up after %d (MaxStepRecoveries)",
				node, row.StepRecoveries, e.cfg.MaxStepRecoveries)
			events, err = e.failTx(ctx, tx, row, row.StepSeq, CodeStepFailed, msg)
			failed = err == nil
			return err
		}
		out, err := e.q.ExecutionMarkRecovered(ctx, tx, &dbsqlc.ExecutionMarkRecoveredParams{ID: row.ID, StepSeq: row.StepSeq})
		if err != nil {
			return fmt.Errorf("recording the recovery of execution %s: %w", row.ExecutionID, err)
		}
		if err := e.jobs.InsertStep(ctx, tx, out.ID, out.StepSeq, riverPriority(int(out.Priority))); err != nil {
			return fmt.Errorf("enqueueing the step of execution %s again: %w", out.ExecutionID, err)
		}
		msg := fmt.Sprintf("Step job of node %s was lost; enqueued it again (recovery %d of %d)", node, out.StepRecoveries, e.cfg.MaxStepRecoveries)
		events = &eventLog{tenantID: out.TenantID, executionID: out.ID}
		events.add(EventStepRecovered, "warn", node, msg, map[string]any{
			"step_id": node, "step_seq": out.StepSeq, "recoveries": out.StepRecoveries, "max_recoveries": e.cfg.MaxStepRecoveries,
		})
		if err := events.write(ctx, e.q, tx); err != nil {
			return err
		}
		e.WarnContext(ctx, msg, "execution_id", out.ExecutionID, "tenant_id", out.TenantID, "node_id", node,
			"step_seq", out.StepSeq, "recoveries", out.StepRecoveries, "correlation_id", out.CorrelationID)
		recovered = true
		return nil
	})
	if err != nil {
		return false, false, err
	}
	if events != nil {
		events.after.report(e.metrics)
	}
	return recovered, failed, nil
}
