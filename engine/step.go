package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine/workflow"
)

// CompleteFunc completes the River job that runs a step, inside the step's
// transaction (river.JobCompleteTx), so the step's effects and the job's
// completion commit together.
type CompleteFunc func(ctx context.Context, tx pgx.Tx) error

// RunStep advances an execution from the checkpoint whose step_seq is
// stepSeq: it runs nodes until the execution ends, must wait, or reaches a
// task whose tool must be called outside a transaction, then writes the
// checkpoint, the events and the next jobs in one transaction with complete.
// A job whose checkpoint is no longer current changes nothing.
func (e *Engine) RunStep(ctx context.Context, executionID, stepSeq int64, complete CompleteFunc) error {
	return e.RunStepAttempt(ctx, executionID, stepSeq, 1, complete)
}

// RunStepAttempt is RunStep for the given attempt of the step's job (1 for
// the first): an attempt over 1 is reported to Metrics as a retry of the
// step. A panic in the step fails the execution (engine/recover.go).
func (e *Engine) RunStepAttempt(ctx context.Context, executionID, stepSeq int64, attempt int, complete CompleteFunc) (err error) {
	defer e.recoverStep(ctx, executionID, stepSeq, complete, &err)
	snap, err := e.q.ExecutionGetByID(ctx, e.pool, executionID)
	if err != nil {
		if errors.Is(notFound(err), ErrNotFound) {
			return nil // nothing to advance
		}
		return fmt.Errorf("reading execution %d: %w", executionID, err)
	}
	if snap.Status != StatusRunning || snap.StepSeq != stepSeq {
		e.DebugContext(ctx, "stale step job", "execution_id", snap.ExecutionID, "job_step_seq", stepSeq, "step_seq", snap.StepSeq, "status", string(snap.Status))
		return nil
	}
	def, err := e.definitionByKey(ctx, e.pool, snap.TenantID, snap.WorkflowID, snap.Version)
	if err != nil {
		return err
	}
	if attempt > 1 {
		e.metrics.Retry(snap.WorkflowID, deref(snap.CurrentNodeID))
	}
	// A task's tool is called before the transaction, never inside it.
	var pre *toolResult
	if node := def.Node(deref(snap.CurrentNodeID)); node != nil && node.Type == workflow.NodeTask {
		began := time.Now()
		pre = e.callTool(ctx, snap, def, node)
		pre.duration = time.Since(began)
		if err := ctx.Err(); err != nil {
			// This worker is stopping: the call's failure is not the tool's.
			return fmt.Errorf("step interrupted during tool call: %w", err)
		}
		if pre.breakerWait > 0 {
			// The tool's breaker is open: wait for its probe off the lane,
			// without spending an attempt or failing.
			return e.pauseForBreaker(ctx, snap, node, pre.breakerWait, complete)
		}
		if pre.retryable() {
			return e.scheduleRetry(ctx, snap, node, pre)
		}
	}
	var run *stepRun
	called := pre
	err = e.WithTx(ctx, func(tx pgx.Tx) error {
		// WithTx may run this again: start from what the call returned.
		run, pre = nil, called
		// The thread first, then the execution, in lock order.
		thread, err := e.lockThread(ctx, tx, snap.ThreadID)
		if err != nil {
			return err
		}
		row, err := e.q.ExecutionLockForStep(ctx, tx, &dbsqlc.ExecutionLockForStepParams{ID: executionID, StepSeq: stepSeq})
		if err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return complete(ctx, tx) // another transition won; this job is done
			}
			return fmt.Errorf("locking execution %d: %w", executionID, err)
		}
		// Inbound messages steered into the run arrive at this boundary;
		// a run whose variables do not decode takes none: advance fails it.
		run = newStepRun(e, tx, def, row)
		steered := 0
		if run.varsErr == nil {
			if steered, err = e.takeSteered(ctx, tx, row, run.vars); err != nil {
				return err
			}
		}
		run.thread = holds(thread)
		rerun := steered > 0 && pre != nil && e.tools.isLLM(deref(row.CurrentNodeID), def)
		if rerun {
			// The model answered without the steered messages: its answer is
			// discarded and the node runs again (queue mode steer), from a
			// checkpoint at the same node.
			run.events.add("workflow.steered", "info", deref(row.CurrentNodeID),
				fmt.Sprintf("Discarding the answer of node %s: %d steered message(s) arrived during the call", deref(row.CurrentNodeID), steered),
				map[string]any{"step_id": deref(row.CurrentNodeID), "steered": steered, "attempt": pre.attempt})
			pre = nil
		}
		if err := run.advance(ctx, pre); err != nil {
			return err
		}
		if rerun {
			// The next call is the next attempt: a new idempotency key, so a
			// tool that dedupes does not answer with the discarded reply.
			if err := e.q.ExecutionSetNodeAttempt(ctx, tx, &dbsqlc.ExecutionSetNodeAttemptParams{ID: row.ID, NodeAttempt: row.NodeAttempt + 1}); err != nil {
				return fmt.Errorf("keeping the attempt count of node %s: %w", deref(row.CurrentNodeID), err)
			}
		}
		return complete(ctx, tx)
	})
	if err == nil && run != nil {
		run.events.after.report(e.metrics)
	}
	return err
}

