package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine/workflow"
)

// EventAgentCompleted is written on a parent when the child it waits for
// ends, resuming it with cause AGENT_COMPLETED.
const EventAgentCompleted = "workflow.agent_completed"

// triggerAgent runs a trigger_agent node (waiting for the child, which may
// inherit the thread lock): it starts the child in the parent's step
// transaction, on the parent's thread, with event_data {parentExecutionId,
// canInheritLock = waitForCompletion}. With waitForCompletion the parent
// then waits for `agent` until the child's finalize resumes it; without it
// the parent carries on. waited reports that the parent now waits.
func (r *stepRun) triggerAgent(ctx context.Context, node *workflow.Node, payload *stepUpdate) (failure *stepFailure, waited bool, err error) {
	in := r.interpolation()
	params, _ := in.Value(orEmpty(node.Parameters)).(map[string]any)
	if f := r.rendered(node, in); f != nil {
		return f, false, nil
	}
	workflowID, _ := params["workflow_id"].(string)
	version, _ := params["version"].(string)
	lane, _ := params["lane"].(string)
	input, _ := params["input"].(map[string]any)
	wait, _ := params["waitForCompletion"].(bool)
	if input == nil {
		input = map[string]any{}
	}
	for _, f := range [][2]string{{"workflow_id", workflowID}, {"version", version}, {"lane", lane}} {
		if err := r.e.cfg.Limits.CheckID("trigger_agent "+f[0], f[1]); err != nil {
			return &stepFailure{code: CodeStepFailed, message: err.Error(), nodeID: node.ID}, false, nil
		}
	}
	maxDepth := r.e.cfg.Limits.ChildDepth
	depth, err := r.e.q.ExecutionDepth(ctx, r.tx, &dbsqlc.ExecutionDepthParams{ID: r.row.ID, Max: int32(maxDepth)})
	if err != nil {
		return nil, false, fmt.Errorf("counting the ancestors of execution %s: %w", r.row.ExecutionID, err)
	}
	if int(depth)+1 > maxDepth {
		return &stepFailure{code: CodeStepFailed, nodeID: node.ID, message: fmt.Sprintf(
			"trigger_agent: the child would be nested %d deep, over the limit of %d (limits.childDepth)", depth+1, maxDepth)}, false, nil
	}
	child, err := r.e.StartExecution(ctx, r.tx, StartParams{
		TenantID: r.row.TenantID, WorkflowID: workflowID, Version: version, ThreadID: r.thread.ThreadID,
		Lane: lane, Input: input, CorrelationID: r.row.CorrelationID, Priority: int(r.row.Priority),
		ParentExecutionID: r.row.ID, CanInheritLock: wait,
	})
	if errors.Is(err, ErrNotFound) {
		return &stepFailure{code: CodeStepFailed, message: fmt.Sprintf("trigger_agent: workflow %q is not defined", workflowID),
			logMessage: fmt.Sprintf("trigger_agent: workflow_id %s names no defined workflow", withheld(workflowID)), nodeID: node.ID}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("starting child execution: %w", err)
	}
	r.vars["triggeredExecutionId"] = child.ExecutionID
	payload.StepResult = map[string]any{"triggeredExecutionId": child.ExecutionID, "waitForCompletion": wait}
	r.e.InfoContext(ctx, fmt.Sprintf("Execution %s triggered execution %s (%s)", r.row.ExecutionID, child.ExecutionID, workflowID),
		append(r.logAttrs(), "child_execution_id", child.ExecutionID, "wait_for_completion", wait)...)
	if !wait {
		return nil, false, nil
	}
	r.waitingChild = child.ExecutionID
	failure, err = r.enterWait(ctx, node, payload)
	return failure, failure == nil && err == nil, err
}

