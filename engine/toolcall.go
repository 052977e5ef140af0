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

// MaxToolTimeout bounds every tool call, whatever the node, workflow or tool
// asks, so that a call always ends well within a step job's 60 s timeout.
const MaxToolTimeout = 50 * time.Second

// SnoozeError is returned by RunStep when the step must run again later with
// the same checkpoint: a tool call will be retried after its backoff, or the
// tool's circuit breaker is open. The step job is snoozed (not retried), so
// no River attempt is spent, and nothing is held while it waits.
type SnoozeError struct {
	// Delay is how long to wait before running the step again.
	Delay time.Duration
	// Reason says why, for logs.
	Reason string
}

func (e *SnoozeError) Error() string {
	return fmt.Sprintf("step snoozed for %s: %s", e.Delay, e.Reason)
}

// toolResult is the outcome of a task's tool call, made before the step's
// transaction begins.
type toolResult struct {
	output map[string]any
	err    *ToolError
	// attempt is the call's per-node attempt, from 1.
	attempt int
	// policy is the retry policy that applies to err.
	policy workflow.RetryPolicy
	// breakerWait is set when the breaker refused the call.
	breakerWait time.Duration
	// duration is how long the call took.
	duration time.Duration
}

// retryable reports whether the failed call gets another attempt.
func (t *toolResult) retryable() bool {
	return t.err != nil && t.err.Class.Retryable() && t.attempt <= t.policy.Max
}

// retryDelay is the wait before the next attempt.
func (t *toolResult) retryDelay() time.Duration {
	return max(retryDelay(t.policy, t.attempt), t.err.RetryAfter)
}

// failure turns a failed call that will not be retried into the
// execution's failure, with the error's retryable and retry_after_ms.
func (t *toolResult) failure(node *workflow.Node) *stepFailure {
	details := map[string]any{
		"tool_id": node.Task, "step_id": node.ID, "error_type": string(t.err.Class),
		"retry_count": t.attempt - 1, "retryable": t.err.Class.Retryable(), "retry_after_ms": nil,
	}
	if t.err.Class.Retryable() {
		details["retry_after_ms"] = t.retryDelay().Milliseconds()
	}
	if t.err.HTTPStatus != 0 {
		details["http_status"] = t.err.HTTPStatus
	}
	// The tenant reads the error without the tool's addresses; the process
	// log with them, and without the tool's answer.
	prefix := fmt.Sprintf("tool %s failed at step %s: ", node.Task, node.ID)
	if t.attempt > 1 {
		prefix = fmt.Sprintf("tool %s failed at step %s after %d attempts: ", node.Task, node.ID, t.attempt)
	}
	return &stepFailure{code: t.err.code(), message: prefix + t.err.tenantMessage(), logMessage: prefix + withoutAnswers(t.err.Err),
		nodeID: node.ID, details: details}
}

// toolTimeout is the node's timeout_ms, else the workflow's
// default_timeout_ms, else the tool's timeout, else the engine's, capped at
// MaxToolTimeout.
func (e *Engine) toolTimeout(def *workflow.Definition, node *workflow.Node, spec ToolSpec) time.Duration {
	timeout := e.cfg.ToolTimeout
	switch {
	case node.TimeoutMS != nil:
		timeout = time.Duration(*node.TimeoutMS) * time.Millisecond
	case def.DefaultTimeoutMS != nil:
		timeout = time.Duration(*def.DefaultTimeoutMS) * time.Millisecond
	case spec.Timeout > 0:
		timeout = spec.Timeout
	}
	return min(timeout, MaxToolTimeout)
}

// callTool runs a task node's tool through its breaker, with its timeout,
// as attempt node_attempt+1 of the node.
func (e *Engine) callTool(ctx context.Context, x *dbsqlc.AgentExecution, def *workflow.Definition, node *workflow.Node) *toolResult {
	res := &toolResult{attempt: int(x.NodeAttempt) + 1}
	rt, ok := e.tools.get(node.Task)
	if !ok {
		res.err = &ToolError{Class: ClassValidation, Err: fmt.Errorf("tool %q is not registered", node.Task)}
		return res
	}
	timeout := e.toolTimeout(def, node, rt.spec)
	vars, err := decodeVariables(x.Variables)
	if err != nil {
		// Not called: the step fails the execution (stepRun.varsErr).
		res.err = &ToolError{Class: ClassValidation, Err: err}
		return res
	}
	in := workflow.NewInterpolation(vars, e.cfg.Limits.RenderBytes)
	cfg, _ := in.Value(orEmpty(node.Config)).(map[string]any)
	inputs, _ := in.Value(orEmpty(node.Inputs)).(map[string]any)
	if err := in.Err(); err != nil {
		res.err = &ToolError{Class: ClassValidation, Err: err}
		return res
	}
	call := ToolCall{
		ToolID: node.Task, TenantID: x.TenantID, ExecutionID: x.ExecutionID, NodeID: node.ID,
		Attempt: res.attempt, IdempotencyKey: fmt.Sprintf("%s:%s:%d", x.ExecutionID, node.ID, res.attempt),
		Config: cfg, Inputs: inputs, ConversationHistory: x.ConversationHistory,
	}
	out, wait, err := rt.breaker.run(func() (map[string]any, error) {
		callCtx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		// A panic is not recovered here: it fails the execution
		// (engine/recover.go) instead of being retried as an error.
		out, err := rt.fn(callCtx, call)
		if ctx.Err() != nil {
			return nil, context.Cause(ctx) // this worker is stopping
		}
		if callCtx.Err() != nil && (err == nil || errors.Is(err, context.DeadlineExceeded)) {
			err = &ToolError{Class: ClassTimeout, Err: fmt.Errorf("%w: tool %s took over %s", errToolTimeout, node.Task, timeout)}
		}
		return out, err
	})
	if wait > 0 {
		res.breakerWait = wait
		return res
	}
	res.output = out
	if err != nil {
		res.err = classify(err)
		res.policy = defaultPolicy(res.err.Class)
		switch {
		case !res.err.Class.Retryable():
			res.policy = workflow.RetryPolicy{}
		case node.Retry != nil:
			res.policy = *node.Retry
		case rt.spec.Retry != nil:
			res.policy = *rt.spec.Retry
		}
	}
	return res
}

