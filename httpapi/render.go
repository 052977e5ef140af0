package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/engine/workflow"
)

type executionView struct {
	ExecutionID       string           `json:"execution_id"`
	TenantID          string           `json:"tenant_id"`
	WorkflowID        string           `json:"workflow_id"`
	Version           string           `json:"version"`
	Status            string           `json:"status"`
	Lane              string           `json:"lane"`
	ThreadID          *string          `json:"thread_id"`
	ParentExecutionID *string          `json:"parent_execution_id"`
	RestartedFrom     *string          `json:"restarted_from"`
	CorrelationID     string           `json:"correlation_id"`
	CurrentStep       *currentStepView `json:"current_step"`
	Progress          progressView     `json:"progress"`
	NodePath          []string         `json:"node_path"`
	Waiting           *waitingView     `json:"waiting"`
	Variables         map[string]any   `json:"variables"`
	Result            *resultView      `json:"result"`
	Error             *errorView       `json:"error"`
	CancelledBy       *string          `json:"cancelled_by"`
	CancelReason      *string          `json:"cancel_reason"`
	CreatedAt         time.Time        `json:"created_at"`
	StartedAt         *time.Time       `json:"started_at"`
	UpdatedAt         time.Time        `json:"updated_at"`
	CompletedAt       *time.Time       `json:"completed_at"`
}

type currentStepView struct {
	StepID    string     `json:"step_id"`
	StartedAt *time.Time `json:"started_at"`
}

type progressView struct {
	CompletedSteps int     `json:"completed_steps"`
	TotalSteps     int     `json:"total_steps"`
	Percentage     float64 `json:"percentage"`
}

type waitingView struct {
	WaitingFor   string          `json:"waiting_for"`
	WaitingUntil *time.Time      `json:"waiting_until"`
	WaitingData  json.RawMessage `json:"waiting_data"`
}

type resultView struct {
	ResultType    string          `json:"result_type"`
	ResultSummary *string         `json:"result_summary"`
	Variables     map[string]any  `json:"variables"`
	Output        json.RawMessage `json:"output"`
}

type errorView struct {
	Code         string         `json:"code"`
	Message      string         `json:"message"`
	FailedNodeID *string        `json:"failed_node_id"`
	Retryable    bool           `json:"retryable"`
	RetryAfterMS *int64         `json:"retry_after_ms"`
	Details      map[string]any `json:"details,omitempty"`
}

func renderExecution(x *engine.Execution) executionView {
	v := executionView{
		ExecutionID: x.ExecutionID, TenantID: x.TenantID, WorkflowID: x.WorkflowID, Version: x.Version,
		Status: string(x.Status), Lane: x.Lane, ThreadID: &x.ThreadID, ParentExecutionID: x.ParentExecutionID,
		RestartedFrom: x.RestartedFrom, CorrelationID: x.CorrelationID,
		Progress: progressView{CompletedSteps: x.StepsCompleted, TotalSteps: x.TotalSteps, Percentage: x.Percentage()},
		NodePath: x.NodePath, Variables: x.Variables, CancelledBy: x.CancelledBy, CancelReason: x.CancelReason,
		CreatedAt: x.CreatedAt.UTC(), StartedAt: utc(x.StartedAt), UpdatedAt: x.UpdatedAt.UTC(), CompletedAt: utc(x.CompletedAt),
	}
	terminal := engine.IsTerminal(x.Status)
	if !terminal && x.CurrentNodeID != nil {
		v.CurrentStep = &currentStepView{StepID: *x.CurrentNodeID, StartedAt: utc(x.CurrentStepAt)}
	}
	if x.Status == engine.StatusWaiting && x.WaitingFor != nil {
		v.Waiting = &waitingView{WaitingFor: *x.WaitingFor, WaitingUntil: utc(x.WaitingUntil), WaitingData: nullIfEmpty(x.WaitingData)}
	}
	if terminal && x.ResultType != nil {
		v.Result = &resultView{ResultType: *x.ResultType, ResultSummary: x.ResultSummary, Variables: x.Variables, Output: nullIfEmpty(x.Result)}
	}
	if x.ErrorCode != nil {
		ev := &errorView{Code: *x.ErrorCode, Message: deref(x.ErrorMessage), FailedNodeID: x.FailedNodeID}
		if d := x.ErrorDetails(); d != nil {
			ev.Details = d
			ev.Retryable, _ = d["retryable"].(bool)
			if ms, ok := d["retry_after_ms"].(float64); ok {
				n := int64(ms)
				ev.RetryAfterMS = &n
			}
		}
		v.Error = ev
	}
	return v
}