// stepConditionTime bounds the time all conditions of one step may run.
const stepConditionTime = time.Second

// stepRun is one step transaction's walk through the graph.
type stepRun struct {
	e      *Engine
	tx     pgx.Tx
	def    *workflow.Definition
	row    *dbsqlc.AgentExecution
	vars   workflow.Variables
	path   []string
	steps  int
	events *eventLog
	// thread is the execution's thread, locked FOR UPDATE by the step.
	thread *heldThread
	// messageID, when not 0, is the id ExecutionReserve drew for the
	// run's next outbound message, which then needs no MessageIDNext.
	messageID int64
	// deliver is set once a message waits for delivery on the thread.
	deliver bool
	// waitingChild is the child a trigger_agent node is about to wait for.
	waitingChild string
	// nodeStart is when the current node began (for a task, when its tool
	// call began).
	nodeStart time.Time
	// last is the execution's row as the step's last write returned it, nil
	// when something may have changed it since.
	last *dbsqlc.AgentExecution
	// slotless says the execution was never admitted to its lane: its start
	// transaction runs it until it ends or waits (engine/lane.go, "Runs
	// that never hold a slot"), so ending or waiting frees no slot.
	slotless bool
	// unsaved, while set, says the execution's row is not written yet: a
	// slotless run whose reserved row (ExecutionReserve, this reservation)
	// is written once, in the state the step leaves it in, when the step
	// ends it. Until then the step runs only nodes that need no row
	// (needsRow); before any other, save writes the row as it was at the
	// start, and the step goes on as for any running execution.
	unsaved *reservation
	// conditionTime is how long the step's conditions have run; past
	// stepConditionTime the step fails, so that a chain of conditions,
	// each within its cost, cannot hold the thread's row for long.
	conditionTime time.Duration
	// varsErr says the stored variables did not decode: the step fails
	// the execution instead of running on empty variables.
	varsErr error
}

// newStepRun starts a walk from row's checkpoint. Variables that do not
// decode are kept in varsErr, and advance fails the execution with it.
func newStepRun(e *Engine, tx pgx.Tx, def *workflow.Definition, row *dbsqlc.AgentExecution) *stepRun {
	vars, varsErr := decodeVariables(row.Variables)
	if varsErr != nil {
		vars = workflow.Variables{}
	}
	return &stepRun{
		e: e, tx: tx, def: def, row: row, vars: vars, varsErr: varsErr,
		path: append([]string(nil), row.NodePath...), steps: int(row.StepsCompleted),
		events: &eventLog{tenantID: row.TenantID, executionID: row.ID},
	}
}

// stepFailure fails the execution at a node.
type stepFailure struct {
	code, message, nodeID string
	// logMessage, when set, is what the process log says of the failure
	// instead of message (what the tenant reads): the tenant's data that
	// message quotes replaced by its length (engine/logsafe.go), and for a
	// tool the addresses message leaves out.
	logMessage string
	// details become the execution's error_details; nil for failures that
	// are not worth retrying.
	details map[string]any
}

func (r *stepRun) logAttrs() []any {
	return []any{"execution_id", r.row.ExecutionID, "tenant_id", r.row.TenantID, "thread_id", r.row.ThreadID, "correlation_id", r.row.CorrelationID}
}

// advance walks nodes from the checkpoint and persists where it stops.
func (r *stepRun) advance(ctx context.Context, pre *toolResult) error {
	cur := deref(r.row.CurrentNodeID)
	if r.varsErr != nil {
		return r.fail(ctx, &stepFailure{code: CodeStepFailed, message: r.varsErr.Error(), nodeID: cur})
	}
	for i := 0; ; i++ {
		if i >= r.e.cfg.MaxNodesPerStep {
			return r.checkpoint(ctx, cur)
		}
		node := r.def.Node(cur)
		if node == nil {
			return r.fail(ctx, &stepFailure{code: CodeStepFailed, message: fmt.Sprintf("node %q is not in the definition", cur), nodeID: cur})
		}
		if node.Type == workflow.NodeTask && (i > 0 || pre == nil) {
			// The tool is called by the next step job, outside a transaction.
			return r.checkpoint(ctx, cur)
		}
		next, failure, done, err := r.runNode(ctx, node, pre)
		if err != nil {
			return err
		}
		if failure != nil {
			return r.fail(ctx, failure)
		}
		if done {
			return nil
		}
		cur = next
	}
}

