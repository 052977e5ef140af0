package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine/workflow"
)

// What a wait does when its timeout fires (its onTimeout parameter).
const (
	OnTimeoutContinue = "continue"
	OnTimeoutFail     = "fail"
	OnTimeoutRetry    = "retry"
)

// defaultMaxRetries bounds onTimeout retry when the node sets no maxRetries;
// request_input has its own.
const (
	defaultMaxRetries      = 3
	defaultInputMaxRetries = 2
)

// enterWait runs a waiting action node: it sends the node's notification
// when it has one, then moves the execution running → waiting in the step's
// transaction, with the workflow.waiting event and the wait's timeout job.
// A timeout that resolves to something unusable fails the execution.
func (r *stepRun) enterWait(ctx context.Context, node *workflow.Node, payload *stepUpdate) (*stepFailure, error) {
	kind, _ := workflow.WaitKindOf(node.ActionType)
	in := r.interpolation()
	params, _ := in.Value(orEmpty(node.Parameters)).(map[string]any)
	if f := r.rendered(node, in); f != nil {
		return f, nil
	}
	now := time.Now()
	timeoutText, until, failure := waitDeadline(node.ActionType, kind, params, now)
	if failure != nil {
		failure.code, failure.nodeID = CodeStepFailed, node.ID
		return failure, nil
	}
	thread, err := r.e.q.ThreadGetByID(ctx, r.tx, r.row.ThreadID)
	if err != nil {
		return nil, fmt.Errorf("reading thread %d: %w", r.row.ThreadID, err)
	}
	expectedFrom, _ := params["expectedFrom"].(string)
	if expectedFrom == "" {
		expectedFrom = "user"
	}
	onTimeout, _ := params["onTimeout"].(string)
	if onTimeout == "" {
		onTimeout = OnTimeoutFail
	}
	data := map[string]any{
		"threadId": thread.ThreadID, "expectedFrom": expectedFrom, "timeout": timeoutText,
		"nodeId": node.ID, "actionType": node.ActionType, "onTimeout": onTimeout, "retries": 0,
	}
	switch node.ActionType {
	case workflow.ActionTriggerAgent:
		data["expectedFrom"] = "agent"
		data["childExecutionId"] = r.waitingChild
		data["workflow_id"] = params["workflow_id"]
	case workflow.ActionRequestDocument:
		data["documents"] = params["documents"]
		data["received"] = map[string]any{}
	case workflow.ActionRequestSignature:
		data["document_url"] = params["document_url"]
	case workflow.ActionAssignTest:
		data["test_id"] = params["test_id"]
	case workflow.ActionWaitForEvent:
		data["event_id"] = workflow.RenderText(params["event_id"])
	case workflow.ActionRequestInput:
		for _, k := range []string{"prompt", "input_type", "options", "required", "default"} {
			if v, ok := params[k]; ok {
				data[k] = v
			}
		}
		// The request's id, which an answer may quote
		// (metadata.input_request_id), and how long it waits.
		data["request_id"] = uuid.NewString()
		data["timeout_ms"] = until.Sub(now).Milliseconds()
	case workflow.ActionDelay:
		delete(data, "onTimeout")
		delete(data, "expectedFrom")
		data["until"] = until.UTC().Format(time.RFC3339Nano)
	}
	if body := notification(node.ActionType, params); body != "" {
		sent, err := r.send(ctx, node.ID, body)
		if err != nil {
			return nil, err
		}
		payload.NotificationMessageID = sent["message_id"]
	}
	payload.WaitingFor = &kind.WaitingFor
	vars, failure := r.variables(node.ID)
	if failure != nil {
		return failure, nil
	}
	r.record(node, node.Next, payload)
	timer, err := r.e.armTimeout(ctx, r.tx, r.row, until)
	if err != nil {
		return nil, err
	}
	row, err := r.e.q.ExecutionEnterWait(ctx, r.tx, &dbsqlc.ExecutionEnterWaitParams{
		ID: r.row.ID, StepSeq: r.row.StepSeq, CurrentNodeID: node.ID, Variables: vars,
		NodePath: r.path, StepsCompleted: int32(r.steps), TotalSteps: int32(r.steps + r.def.Remaining(node.Next)),
		WaitingFor: kind.WaitingFor, WaitingUntil: until, WaitingData: mustJSON(data), WaitTimeoutJobID: timer,
	})
	if err != nil {
		return nil, fmt.Errorf("entering wait: %w", err)
	}
	if err := r.e.enqueueStatus(ctx, r.tx, row); err != nil {
		return nil, err
	}
	if node.ActionType == workflow.ActionRequestInput {
		r.events.add(EventInputRequest, "info", node.ID, fmt.Sprintf("Execution %s requests input", row.ExecutionID), inputRequestPayload(row, data))
		if err := r.e.enqueueInputRequest(ctx, r.tx, row); err != nil {
			return nil, err
		}
	}
	if err := r.e.startWait(ctx, r.tx, row, data, r.events, r.logAttrs(), node.ActionType, !r.slotless); err != nil {
		return nil, err
	}
	// Events that arrived while the execution was running may end the wait
	// at once.
	// They may change the row (a partial upload, a resume): whoever needs
	// it reads it again.
	if _, err := r.e.applyBufferedEvents(ctx, r.tx, row); err != nil {
		return nil, err
	}
	r.last = nil
	return nil, nil
}

