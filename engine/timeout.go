package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine/workflow"
)

// HandleWaitTimeout fires the timeout of an execution's wait number
// waitSeq, in one transaction that also runs complete: a delay continues
// (SCHEDULE_REACHED); any other wait runs its timeoutActions and then its
// onTimeout policy — continue, retry (wait again, up to maxRetries) or fail
// (terminal timeout; the default). When the execution no longer waits in
// that wait (it resumed, retried or ended), nothing changes and the job
// completes.
func (e *Engine) HandleWaitTimeout(ctx context.Context, executionID int64, waitSeq int32, complete CompleteFunc) error {
	snap, err := e.q.ExecutionGetByID(ctx, e.pool, executionID)
	if err != nil {
		if errors.Is(notFound(err), ErrNotFound) {
			return nil
		}
		return fmt.Errorf("reading execution %d: %w", executionID, err)
	}
	return e.WithTx(ctx, func(tx pgx.Tx) error {
		// The thread first, then the execution, in lock order:
		// timeout actions may talk on the thread and a timeout may finalize.
		thread, err := e.lockThread(ctx, tx, snap.ThreadID)
		if err != nil {
			return err
		}
		row, err := e.q.ExecutionLockWaiting(ctx, tx, &dbsqlc.ExecutionLockWaitingParams{ID: executionID, WaitSeq: waitSeq})
		if errors.Is(err, pgx.ErrNoRows) {
			e.DebugContext(ctx, "stale wait timeout", "execution_row_id", executionID, "wait_seq", waitSeq)
			return complete(ctx, tx)
		}
		if err != nil {
			return fmt.Errorf("locking execution %d for its timeout: %w", executionID, err)
		}
		if err := e.timeoutLocked(ctx, tx, thread, row); err != nil {
			return err
		}
		// A parent whose agent wait timed out cancels the child, after its
		// own timeout policy has moved it on.
		if err := e.cancelWaitedChild(ctx, tx, row, fmt.Sprintf("the agent wait of parent execution %s timed out", row.ExecutionID)); err != nil {
			return err
		}
		return complete(ctx, tx)
	})
}

