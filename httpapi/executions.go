package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine"
)

// executePayload is the payload of workflow.execute (docs/api.md,
// "Execute").
type executePayload struct {
	WorkflowID       string         `json:"workflow_id"`
	Version          string         `json:"version"`
	ExecutionID      string         `json:"execution_id"`
	ThreadID         string         `json:"thread_id"`
	Lane             string         `json:"lane"`
	Input            map[string]any `json:"input"`
	Context          map[string]any `json:"context"`
	ExecutionOptions struct {
		CallbackURL       string   `json:"callback_url"`
		CallbackEvents    []string `json:"callback_events"`
		WaitForCompletion bool     `json:"wait_for_completion"`
	} `json:"execution_options"`
}

// defaultWaitTimeout is how long wait_for_completion holds a request when
// metadata.timeout_ms is absent.
const defaultWaitTimeout = 30 * time.Second

func (s *Server) execute(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	var p executePayload
	if err := decodePayload(r.envelope, &p, "workflow", "execute"); err != nil {
		return 0, nil, err
	}
	if p.WorkflowID == "" {
		return 0, nil, newAPIError(http.StatusBadRequest, "workflow.execute.invalid_request", "payload.workflow_id is required").with("field", "payload.workflow_id")
	}
	if p.ExecutionOptions.CallbackURL != "" {
		u, err := url.Parse(p.ExecutionOptions.CallbackURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return 0, nil, newAPIError(http.StatusBadRequest, "workflow.execute.invalid_request", "execution_options.callback_url must be an http(s) URL").with("field", "payload.execution_options.callback_url")
		}
	}
	threadID, threadField := p.ThreadID, "payload.thread_id"
	if threadID == "" {
		if conv, ok := r.envelope.Metadata["conversation_id"].(string); ok {
			threadID, threadField = conv, "metadata.conversation_id"
		}
	}
	if err := s.checkIDs("workflow", "execute", idField{"payload.workflow_id", p.WorkflowID}, idField{"payload.version", p.Version},
		idField{"payload.execution_id", p.ExecutionID}, idField{threadField, threadID}, idField{"payload.lane", p.Lane}); err != nil {
		return 0, nil, err
	}
	if p.ExecutionOptions.WaitForCompletion {
		if _, err := s.waitTimeout(r); err != nil {
			return 0, nil, err
		}
	}
	priority := 5
	if r.envelope.Priority != nil {
		priority = *r.envelope.Priority
	}
	tx, ok := db.(pgx.Tx)
	if !ok {
		return 0, nil, fmt.Errorf("execute needs a transaction")
	}
	x, err := s.engine.StartExecution(ctx, tx, engine.StartParams{
		TenantID: r.principal.tenantID, WorkflowID: p.WorkflowID, Version: p.Version, ExecutionID: p.ExecutionID,
		ThreadID: threadID, Lane: p.Lane, Input: p.Input, Context: p.Context,
		CorrelationID: r.correlationID, IdempotencyKey: r.envelope.MessageID,
		CallbackURL: p.ExecutionOptions.CallbackURL, CallbackEvents: p.ExecutionOptions.CallbackEvents, Priority: priority, LaneFirst: true,
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, renderExecution(x), nil
}

// waitForCompletion holds an execute request with
// execution_options.wait_for_completion until the execution is terminal or
// waiting, or metadata.timeout_ms passes, and answers 200 with its state.
func (s *Server) waitForCompletion(ctx context.Context, r *request, status int, data any) (int, any, error) {
	view, ok := data.(executionView)
	if !ok {
		return status, data, nil
	}
	var p executePayload
	_ = decodePayload(r.envelope, &p, "workflow", "execute")
	if !p.ExecutionOptions.WaitForCompletion {
		return status, data, nil
	}
	timeout, err := s.waitTimeout(r)
	if err != nil {
		return 0, nil, err // checked before the execution started
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		x, err := s.engine.GetExecution(context.WithoutCancel(ctx), s.pool, r.principal.tenantID, view.ExecutionID)
		if err != nil {
			return 0, nil, err
		}
		if engine.IsTerminal(x.Status) || x.Status == engine.StatusWaiting || ctx.Err() != nil {
			return http.StatusOK, renderExecution(x), nil
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

func (s *Server) getExecution(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	x, err := s.engine.GetExecution(ctx, db, r.principal.tenantID, r.PathValue("execution_id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, renderExecution(x), nil
}

func (s *Server) listExecutions(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	limit, cursor, err := pageParams(r, "workflow", "list_executions")
	if err != nil {
		return 0, nil, err
	}
	before, err := cursorInt(cursor, "workflow", "list_executions")
	if err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	if err := s.checkIDs("workflow", "list_executions", idField{"status", q.Get("status")}, idField{"workflow_id", q.Get("workflow_id")},
		idField{"thread_id", q.Get("thread_id")}, idField{"parent_execution_id", q.Get("parent_execution_id")}); err != nil {
		return 0, nil, err
	}
	xs, err := s.engine.ListExecutions(ctx, db, r.principal.tenantID, engine.ExecutionFilter{
		Status: q.Get("status"), WorkflowID: q.Get("workflow_id"), ThreadID: q.Get("thread_id"),
		ParentExecutionID: q.Get("parent_execution_id"), BeforeID: before, Limit: limit + 1,
	})
	if err != nil {
		return 0, nil, err
	}
	out := listView[executionView]{Items: []executionView{}}
	for i, x := range xs {
		if i == limit {
			out.NextCursor = encodeCursor(strconv.FormatInt(xs[i-1].ID, 10))
			break
		}
		out.Items = append(out.Items, renderExecution(x))
	}
	return http.StatusOK, out, nil
}

func (s *Server) executionLogs(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	limit, cursor, err := pageParams(r, "workflow", "logs")
	if err != nil {
		return 0, nil, err
	}
	after, err := cursorInt(cursor, "workflow", "logs")
	if err != nil {
		return 0, nil, err
	}
	entries, err := s.engine.Logs(ctx, db, r.principal.tenantID, r.PathValue("execution_id"), after, limit+1)
	if err != nil {
		return 0, nil, err
	}
	out := listView[logView]{Items: []logView{}}
	for i, l := range entries {
		if i == limit {
			out.NextCursor = encodeCursor(strconv.FormatInt(entries[i-1].EventID, 10))
			break
		}
		out.Items = append(out.Items, logView{EventID: l.EventID, Action: l.Action, Level: l.Level, Message: l.Message,
			NodeID: l.NodeID, Payload: l.Payload, CreatedAt: l.CreatedAt.UTC()})
	}
	return http.StatusOK, out, nil
}

type cancelPayload struct {
	Reason      string `json:"reason"`
	CancelledBy string `json:"cancelled_by"`
}

func (s *Server) cancelExecution(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	var p cancelPayload
	if err := decodePayload(r.envelope, &p, "workflow", "cancel"); err != nil {
		return 0, nil, err
	}
	if err := s.checkIDs("workflow", "cancel", idField{"payload.cancelled_by", p.CancelledBy}); err != nil {
		return 0, nil, err
	}
	tx, ok := db.(pgx.Tx)
	if !ok {
		return 0, nil, fmt.Errorf("cancel needs a transaction")
	}
	x, err := s.engine.CancelTx(ctx, tx, r.principal.tenantID, r.PathValue("execution_id"), p.CancelledBy, p.Reason)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, renderExecution(x), nil
}

func (s *Server) restartExecution(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	var p cancelPayload
	if err := decodePayload(r.envelope, &p, "workflow", "restart"); err != nil {
		return 0, nil, err
	}
	if err := s.checkIDs("workflow", "restart", idField{"payload.cancelled_by", p.CancelledBy}); err != nil {
		return 0, nil, err
	}
	tx, ok := db.(pgx.Tx)
	if !ok {
		return 0, nil, fmt.Errorf("restart needs a transaction")
	}
	x, err := s.engine.RestartTx(ctx, tx, r.principal.tenantID, r.PathValue("execution_id"), p.CancelledBy, p.Reason)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, renderExecution(x), nil
}