// runNode executes one node. It returns the next node, or a failure, or
// done when the node ended the execution.
func (r *stepRun) runNode(ctx context.Context, node *workflow.Node, pre *toolResult) (next string, failure *stepFailure, done bool, err error) {
	r.nodeStart = time.Now()
	if node.Type == workflow.NodeTask && pre != nil {
		r.nodeStart = r.nodeStart.Add(-pre.duration)
	}
	if r.needsRow(node) {
		if err := r.save(ctx); err != nil {
			return "", nil, false, err
		}
	}
	payload := &stepUpdate{StepID: node.ID, NodeType: node.Type}
	switch node.Type {
	case workflow.NodeStart:
		next = node.Next
	case workflow.NodeDecision:
		began := time.Now()
		val, evalErr := node.EvalCondition(ctx, r.vars)
		r.conditionTime += time.Since(began)
		if err := ctx.Err(); err != nil {
			return "", nil, false, fmt.Errorf("step interrupted during condition: %w", err) // the worker stops
		}
		if evalErr != nil {
			return "", &stepFailure{code: CodeStepFailed, message: evalErr.Error(), logMessage: conditionLogMessage(evalErr), nodeID: node.ID}, false, nil
		}
		if r.conditionTime > stepConditionTime {
			return "", &stepFailure{code: CodeStepFailed, nodeID: node.ID, message: fmt.Sprintf(
				"the conditions of one step ran for %s, over %s: %v", r.conditionTime.Round(time.Millisecond), stepConditionTime, workflow.ErrConditionCost)}, false, nil
		}
		key := workflow.BranchKey(val)
		target, ok := node.Branches[key]
		if !ok {
			target, ok = node.Branches["default"]
		}
		if !ok {
			return "", &stepFailure{code: CodeStepFailed, message: fmt.Sprintf("condition %q gave %q and no branch matches it", node.Condition, key),
				logMessage: fmt.Sprintf("the condition gave %s and no branch matches it", withheld(key)), nodeID: node.ID}, false, nil
		}
		payload.DecisionMade = fmt.Sprintf("The condition '%s' evaluated to %s", node.Condition, key)
		payload.StepResult = map[string]any{"value": val}
		next = target
	case workflow.NodeTask:
		if pre.err != nil {
			return "", pre.failure(node), false, nil
		}
		if node.Output != "" {
			r.vars[node.Output] = pre.output
		} else {
			for k, v := range pre.output {
				r.vars[k] = v
			}
		}
		payload.StepResult = pre.output
		next = node.Next
	case workflow.NodeAction:
		payload.ActionType = node.ActionType
		if node.ActionType == workflow.ActionTriggerAgent {
			var waited bool
			failure, waited, err = r.triggerAgent(ctx, node, payload)
			if err != nil || failure != nil || waited {
				return "", failure, waited, err
			}
			next = node.Next
			break
		}
		if _, waits := workflow.WaitKindOf(node.ActionType); waits {
			failure, err = r.enterWait(ctx, node, payload)
			return "", failure, failure == nil, err
		}
		failure, err = r.runAction(ctx, node, payload)
		if err != nil || failure != nil {
			return "", failure, false, err
		}
		next = node.Next
	case workflow.NodeEnd:
		r.record(node, "", payload)
		return "", nil, true, r.complete(ctx, node)
	default:
		return "", &stepFailure{code: CodeStepFailed, message: fmt.Sprintf("unknown node type %q", node.Type), nodeID: node.ID}, false, nil
	}
	r.record(node, next, payload)
	return next, nil, false, nil
}