// timeoutLocked applies a wait's timeout to a locked waiting execution.
func (e *Engine) timeoutLocked(ctx context.Context, tx pgx.Tx, thread *dbsqlc.Thread, row *dbsqlc.AgentExecution) error {
	def, err := e.definitionByKey(ctx, tx, row.TenantID, row.WorkflowID, row.Version)
	if err != nil {
		return err
	}
	node := def.Node(deref(row.CurrentNodeID))
	if node == nil {
		return fmt.Errorf("timing out execution %s: wait node %q is not in the definition", row.ExecutionID, deref(row.CurrentNodeID))
	}
	waitingFor := deref(row.WaitingFor)
	if node.ActionType == workflow.ActionDelay {
		_, err := e.resumeNow(ctx, tx, row, resumeSpec{cause: "SCHEDULE_REACHED"})
		return err
	}
	run := newStepRun(e, tx, def, row)
	if run.varsErr != nil {
		return fmt.Errorf("timing out execution %s: %w", row.ExecutionID, run.varsErr)
	}
	run.thread = holds(thread)
	run.events.add(EventWaitTimeout, "warn", node.ID, fmt.Sprintf("Wait for %s timed out at node %s", waitingFor, node.ID),
		map[string]any{"waiting_for": waitingFor, "waiting_until": row.WaitingUntil, "wait_seq": row.WaitSeq})
	actions, _ := node.Parameters["timeoutActions"].([]any)
	for i, item := range actions {
		obj, _ := item.(map[string]any)
		at, _ := obj["actionType"].(string)
		params, _ := obj["parameters"].(map[string]any)
		action := &workflow.Node{ID: fmt.Sprintf("%s:timeout:%d", node.ID, i), Type: workflow.NodeAction, ActionType: at, Parameters: params}
		failure, err := run.runAction(ctx, action, &stepUpdate{}) // no step event: the payload is dropped
		if err != nil {
			return fmt.Errorf("running timeout action %d of node %s: %w", i, node.ID, err)
		}
		if failure != nil {
			run.events.add(EventTemplateWarning, "warn", node.ID, "timeout action skipped: "+failure.message, map[string]any{"index": i})
		}
	}
	if _, tooLarge := run.variables(node.ID); tooLarge != nil {
		// What the actions set is dropped; the timeout policy still runs.
		run.events.add(EventTemplateWarning, "warn", node.ID, "timeout actions' variables dropped: "+tooLarge.message, nil)
		run.vars, _ = decodeVariables(row.Variables) // newStepRun decoded them
	}
	in := run.interpolation()
	params, _ := in.Value(orEmpty(node.Parameters)).(map[string]any)
	policy, _ := params["onTimeout"].(string)
	switch policy {
	case OnTimeoutContinue:
		if node.ActionType == workflow.ActionRequestInput {
			// The defaults become the input (the node's "default" parameter).
			defaults, _ := params["default"].(map[string]any)
			for k, v := range defaults {
				run.vars[k] = v
			}
			run.vars["input"] = orEmpty(defaults)
		}
		_, err := e.resumeLocked(ctx, tx, row, resumeSpec{vars: run.vars, cause: "TIMEOUT", timedOut: true, events: run.events})
		return err
	case OnTimeoutRetry:
		retried, err := e.retryWait(ctx, tx, row, node, params, run)
		if retried || err != nil {
			return err
		}
	}
	summary := timeoutSummary(waitingFor)
	out, err := e.q.ExecutionEndWait(ctx, tx, &dbsqlc.ExecutionEndWaitParams{
		ID: row.ID, WaitSeq: row.WaitSeq, Status: StatusTimeout, Variables: mustJSON(run.vars),
		ResultType: "timeout", ResultSummary: &summary,
	})
	if err != nil {
		return fmt.Errorf("ending execution on timeout: %w", err)
	}
	return e.finalize(ctx, tx, out, run.events, finish{freed: true})
}

// retryWait makes a waiting execution whose wait timed out with onTimeout
// retry wait again, with a new timeout job, while it has retries left
// (maxRetries, default 3, 2 for request_input), and reports whether it
// did.
func (e *Engine) retryWait(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution, node *workflow.Node, params map[string]any, run *stepRun) (bool, error) {
	wd := map[string]any{}
	if err := jsonUnmarshal(row.WaitingData, &wd); err != nil {
		return false, fmt.Errorf("timing out execution %s: waiting_data is not valid JSON: %w", row.ExecutionID, err)
	}
	retries, _ := wd["retries"].(float64)
	maxRetries := defaultMaxRetries
	if node.ActionType == workflow.ActionRequestInput {
		maxRetries = defaultInputMaxRetries
	}
	if m, ok := params["maxRetries"].(float64); ok {
		maxRetries = int(m)
	}
	if int(retries) >= maxRetries {
		e.InfoContext(ctx, fmt.Sprintf("Execution %s ran out of wait retries (%d)", row.ExecutionID, maxRetries), run.logAttrs()...)
		return false, nil
	}
	d, err := workflow.ParseDuration(workflow.RenderText(wd["timeout"]))
	if err != nil || d <= 0 {
		kind, _ := workflow.WaitKindOf(node.ActionType)
		d = kind.Default
	}
	wd["retries"] = int(retries) + 1
	until := time.Now().Add(d)
	timer, err := e.armTimeout(ctx, tx, row, until)
	if err != nil {
		return false, err
	}
	next, err := e.q.ExecutionRewait(ctx, tx, &dbsqlc.ExecutionRewaitParams{
		ID: row.ID, WaitSeq: row.WaitSeq, WaitingUntil: until,
		WaitingData: mustJSON(wd), Variables: mustJSON(run.vars), WaitTimeoutJobID: timer,
	})
	if err != nil {
		return false, fmt.Errorf("retrying wait: %w", err)
	}
	return true, e.startWait(ctx, tx, next, wd, run.events, append(run.logAttrs(), "retry", int(retries)+1), node.ActionType, true)
}