type definitionView struct {
	WorkflowID       string           `json:"workflow_id"`
	Version          string           `json:"version"`
	Name             string           `json:"name"`
	Description      string           `json:"description"`
	Lane             *string          `json:"lane"`
	DefaultTimeoutMS *int64           `json:"default_timeout_ms"`
	Nodes            []*workflow.Node `json:"nodes"`
	CreatedAt        time.Time        `json:"created_at"`
}

func renderDefinition(d *engine.StoredDefinition) definitionView {
	v := definitionView{
		WorkflowID: d.WorkflowID, Version: d.Version, Name: d.Name, Description: d.Description,
		DefaultTimeoutMS: d.DefaultTimeoutMS, Nodes: d.Nodes, CreatedAt: d.CreatedAt.UTC(),
	}
	if d.Lane != "" {
		v.Lane = &d.Lane
	}
	return v
}

type listView[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

type logView struct {
	EventID   int64          `json:"event_id"`
	Action    string         `json:"action"`
	Level     string         `json:"level"`
	Message   string         `json:"message"`
	NodeID    *string        `json:"node_id"`
	Payload   map[string]any `json:"payload"`
	CreatedAt time.Time      `json:"created_at"`
}

// pageParams reads ?limit= (default 50, at most 500) and ?cursor=.
func pageParams(r *request, domain, action string) (limit int, cursor string, err error) {
	limit = 50
	if s := r.URL.Query().Get("limit"); s != "" {
		n, convErr := strconv.Atoi(s)
		if convErr != nil || n < 1 || n > 500 {
			return 0, "", newAPIError(http.StatusBadRequest, domain+"."+action+".invalid_request", "limit must be an integer from 1 to 500").with("field", "limit")
		}
		limit = n
	}
	if s := r.URL.Query().Get("cursor"); s != "" {
		raw, decErr := base64.RawURLEncoding.DecodeString(s)
		if decErr != nil || len(raw) == 0 {
			return 0, "", newAPIError(http.StatusBadRequest, domain+"."+action+".invalid_request", "cursor is not one this API gave out").with("field", "cursor")
		}
		cursor = string(raw)
	}
	return limit, cursor, nil
}

// keyedPage renders a page read with one row more than limit: that row
// says a next page exists, which continues after the key of the page's last
// row.
func keyedPage[T, V any](rows []T, limit int, key func(T) string, view func(T) V) listView[V] {
	out := listView[V]{Items: make([]V, 0, min(len(rows), limit))}
	for i, row := range rows {
		if i == limit {
			out.NextCursor = encodeCursor(key(rows[i-1]))
			break
		}
		out.Items = append(out.Items, view(row))
	}
	return out
}

func encodeCursor(s string) *string {
	c := base64.RawURLEncoding.EncodeToString([]byte(s))
	return &c
}

func cursorInt(cursor string, domain, action string) (int64, error) {
	if cursor == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(cursor, 10, 64)
	if err != nil || n <= 0 {
		return 0, newAPIError(http.StatusBadRequest, domain+"."+action+".invalid_request", "cursor is not one this API gave out").with("field", "cursor")
	}
	return n, nil
}

// maxOffset is the largest offset an offset cursor may hold: the
// monitoring queries take their OFFSET as a Postgres integer, so no page
// they serve starts past it.
const maxOffset = math.MaxInt32

// cursorOffset reads an offset cursor (the monitoring lists'): a whole
// number from 1 to maxOffset. Anything else, a number past maxOffset
// included, is a cursor this API never gave out and gets 400; it is never
// cut down to a smaller offset.
func cursorOffset(cursor string, domain, action string) (int32, error) {
	n, err := cursorInt(cursor, domain, action)
	if err != nil {
		return 0, err
	}
	if n > maxOffset {
		return 0, newAPIError(http.StatusBadRequest, domain+"."+action+".invalid_request",
			"cursor is not one this API gave out: it is past the last row any page can start at").with("field", "cursor")
	}
	return int32(n), nil
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func nullIfEmpty(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