// armTimeout enqueues the timeout job of the wait the execution enters
// next, its wait_seq + 1, due at until, and returns the job's id for the
// statement that makes it wait (ExecutionEnterWait, ExecutionRewait),
// which stores it on the row: whatever ends the wait before until deletes
// the job in its own statement (ExecutionResume, ExecutionCancel,
// ExecutionFail). The job goes first because its id goes with the row's
// update, which then costs no statement of its own.
func (e *Engine) armTimeout(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution, until time.Time) (int64, error) {
	id, err := e.jobs.InsertWaitTimeout(ctx, tx, WaitTimer{
		ExecutionRowID: row.ID, TenantID: row.TenantID, ExecutionID: row.ExecutionID, WaitSeq: row.WaitSeq + 1, At: until,
	})
	if err != nil {
		return 0, fmt.Errorf("enqueueing wait timeout: %w", err)
	}
	return id, nil
}

// startWait writes a wait's event and log lines, in the transaction that
// made the execution wait (or wait again), whose timeout job armTimeout
// enqueued. freed says the execution held a lane slot until now, which
// admission may give on.
func (e *Engine) startWait(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution, data map[string]any, events *eventLog, attrs []any, actionType string, freed bool) error {
	waitingFor := deref(row.WaitingFor)
	msg := fmt.Sprintf("Execution %s entering WAITING state (waitingFor: %s)", row.ExecutionID, waitingFor)
	events.add(EventWaiting, "info", deref(row.CurrentNodeID), msg, map[string]any{
		"waiting_for": waitingFor, "waiting_until": row.WaitingUntil, "waiting_data": data, "wait_seq": row.WaitSeq,
	})
	if err := events.write(ctx, e.q, tx); err != nil {
		return err
	}
	// Waiting holds no lane slot.
	if freed {
		if err := e.slotFreed(ctx, tx, row); err != nil {
			return err
		}
	}
	// A session run, slotless or not, hands its session's inbound work on.
	if err := e.sessionFreed(ctx, tx, row); err != nil {
		return err
	}
	e.InfoContext(ctx, fmt.Sprintf("Action %s requires wait", actionType), attrs...)
	e.DebugContext(ctx, fmt.Sprintf("Saving checkpoint for execution %s", row.ExecutionID), attrs...)
	e.InfoContext(ctx, msg, append(attrs, "waiting_for", waitingFor, "waiting_until", row.WaitingUntil, "wait_seq", row.WaitSeq)...)
	return nil
}

