package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// The callbacks an execution's callback_url may receive
// (execution_options.callback_events).
const (
	// CallbackResult is the result envelope of an ended execution.
	CallbackResult = "result"
	// CallbackInputRequest is the input request of an execution that
	// waits at a request_input node.
	CallbackInputRequest = "input_request"
	// CallbackStatus is a change of the execution's status.
	CallbackStatus = "status"
	// CallbackError is a failed step that will be retried, or the error
	// an execution failed with.
	CallbackError = "error"
)

// callbackEvents are the names callback_events accepts, and
// defaultCallbackEvents what an execution that names none receives.
var (
	callbackEvents        = []string{CallbackResult, CallbackInputRequest, CallbackStatus, CallbackError}
	defaultCallbackEvents = []string{CallbackResult, CallbackInputRequest}
)

// CallbackJob is what a workflow.callback job sends.
type CallbackJob struct {
	// ExecutionID is the execution's row id.
	ExecutionID int64
	// MessageID is the callback's message_id, the same on every retry so
	// that a receiver can drop repeated deliveries.
	MessageID string
	// InputRequestWaitSeq, when set, makes this the input request of that
	// wait.
	InputRequestWaitSeq int32
	// Event is CallbackStatus or CallbackError for those callbacks, whose
	// Payload was taken when the change happened; empty for the others,
	// which are built from the execution when they are sent.
	Event string
	// Payload is a status or error callback's content.
	Payload json.RawMessage
}

// checkCallback validates an execution's callback_url and callback_events
// and returns the URL to store (nil for none). The error is an
// *InputError.
func (e *Engine) checkCallback(callbackURL string, events []string) (*string, error) {
	const field = "payload.execution_options.callback_events"
	for _, ev := range events {
		if !slices.Contains(callbackEvents, ev) {
			return nil, &InputError{Field: field, Message: fmt.Sprintf("unknown callback event %q (one of %s)", ev, strings.Join(callbackEvents, ", "))}
		}
	}
	if callbackURL == "" {
		if events != nil {
			return nil, &InputError{Field: field, Message: "needs payload.execution_options.callback_url"}
		}
		return nil, nil
	}
	if err := e.CheckCallbackURL(callbackURL); err != nil {
		return nil, err
	}
	return &callbackURL, nil
}

// callbackEventsToStore is callback_events as stored: nil for the default,
// else the names given, each once.
func callbackEventsToStore(events []string) []string {
	if events == nil {
		return nil
	}
	out := []string{}
	for _, ev := range events {
		if !slices.Contains(out, ev) {
			out = append(out, ev)
		}
	}
	return out
}

// wantsCallback reports whether the execution's callback_url receives the
// callback event.
func wantsCallback(row *dbsqlc.AgentExecution, event string) bool {
	if row.CallbackUrl == nil {
		return false
	}
	if row.CallbackEvents == nil {
		return slices.Contains(defaultCallbackEvents, event)
	}
	return slices.Contains(row.CallbackEvents, event)
}

// enqueueStatus inserts the status callback of the status the execution's
// row now has, in the transaction that changed it, when the execution asked
// for status callbacks.
func (e *Engine) enqueueStatus(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution) error {
	if !wantsCallback(row, CallbackStatus) {
		return nil
	}
	p := map[string]any{
		"status": string(row.Status), "step_id": nilIfEmpty(deref(row.CurrentNodeID)),
		"steps_completed": row.StepsCompleted, "steps_total": row.TotalSteps,
		"progress_percentage": percentage(int(row.StepsCompleted), int(row.TotalSteps)),
		"changed_at":          row.UpdatedAt.UTC(),
	}
	switch {
	case row.Status == StatusWaiting:
		p["waiting_for"], p["waiting_until"] = row.WaitingFor, row.WaitingUntil
	case IsTerminal(row.Status):
		p["result_type"], p["result_summary"] = row.ResultType, row.ResultSummary
	}
	return e.enqueueEventCallback(ctx, tx, row, CallbackStatus, p)
}