// resumeParent runs in a child's finalize transaction: when the parent waits
// for this child, it is resumed with the child's outcome and variables
// (triggeredExecutionId, childExecutionStatus, childExecutionSuccess,
// lastResponse and the child's variables).
func (e *Engine) resumeParent(ctx context.Context, tx pgx.Tx, child *dbsqlc.AgentExecution) error {
	if child.ParentExecutionID == nil {
		return nil
	}
	parent, err := e.q.ExecutionGetByID(ctx, tx, *child.ParentExecutionID)
	if err != nil {
		return fmt.Errorf("reading parent execution: %w", err)
	}
	if parent.Status != StatusWaiting || deref(parent.WaitingFor) != "agent" {
		return nil
	}
	if waited, err := waitingChildOf(parent); err != nil || waited != child.ExecutionID {
		return err
	}
	locked, err := e.q.ExecutionLockWaiting(ctx, tx, &dbsqlc.ExecutionLockWaitingParams{ID: parent.ID, WaitSeq: parent.WaitSeq})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // the wait ended meanwhile
	}
	if err != nil {
		return fmt.Errorf("locking parent execution: %w", err)
	}
	vars, err := decodeVariables(locked.Variables)
	if err != nil {
		return fmt.Errorf("resuming parent execution %s: %w", locked.ExecutionID, err)
	}
	childVars, err := decodeVariables(child.Variables)
	if err != nil {
		return fmt.Errorf("resuming parent execution %s with child %s: %w", locked.ExecutionID, child.ExecutionID, err)
	}
	for k, v := range childVars {
		vars[k] = v
	}
	vars["triggeredExecutionId"] = child.ExecutionID
	vars["childExecutionStatus"] = string(child.Status)
	vars["childExecutionSuccess"] = child.Status == StatusCompleted
	vars["lastResponse"] = childVars["lastResponse"]
	events := &eventLog{tenantID: locked.TenantID, executionID: locked.ID}
	events.add(EventAgentCompleted, "info", deref(locked.CurrentNodeID),
		fmt.Sprintf("Child execution %s ended %s", child.ExecutionID, child.Status),
		map[string]any{"child_execution_id": child.ExecutionID, "status": string(child.Status)})
	e.InfoContext(ctx, "Emitting AGENT_COMPLETED event", "execution_id", child.ExecutionID, "parent_execution_id", locked.ExecutionID, "tenant_id", child.TenantID)
	_, err = e.resumeLocked(ctx, tx, locked, resumeSpec{
		vars: vars, cause: "AGENT_COMPLETED", events: events,
		eventData: map[string]any{"childExecutionId": child.ExecutionID, "status": string(child.Status)},
	})
	return err
}

// waitingChildOf returns the child an execution waiting for `agent` waits
// for.
func waitingChildOf(x *dbsqlc.AgentExecution) (string, error) {
	data := map[string]any{}
	if err := jsonUnmarshal(x.WaitingData, &data); err != nil {
		return "", fmt.Errorf("execution %s: waiting_data is not valid JSON: %w", x.ExecutionID, err)
	}
	id, _ := data["childExecutionId"].(string)
	return id, nil
}

// cancelWaitedChild cancels the child an execution was waiting for, when it
// is still live: a cancelled parent cancels the children it waits for, and a
// parent whose agent wait timed out cancels the child.
func (e *Engine) cancelWaitedChild(ctx context.Context, tx pgx.Tx, parent *dbsqlc.AgentExecution, reason string) error {
	if deref(parent.WaitingFor) != "agent" {
		return nil
	}
	childID, err := waitingChildOf(parent)
	if childID == "" || err != nil {
		return err
	}
	child, err := e.q.ExecutionGetByExecutionID(ctx, tx, &dbsqlc.ExecutionGetByExecutionIDParams{TenantID: parent.TenantID, ExecutionID: childID})
	if err != nil {
		return fmt.Errorf("reading child execution %s: %w", childID, notFound(err))
	}
	if IsTerminal(child.Status) {
		return nil
	}
	_, err = e.CancelTx(ctx, tx, parent.TenantID, childID, "system", reason)
	if IsTransitionError(err) {
		return nil
	}
	return err
}
