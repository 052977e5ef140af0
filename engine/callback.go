package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// ErrCallbackRefused is wrapped by SendCallback's errors that a retry
// cannot fix (a host or port no longer allowed, a redirect, a 4xx answer).
var ErrCallbackRefused = errors.New("callback refused")

// CheckCallbackURL reports whether raw may receive callbacks: an http(s) URL
// whose host and port Config.CallbackAllowHosts allows (a URL without a
// port connects to 80 or 443). The error is an *InputError.
func (e *Engine) CheckCallbackURL(raw string) error {
	const field = "payload.execution_options.callback_url"
	u, err := url.Parse(raw)
	if err != nil {
		return &InputError{Field: field, Message: "must be an http(s) URL"}
	}
	host, port, err := urlHostPort(u)
	if err != nil {
		return &InputError{Field: field, Message: err.Error()}
	}
	if e.callbackHosts.Allows(host, port) {
		return nil
	}
	where := net.JoinHostPort(host, strconv.Itoa(port))
	if e.callbackHosts.Empty() {
		return &InputError{Field: field, Message: fmt.Sprintf("%s is not allowed: no callback hosts are configured (callbacks.allowHosts)", where)}
	}
	return &InputError{Field: field, Message: fmt.Sprintf("%s is not in callbacks.allowHosts (a host alone allows ports 80 and 443)", where)}
}

// resultStatus is the result callback's status of a terminal execution.
func resultStatus(s ExecutionStatus) string {
	switch s {
	case StatusCompleted:
		return "completed"
	case StatusTimeout:
		return "timeout"
	case StatusCancelled:
		return "cancelled"
	}
	return "failed"
}

// ResultEnvelope builds the result callback's WorkflowResultMessage of a
// terminal execution. messageID is the callback's stable id, so a receiver
// can drop repeated deliveries. A stored result that is not a JSON object is an
// error.
func ResultEnvelope(x *Execution, messageID string) (map[string]any, error) {
	var errView any
	if x.ErrorCode != nil {
		ev := map[string]any{"code": *x.ErrorCode, "message": deref(x.ErrorMessage), "failed_node_id": x.FailedNodeID}
		for k, v := range x.ErrorDetails() {
			if _, taken := ev[k]; !taken {
				ev[k] = v
			}
		}
		errView = ev
	}
	result := map[string]any{}
	if err := jsonUnmarshal(x.Result, &result); err != nil {
		return nil, fmt.Errorf("execution %s: result is not valid JSON: %w", x.ExecutionID, err)
	}
	created := x.UpdatedAt
	if x.CompletedAt != nil {
		created = *x.CompletedAt
	}
	var elapsed int64
	if x.StartedAt != nil {
		elapsed = created.Sub(*x.StartedAt).Milliseconds()
	}
	return map[string]any{
		"message_id":       messageID,
		"correlation_id":   x.CorrelationID,
		"task_id":          x.ExecutionID,
		"original_task_id": x.IdempotencyKey,
		"type":             map[string]any{"domain": "workflow", "action": "result"},
		"schema_version":   "1.0",
		"created_at":       created.UTC().Format(time.RFC3339Nano),
		"tenant_id":        x.TenantID,
		"source_service":   "workflow-engine",
		"target_service":   "orchestrator",
		"priority":         x.Priority,
		"status":           resultStatus(x.Status),
		"metadata": map[string]any{
			"execution_time_ms": elapsed, "workflow_id": x.WorkflowID,
			"execution_id": x.ExecutionID, "session_id": x.ThreadID,
		},
		"payload": map[string]any{
			"result": result,
			"execution_details": map[string]any{
				"steps_completed": x.StepsCompleted, "steps_total": x.TotalSteps,
				"node_path": x.NodePath, "error": errView,
				"result_type": x.ResultType, "result_summary": x.ResultSummary,
			},
		},
	}, nil
}