func (r *stepRun) runAction(ctx context.Context, node *workflow.Node, payload *stepUpdate) (*stepFailure, error) {
	in := r.interpolation()
	switch node.ActionType {
	case workflow.ActionSetVariables:
		values, _ := in.Value(node.Parameters["values"]).(map[string]any)
		if f := r.rendered(node, in); f != nil {
			return f, nil
		}
		for k, v := range values {
			r.vars[k] = v
		}
		payload.StepResult = values
	case workflow.ActionSendMessage:
		raw, _ := node.Parameters["message"].(string)
		body := in.Text(raw)
		if f := r.rendered(node, in); f != nil {
			return f, nil
		}
		result, err := r.send(ctx, node.ID, body)
		if err != nil {
			return nil, err
		}
		payload.StepResult = result
	default:
		return &stepFailure{
			code:    CodeStepFailed,
			message: fmt.Sprintf("action %s is not supported by this version of Baton", node.ActionType),
			nodeID:  node.ID,
		}, nil
	}
	return nil, nil
}

// send stores an outbound message on the execution's thread: into the
// outbox when the execution holds the thread's lock, queued otherwise.
func (r *stepRun) send(ctx context.Context, nodeID, body string) (map[string]any, error) {
	decision, err := r.e.acquireForSend(ctx, r.tx, r.thread, r.row, r.events)
	if err != nil {
		return nil, err
	}
	msgID, err := r.storeMessage(ctx, nodeID, body, !decision.holder)
	if err != nil {
		return nil, err
	}
	// Message ids are strings wherever a client sees them.
	id := strconv.FormatInt(msgID, 10)
	if !decision.holder {
		r.events.add(EventMessageQueued, "info", nodeID, fmt.Sprintf("Message %d queued: thread %s is held by another execution", msgID, r.thread.ThreadID),
			map[string]any{"message_id": id, "body": body, "thread_id": r.thread.ThreadID})
		return map[string]any{"message_id": id, "queued": true}, nil
	}
	if !r.deliver {
		if err := r.e.enqueueDelivery(ctx, r.tx, r.row.ThreadID); err != nil {
			return nil, err
		}
		r.deliver = true
	}
	r.events.add(EventMessagePending, "info", nodeID, fmt.Sprintf("Message %d accepted for delivery", msgID),
		map[string]any{"message_id": id, "body": body, "thread_id": r.thread.ThreadID})
	return map[string]any{"message_id": id, "queued": false}, nil
}

// storeMessage inserts an outbound message and returns its id: the one
// the run's reservation drew for it (messageID), else one drawn now. The
// insert is held back to go with the transaction's next statement.
func (r *stepRun) storeMessage(ctx context.Context, nodeID, body string, queued bool) (int64, error) {
	id := r.messageID
	r.messageID = 0
	if id == 0 {
		var err error
		if id, err = r.e.q.MessageIDNext(ctx, r.tx); err != nil {
			return 0, explainMessageInsert(err)
		}
	}
	return id, r.e.q.MessageInsertOutbound(ctx, later(r.tx, explainMessageInsert), &dbsqlc.MessageInsertOutboundParams{
		ID: id, TenantID: r.row.TenantID, ThreadID: r.row.ThreadID, ExecutionID: r.row.ID,
		NodeID: nodeID, StepSeq: r.row.StepSeq, Body: body, Queued: queued,
	})
}

func explainMessageInsert(err error) error { return fmt.Errorf("storing outbound message: %w", err) }

// interpolation renders a node's templates against the run's variables,
// within limits.renderBytes.
func (r *stepRun) interpolation() *workflow.Interpolation {
	return workflow.NewInterpolation(r.vars, r.e.cfg.Limits.RenderBytes)
}

// rendered ends a node's rendering: a warning event for each placeholder
// that named no variable, and a failure when rendering ran past its limit.
func (r *stepRun) rendered(node *workflow.Node, in *workflow.Interpolation) *stepFailure {
	for _, p := range in.Missing {
		r.events.add(EventTemplateWarning, "warn", node.ID, fmt.Sprintf("Variable %q is not set; it rendered empty", p), map[string]any{"variable": p})
	}
	in.Missing = nil
	if err := in.Err(); err != nil {
		return &stepFailure{code: CodeStepFailed, message: err.Error(), nodeID: node.ID}
	}
	return nil
}

// variables encodes the run's variables for a write, or fails the node when
// they have grown past limits.variablesBytes.
func (r *stepRun) variables(nodeID string) (json.RawMessage, *stepFailure) {
	b, err := json.Marshal(r.vars)
	if err != nil {
		return nil, &stepFailure{code: CodeStepFailed, message: fmt.Sprintf("encoding variables: %v", err), nodeID: nodeID}
	}
	if max := r.e.cfg.Limits.VariablesBytes; len(b) > max {
		return nil, &stepFailure{code: CodeStepFailed, nodeID: nodeID,
			message: (&workflow.LimitError{Field: "variables", Limit: "limits.variablesBytes", Max: int64(max), Got: int64(len(b))}).Error()}
	}
	return b, nil
}