// waitDeadline resolves a wait's timeout, already templated, into its text
// and its deadline; a timeout the wait cannot use is a failure, whose
// message quotes the value the tenant gave and whose logMessage its length
// (engine/logsafe.go). The caller sets its code and node.
func waitDeadline(actionType string, kind workflow.WaitKind, params map[string]any, now time.Time) (text string, until time.Time, failure *stepFailure) {
	if actionType == workflow.ActionDelay {
		if raw, ok := params["until"]; ok && raw != nil && raw != "" {
			s, _ := raw.(string)
			at, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return "", time.Time{}, &stepFailure{
					message:    fmt.Sprintf("delay until %q is not an RFC 3339 time", workflow.RenderText(raw)),
					logMessage: fmt.Sprintf("delay until %s is not an RFC 3339 time", withheld(raw)),
				}
			}
			if at.Sub(now) > kind.Max {
				over := fmt.Sprintf("is over the maximum of %s for a delay wait", workflow.FormatDays(kind.Max))
				return "", time.Time{}, &stepFailure{
					message:    fmt.Sprintf("delay until %s %s", s, over),
					logMessage: fmt.Sprintf("delay until %s %s", withheld(s), over),
				}
			}
			if at.Before(now) {
				at = now
			}
			return s, at, nil
		}
		return durationDeadline("duration", kind, params, now)
	}
	return durationDeadline("timeout", kind, params, now)
}

func durationDeadline(key string, kind workflow.WaitKind, params map[string]any, now time.Time) (string, time.Time, *stepFailure) {
	raw, ok := params[key]
	if !ok || raw == nil || raw == "" {
		if kind.Default == 0 {
			return "", time.Time{}, &stepFailure{message: fmt.Sprintf("a %s wait needs a %s", kind.WaitingFor, key)}
		}
		return workflow.FormatDays(kind.Default), now.Add(kind.Default), nil
	}
	// failed quotes the value in the message, its length in the log.
	failed := func(message, problem string) (string, time.Time, *stepFailure) {
		return "", time.Time{}, &stepFailure{message: message, logMessage: fmt.Sprintf("%s %s %s", key, withheld(raw), problem)}
	}
	s, isStr := raw.(string)
	if !isStr {
		return failed(fmt.Sprintf("%s %s is not a duration", key, workflow.RenderText(raw)), "is not a duration")
	}
	d, err := workflow.ParseDuration(s)
	switch {
	case err != nil:
		return failed(fmt.Sprintf("%s: %v", key, err), "is not a duration")
	case d <= 0:
		return failed(fmt.Sprintf("%s %s must be positive", key, s), "must be positive")
	case d > kind.Max:
		over := fmt.Sprintf("is over the maximum of %s for a %s wait", workflow.FormatDays(kind.Max), kind.WaitingFor)
		return failed(fmt.Sprintf("%s %s %s", key, s, over), over)
	}
	return s, now.Add(d), nil
}

// notification is the message assign_test and request_signature send on the
// thread before they wait: the node's templated message, else a default.
func notification(actionType string, params map[string]any) string {
	msg, _ := params["message"].(string)
	switch actionType {
	case workflow.ActionAssignTest:
		if msg == "" {
			msg = fmt.Sprintf("Te asignamos la evaluación %s. Complétala cuando puedas.", workflow.RenderText(params["test_id"]))
		}
	case workflow.ActionRequestSignature:
		if msg == "" {
			msg = fmt.Sprintf("Por favor firma el documento: %s", workflow.RenderText(params["document_url"]))
		}
	default:
		return ""
	}
	return msg
}

// timeoutSummary is the result summary of an execution whose wait timed out,
// by what it waited for ("Timeout esperando respuesta del usuario", …).
func timeoutSummary(waitingFor string) string {
	switch waitingFor {
	case "response":
		return "Timeout esperando respuesta del usuario"
	case "document":
		return "Timeout esperando documentos del usuario"
	case "signature":
		return "Timeout esperando firma del usuario"
	case "test":
		return "Timeout esperando evaluación del usuario"
	case "event":
		return "Timeout esperando evento"
	case "input":
		return "Timeout esperando input del usuario"
	}
	return "Timeout esperando " + waitingFor
}
