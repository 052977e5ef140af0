package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// Event actions written to execution_event (docs/api.md, "WebSocket").
const (
	EventStarted          = "workflow.started"
	EventStepUpdate       = "workflow.step_update"
	EventCompleted        = "workflow.completed"
	EventMessagePending   = "thread.message_pending"
	EventMessageDelivered = "thread.message_delivered"
	EventTemplateWarning  = "workflow.template_warning"
	EventWaiting          = "workflow.waiting"
	EventInputRequest     = "workflow.input_request"
	EventWaitProgress     = "workflow.wait_progress"
	EventWaitTimeout      = "workflow.wait_timeout"
	EventResumed          = "workflow.resumed"
	// EventStepRetry is a failed tool call that will be retried.
	EventStepRetry = "workflow.step_retry"
)

// StreamedActions are the event actions the WebSocket stream serves
// (docs/api.md, "WebSocket"); other rows of the event log (such as
// template warnings) stay in the execution's log only. Actions the engine
// does not produce yet are listed so that they stream as soon as it does.
var StreamedActions = []string{
	EventStarted, EventStepUpdate, "workflow.waiting", "workflow.input_request", EventCompleted,
	"thread.typing", "thread.message_queued", EventMessageDelivered, "thread.lock_acquired", "thread.lock_released",
}

// LogEntry is one row of an execution's event log.
type LogEntry struct {
	// EventID increases with every event.
	EventID int64
	// Action is the event's domain.action, such as "workflow.step_update".
	Action string
	// Level is debug, info, warn or error.
	Level string
	// Message is a human-readable line.
	Message string
	// NodeID is the node the event is about, if any.
	NodeID *string
	// Payload carries the event's data.
	Payload map[string]any
	// CreatedAt is when the event was written.
	CreatedAt time.Time
}

// eventLog collects the events of one transaction and writes them at once.
type eventLog struct {
	tenantID    string
	executionID int64
	rows        dbsqlc.EventInsertManyParams
	// after holds the transaction's measurements, reported to Metrics by
	// the log's owner once the transaction has committed.
	after observations
}

func (l *eventLog) add(action, level, nodeID, message string, payload map[string]any) {
	if payload == nil {
		payload = map[string]any{}
	}
	l.addValue(action, level, nodeID, message, payload)
}

// addValue is add with a payload of any type that marshals to a JSON
// object, such as *stepUpdate.
func (l *eventLog) addValue(action, level, nodeID, message string, payload any) {
	r := &l.rows
	r.TenantIds = append(r.TenantIds, l.tenantID)
	r.ExecutionIds = append(r.ExecutionIds, l.executionID)
	r.Actions = append(r.Actions, action)
	r.Levels = append(r.Levels, level)
	r.Messages = append(r.Messages, message)
	r.NodeIds = append(r.NodeIds, nodeID) // empty stores NULL
	r.Payloads = append(r.Payloads, mustJSON(payload))
}

// write inserts the collected events in tx. The table's trigger (migration
// 00003) numbers each row after its transaction has an xid, which the live
// stream relies on; the stream finds new rows by polling (package live).
func (l *eventLog) write(ctx context.Context, q *dbsqlc.Queries, tx pgx.Tx) error {
	if len(l.rows.Actions) == 0 {
		return nil
	}
	// Nothing reads the insert's result: it goes with the transaction's next
	// statement or its commit.
	if err := q.EventInsertMany(ctx, later(tx, explainEventsWrite), &l.rows); err != nil {
		return err
	}
	l.rows = dbsqlc.EventInsertManyParams{}
	return nil
}

func explainEventsWrite(err error) error { return fmt.Errorf("writing execution events: %w", err) }

// Logs returns an execution's event log, oldest first, after the given
// event id.
func (e *Engine) Logs(ctx context.Context, db dbsqlc.DBTX, tenantID, executionID string, afterID int64, limit int) ([]LogEntry, error) {
	row, err := e.q.ExecutionGetByExecutionID(ctx, db, &dbsqlc.ExecutionGetByExecutionIDParams{TenantID: tenantID, ExecutionID: executionID})
	if err != nil {
		return nil, notFound(err)
	}
	rows, err := e.q.EventListByExecution(ctx, db, &dbsqlc.EventListByExecutionParams{ExecutionID: row.ID, AfterID: afterID, Max: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	out := make([]LogEntry, 0, len(rows))
	for _, r := range rows {
		entry := LogEntry{EventID: r.ID, Action: r.Action, Level: r.Level, Message: r.Message, NodeID: r.NodeID, CreatedAt: r.CreatedAt}
		entry.Payload = map[string]any{}
		_ = jsonUnmarshal(r.Payload, &entry.Payload)
		out = append(out, entry)
	}
	return out, nil
}