// enqueueExecutionError inserts the error callback of an execution that
// ended with an error, in the transaction that ended it, when the execution
// asked for error callbacks.
func (e *Engine) enqueueExecutionError(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution) error {
	if row.ErrorCode == nil || !wantsCallback(row, CallbackError) {
		return nil
	}
	details := map[string]any{}
	if len(row.ErrorDetails) > 0 {
		if err := json.Unmarshal(row.ErrorDetails, &details); err != nil {
			return fmt.Errorf("execution %s: error_details is not valid JSON: %w", row.ExecutionID, err)
		}
	}
	retryable, _ := details["retryable"].(bool)
	details["step_id"] = row.FailedNodeID
	details["error_details"] = deref(row.ErrorMessage)
	details["execution_status"] = string(row.Status)
	return e.enqueueEventCallback(ctx, tx, row, CallbackError, map[string]any{
		"event_type": "execution_failed", "occurred_at": row.UpdatedAt.UTC(),
		"code": *row.ErrorCode, "message": deref(row.ErrorMessage),
		"retryable": retryable, "retry_after_ms": details["retry_after_ms"], "details": details,
	})
}

// enqueueStepError inserts the error callback of a failed tool call that
// will be retried after delay, in the transaction that recorded it, when
// the execution asked for error callbacks.
func (e *Engine) enqueueStepError(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution, res *toolResult, stepID, toolID string, delay time.Duration) error {
	if !wantsCallback(row, CallbackError) {
		return nil
	}
	message := fmt.Sprintf("tool %s failed at step %s (attempt %d of %d): %s", toolID, stepID, res.attempt, res.policy.Max+1, res.err.tenantMessage())
	details := map[string]any{
		"step_id": stepID, "tool_id": toolID, "error_type": string(res.err.Class), "error_details": res.err.tenantMessage(),
		"retry_count": res.attempt, "max_retries": res.policy.Max, "execution_status": string(row.Status),
	}
	if res.err.HTTPStatus != 0 {
		details["http_status"] = res.err.HTTPStatus
	}
	return e.enqueueEventCallback(ctx, tx, row, CallbackError, map[string]any{
		"event_type": "step_failed", "occurred_at": time.Now().UTC(),
		"code": res.err.code(), "message": message,
		"retryable": true, "retry_after_ms": delay.Milliseconds(), "details": details,
	})
}

func (e *Engine) enqueueEventCallback(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution, event string, payload map[string]any) error {
	job := CallbackJob{ExecutionID: row.ID, MessageID: uuid.NewString(), Event: event, Payload: mustJSON(payload)}
	if err := e.jobs.InsertCallback(ctx, tx, job); err != nil {
		return fmt.Errorf("enqueueing %s callback: %w", event, err)
	}
	return nil
}

// eventCallbackEnvelope builds a status callback (a WorkflowEventMessage,
// action status) or an error callback (action error) of x from the payload
// its job took when the change happened.
func eventCallbackEnvelope(x *Execution, job CallbackJob) (map[string]any, error) {
	var p map[string]any
	if err := json.Unmarshal(job.Payload, &p); err != nil {
		return nil, fmt.Errorf("callback %s of execution %s: payload is not valid JSON: %w", job.MessageID, x.ExecutionID, err)
	}
	env := map[string]any{
		"message_id": job.MessageID, "correlation_id": x.CorrelationID, "task_id": x.ExecutionID,
		"type": map[string]any{"domain": "workflow", "action": job.Event}, "schema_version": "1.0",
		"tenant_id": x.TenantID, "source_service": "workflow-engine", "target_service": "orchestrator",
		"priority": x.Priority,
		"metadata": map[string]any{"workflow_id": x.WorkflowID, "execution_id": x.ExecutionID, "session_id": x.ThreadID},
	}
	if job.Event == CallbackStatus {
		env["created_at"], env["event_type"], env["payload"] = p["changed_at"], "status_changed", p
		return env, nil
	}
	env["request_id"], env["created_at"], env["event_type"] = job.MessageID, p["occurred_at"], p["event_type"]
	code, _ := p["code"].(string)
	details, _ := p["details"].(map[string]any)
	if details == nil {
		details = map[string]any{}
	}
	details["workflow_id"], details["execution_id"] = x.WorkflowID, x.ExecutionID
	env["error"] = map[string]any{
		"code": code, "http_status": errorHTTPStatus(code), "message": p["message"],
		"retryable": p["retryable"], "retry_after_ms": p["retry_after_ms"], "details": details,
	}
	return env, nil
}

// errorHTTPStatus is the HTTP status that goes with an execution's error
// code.
func errorHTTPStatus(code string) int {
	switch code {
	case CodeStepFailed, CodeToolFailed:
		return http.StatusBadRequest
	case CodeTimeout:
		return http.StatusRequestTimeout
	case CodeServiceUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