// SendCallback POSTs a callback to an execution's callback_url, signed with
// Config.CallbackSecret (SignatureHeader): the status or error callback the
// job carries, the input request of the job's wait (an execution no longer
// waiting there has nothing to ask), or the result envelope of a terminal
// execution. A 2xx answer is success; 5xx, 408, 429 and network errors are
// errors to retry; a host or port that is no longer allowed, a 3xx
// (redirects are never followed) or another 4xx wraps ErrCallbackRefused.
// The signature's timestamp is the attempt's: a retry is signed afresh.
func (e *Engine) SendCallback(ctx context.Context, job CallbackJob) error {
	row, err := e.q.ExecutionGetByID(ctx, e.pool, job.ExecutionID)
	if err != nil {
		if errors.Is(notFound(err), ErrNotFound) {
			return fmt.Errorf("execution %d is gone: %w", job.ExecutionID, ErrCallbackRefused)
		}
		return fmt.Errorf("reading execution %d: %w", job.ExecutionID, err)
	}
	if row.CallbackUrl == nil {
		return fmt.Errorf("execution %s has no callback_url: %w", row.ExecutionID, ErrCallbackRefused)
	}
	body, action, err := e.callbackBody(ctx, row, job)
	if err != nil {
		return err
	}
	messageID := job.MessageID
	if err := e.CheckCallbackURL(*row.CallbackUrl); err != nil {
		e.WarnContext(ctx, "callback not sent", "execution_id", row.ExecutionID, "tenant_id", row.TenantID, "error", err)
		return fmt.Errorf("callback of execution %s: %v: %w", row.ExecutionID, err, ErrCallbackRefused)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, *row.CallbackUrl, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building callback request: %v: %w", err, ErrCallbackRefused)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign(e.cfg.CallbackSecret, time.Now(), body))
	req.Header.Set("X-Tenant-ID", row.TenantID)
	req.Header.Set("X-Correlation-ID", row.CorrelationID)
	req.Header.Set("X-Request-ID", messageID)
	req.Header.Set("X-Domain-Action", action)
	resp, err := e.cfg.HTTPClient.Do(req)
	if errors.Is(err, ErrOutboundRefused) {
		return fmt.Errorf("posting callback of execution %s: %v: %w", row.ExecutionID, err, ErrCallbackRefused)
	}
	if err != nil {
		return fmt.Errorf("posting callback of execution %s: %w", row.ExecutionID, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		e.InfoContext(ctx, "callback delivered", "execution_id", row.ExecutionID, "tenant_id", row.TenantID, "message_id", messageID, "action", action)
		return nil
	case s >= 500, s == http.StatusRequestTimeout, s == http.StatusTooManyRequests:
		return fmt.Errorf("callback of execution %s answered %d", row.ExecutionID, s)
	case s >= 300 && s < 400:
		e.WarnContext(ctx, "callback not delivered: redirects are not followed", "execution_id", row.ExecutionID, "tenant_id", row.TenantID, "status", s)
		return fmt.Errorf("callback of execution %s answered %d, a redirect (not followed): %w", row.ExecutionID, s, ErrCallbackRefused)
	default:
		return fmt.Errorf("callback of execution %s answered %d: %w", row.ExecutionID, s, ErrCallbackRefused)
	}
}

// callbackBody is the body of the callback job sends about row, and its
// domain.action.
func (e *Engine) callbackBody(ctx context.Context, row *dbsqlc.AgentExecution, job CallbackJob) ([]byte, string, error) {
	var (
		envelope map[string]any
		err      error
	)
	switch {
	case job.Event == CallbackStatus || job.Event == CallbackError:
		x, err := e.GetExecution(ctx, e.pool, row.TenantID, row.ExecutionID)
		if err != nil {
			return nil, "", err
		}
		envelope, err = eventCallbackEnvelope(x, job)
		if err != nil {
			return nil, "", err
		}
		return mustJSON(envelope), "workflow." + job.Event, nil
	case job.InputRequestWaitSeq != 0:
		if row.Status != StatusWaiting || deref(row.WaitingFor) != "input" || row.WaitSeq != job.InputRequestWaitSeq {
			return nil, "", fmt.Errorf("execution %s no longer waits for that input: %w", row.ExecutionID, ErrCallbackRefused)
		}
		if envelope, err = inputRequestEnvelope(row, job.MessageID); err != nil {
			return nil, "", err
		}
		return mustJSON(envelope), "workflow.input_request", nil
	case IsTerminal(row.Status):
		x, err := e.GetExecution(ctx, e.pool, row.TenantID, row.ExecutionID)
		if err != nil {
			return nil, "", err
		}
		if envelope, err = ResultEnvelope(x, job.MessageID); err != nil {
			return nil, "", err
		}
		return mustJSON(envelope), "workflow.result", nil
	}
	return nil, "", fmt.Errorf("execution %s has no result to call back: %w", row.ExecutionID, ErrCallbackRefused)
}

// inputRequestEnvelope is the callback of an execution that asks for
// input: its request_id is the callback's message id, data.request_id the
// input request's.
func inputRequestEnvelope(row *dbsqlc.AgentExecution, messageID string) (map[string]any, error) {
	waiting := map[string]any{}
	if err := jsonUnmarshal(row.WaitingData, &waiting); err != nil {
		return nil, fmt.Errorf("execution %s: waiting_data is not valid JSON: %w", row.ExecutionID, err)
	}
	data := inputRequestPayload(row, waiting)
	data["execution_id"], data["workflow_id"] = row.ExecutionID, row.WorkflowID
	return map[string]any{
		"request_id": messageID, "correlation_id": row.CorrelationID,
		"type":           map[string]any{"domain": "workflow", "action": "input_request"},
		"schema_version": "1.0",
		"data":           data,
	}, nil
}

// inputRequestPayload describes the input request of an execution waiting
// at a request_input node, whose waiting_data is waiting:
// request_id is what an answer quotes as metadata.input_request_id,
// step_id (and node_id, its older name) the node, timeout_ms how long the
// request waits from when it was made (null when it has no deadline).
func inputRequestPayload(row *dbsqlc.AgentExecution, waiting map[string]any) map[string]any {
	timeoutMS := waiting["timeout_ms"]
	if timeoutMS == nil && row.WaitingUntil != nil {
		// Asked before requests recorded their timeout: what is left of it.
		timeoutMS = max(time.Until(*row.WaitingUntil).Milliseconds(), 0)
	}
	var until any
	if row.WaitingUntil != nil {
		until = row.WaitingUntil.UTC()
	}
	step := deref(row.CurrentNodeID)
	out := map[string]any{
		"request_id": waiting["request_id"], "step_id": step, "node_id": step, "prompt": waiting["prompt"],
		"timeout_ms": timeoutMS, "waiting_until": until,
	}
	// What the node leaves out stays out.
	for _, k := range []string{"input_type", "options", "required", "default"} {
		if v, ok := waiting[k]; ok {
			out[k] = v
		}
	}
	return out
}

// enqueueInputRequest inserts the workflow.callback job that sends an input
// request, in the transaction that made the execution wait for input, when
// the execution asked for input request callbacks.
func (e *Engine) enqueueInputRequest(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution) error {
	if !wantsCallback(row, CallbackInputRequest) {
		return nil
	}
	if err := e.jobs.InsertCallback(ctx, tx, CallbackJob{ExecutionID: row.ID, MessageID: uuid.NewString(), InputRequestWaitSeq: row.WaitSeq}); err != nil {
		return fmt.Errorf("enqueueing input request callback: %w", err)
	}
	return nil
}

// enqueueEndCallbacks inserts, in finalize's transaction, the callbacks of
// an execution that ended which it asked for: its status, its error (when
// it has one) and its result.
func (e *Engine) enqueueEndCallbacks(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution) error {
	if err := e.enqueueStatus(ctx, tx, row); err != nil {
		return err
	}
	if err := e.enqueueExecutionError(ctx, tx, row); err != nil {
		return err
	}
	if !wantsCallback(row, CallbackResult) {
		return nil
	}
	if err := e.jobs.InsertCallback(ctx, tx, CallbackJob{ExecutionID: row.ID, MessageID: uuid.NewString()}); err != nil {
		return fmt.Errorf("enqueueing callback: %w", err)
	}
	return nil
}

// ErrorDetails returns the execution's error details (retryable,
// retry_after_ms, the tool's diagnosis); nil when there are none.
func (x *Execution) ErrorDetails() map[string]any {
	if len(x.ErrorDetailsJSON) == 0 {
		return nil
	}
	var m map[string]any
	_ = json.Unmarshal(x.ErrorDetailsJSON, &m)
	return m
}