// writePrivateLock stores a lock that lived in memory
// (heldThread.private) when the execution still holds it: it waits, and
// keeps its voice while it does.
func (r *stepRun) writePrivateLock(ctx context.Context) error {
	if !r.thread.private || r.thread.ActiveExecutionID == nil {
		return nil
	}
	if err := r.e.q.ThreadSetLock(ctx, r.tx, &dbsqlc.ThreadSetLockParams{ID: r.thread.ID, ExecutionID: *r.thread.ActiveExecutionID}); err != nil {
		return fmt.Errorf("storing the new thread's lock: %w", err)
	}
	return nil
}

// checkpoint stores the walk and enqueues the step that goes on from cur.
func (r *stepRun) checkpoint(ctx context.Context, cur string) error {
	vars, failure := r.variables(cur)
	if failure != nil {
		return r.fail(ctx, failure)
	}
	if err := r.save(ctx); err != nil {
		return err
	}
	row, err := r.e.q.ExecutionCheckpoint(ctx, r.tx, &dbsqlc.ExecutionCheckpointParams{
		ID: r.row.ID, StepSeq: r.row.StepSeq, CurrentNodeID: cur, Variables: vars,
		NodePath: r.path, StepsCompleted: int32(r.steps), TotalSteps: int32(r.steps + r.def.Remaining(cur)),
	})
	if err != nil {
		return fmt.Errorf("writing checkpoint: %w", err)
	}
	r.last = row
	if err := r.events.write(ctx, r.e.q, r.tx); err != nil {
		return err
	}
	if err := r.e.jobs.InsertStep(ctx, r.tx, row.ID, row.StepSeq, riverPriority(int(row.Priority))); err != nil {
		return fmt.Errorf("enqueueing next step: %w", err)
	}
	r.e.DebugContext(ctx, "Saving checkpoint", append(r.logAttrs(), "node_id", cur, "step_seq", row.StepSeq)...)
	return nil
}

// complete ends the execution at an end node.
func (r *stepRun) complete(ctx context.Context, node *workflow.Node) error {
	in := r.interpolation()
	result, _ := in.Value(orEmpty(node.Result)).(map[string]any)
	if f := r.rendered(node, in); f != nil {
		return r.fail(ctx, f)
	}
	vars, failure := r.variables(node.ID)
	if failure != nil {
		return r.fail(ctx, failure)
	}
	summary, _ := result["summary"].(string)
	if summary == "" {
		summary = "Workflow completed successfully"
	}
	row, err := r.finishStep(ctx, &dbsqlc.ExecutionFinishStepParams{
		ID: r.row.ID, StepSeq: r.row.StepSeq, Status: StatusCompleted, CurrentNodeID: node.ID,
		Variables: vars, NodePath: r.path, StepsCompleted: int32(r.steps), TotalSteps: int32(r.steps),
		ResultType: "success", ResultSummary: &summary, Result: mustJSON(result),
	})
	if err != nil {
		return fmt.Errorf("completing execution: %w", err)
	}
	r.last = row
	return r.e.finalize(ctx, r.tx, row, r.events, finish{freed: !r.slotless, thread: r.thread})
}

// fail ends the execution as failed at a node.
func (r *stepRun) fail(ctx context.Context, f *stepFailure) error {
	r.e.WarnContext(ctx, "step failed", append(r.logAttrs(), "node_id", f.nodeID, "error_code", f.code, "error", cmp.Or(f.logMessage, f.message))...)
	var details json.RawMessage
	if f.details != nil {
		details = mustJSON(f.details)
	}
	vars, tooLarge := r.variables(f.nodeID)
	if tooLarge != nil {
		// The variables as the step found them: what grew past the limit
		// is not kept.
		vars = r.row.Variables
	}
	row, err := r.finishStep(ctx, &dbsqlc.ExecutionFinishStepParams{
		ID: r.row.ID, StepSeq: r.row.StepSeq, Status: StatusFailed, CurrentNodeID: f.nodeID,
		Variables: vars, NodePath: r.path, StepsCompleted: int32(r.steps),
		TotalSteps: int32(r.steps + r.def.Remaining(f.nodeID)),
		ResultType: "failure", ErrorCode: &f.code, ErrorMessage: &f.message, FailedNodeID: &f.nodeID,
		ErrorDetails: details,
	})
	if err != nil {
		return fmt.Errorf("failing execution: %w", err)
	}
	r.last = row
	return r.e.finalize(ctx, r.tx, row, r.events, finish{freed: !r.slotless, thread: r.thread})
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