// scheduleRetry records a failed, retryable call (the node's attempt counter
// goes up, step_seq stays) with a workflow.step_retry event, and returns the
// SnoozeError that makes the step job run again after the backoff. A job
// whose checkpoint moved on meanwhile changes nothing and returns nil.
func (e *Engine) scheduleRetry(ctx context.Context, x *dbsqlc.AgentExecution, node *workflow.Node, res *toolResult) error {
	delay := res.retryDelay()
	won := false
	err := e.WithTx(ctx, func(tx pgx.Tx) error {
		won = false // WithTx may run this again
		row, err := e.q.ExecutionToolRetry(ctx, tx, &dbsqlc.ExecutionToolRetryParams{ID: x.ID, StepSeq: x.StepSeq, NodeAttempt: x.NodeAttempt})
		if err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return fmt.Errorf("recording tool retry: %w", err)
		}
		won = true
		events := &eventLog{tenantID: row.TenantID, executionID: row.ID}
		payload := map[string]any{
			"step_id": node.ID, "tool_id": node.Task, "attempt": res.attempt, "next_attempt": res.attempt + 1,
			"max_retries": res.policy.Max, "retry_after_ms": delay.Milliseconds(), "error_type": string(res.err.Class),
			"error": res.err.tenantMessage(),
		}
		if res.err.HTTPStatus != 0 {
			payload["http_status"] = res.err.HTTPStatus
		}
		events.add(EventStepRetry, "warn", node.ID,
			fmt.Sprintf("Tool %s failed at step %s (attempt %d of %d); retrying in %s", node.Task, node.ID, res.attempt, res.policy.Max+1, delay), payload)
		if err := e.enqueueStepError(ctx, tx, row, res, node.ID, node.Task, delay); err != nil {
			return err
		}
		return events.write(ctx, e.q, tx)
	})
	if err != nil || !won {
		return err
	}
	e.WarnContext(ctx, "tool call failed; retrying", "execution_id", x.ExecutionID, "tenant_id", x.TenantID,
		"node_id", node.ID, "tool_id", node.Task, "attempt", res.attempt, "retry_in", delay, "error", res.err.logMessage())
	return &SnoozeError{Delay: delay, Reason: fmt.Sprintf("tool %s retry %d after %s", node.Task, res.attempt, res.err.Class)}
}

// EventStepPaused is written when a step waits for a tool's circuit breaker
// instead of calling the tool: the execution goes back to pending, freeing
// its lane slot, no attempt is spent, and it is admitted again for the
// breaker's half-open probe.
const EventStepPaused = "workflow.step_paused"

// pauseForBreaker takes a running execution whose tool's circuit breaker is
// open off its lane until the breaker lets a probe through:
// running → pending, with queued_at at that moment, so
// its slot goes to other work meanwhile; a lane.dispatch job due then admits
// it again, ahead of new work. The workflow.step_paused event says why it is
// not moving. One transaction, which also completes the step job; a job
// whose checkpoint moved on changes nothing.
func (e *Engine) pauseForBreaker(ctx context.Context, x *dbsqlc.AgentExecution, node *workflow.Node, wait time.Duration, complete CompleteFunc) error {
	notBefore := time.Now().Add(wait)
	return e.WithTx(ctx, func(tx pgx.Tx) error {
		if _, err := e.lockThread(ctx, tx, x.ThreadID); err != nil {
			return err
		}
		row, err := e.q.ExecutionPauseForBreaker(ctx, tx, &dbsqlc.ExecutionPauseForBreakerParams{ID: x.ID, StepSeq: x.StepSeq, NotBefore: notBefore})
		if errors.Is(err, pgx.ErrNoRows) {
			return complete(ctx, tx)
		}
		if err != nil {
			return fmt.Errorf("pausing execution %s: %w", x.ExecutionID, err)
		}
		if err := e.enqueueStatus(ctx, tx, row); err != nil {
			return err
		}
		msg := fmt.Sprintf("Step %s waits %s for the circuit breaker of tool %s", node.ID, wait.Round(time.Millisecond), node.Task)
		events := &eventLog{tenantID: row.TenantID, executionID: row.ID}
		events.add(EventStepPaused, "warn", node.ID, msg, map[string]any{
			"step_id": node.ID, "tool_id": node.Task, "breaker": "open", "retry_after_ms": wait.Milliseconds(), "not_before": notBefore.UTC(),
		})
		if err := events.write(ctx, e.q, tx); err != nil {
			return err
		}
		if _, err := e.admitSoon(ctx, tx, row.TenantID, row.Lane, 0); err != nil {
			return err
		}
		laneOwner, laneName := e.laneKey(row.TenantID, row.Lane)
		if err := e.jobs.InsertLaneDispatchAt(ctx, tx, laneOwner, laneName, notBefore); err != nil {
			return fmt.Errorf("scheduling the lane's dispatch: %w", err)
		}
		e.WarnContext(ctx, msg, "execution_id", x.ExecutionID, "tenant_id", x.TenantID, "node_id", node.ID, "tool_id", node.Task, "lane", row.Lane)
		return complete(ctx, tx)
	})
}
