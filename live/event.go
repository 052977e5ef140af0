package live

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/batonrun/baton/db/dbsqlc"
)

// Event is one streamed event with its WebSocket message already encoded.
type Event struct {
	// ID is the event's id (execution_event.id); ids increase.
	ID int64
	// TenantID owns the event.
	TenantID string
	// ExecutionID, WorkflowID and ThreadID are the external ids the event
	// is about, for filtering.
	ExecutionID, WorkflowID, ThreadID string
	// Message is the WebSocket message, as JSON.
	Message []byte
}

// Filter selects a subscriber's events. TenantID is required; the other
// fields, when set, must all match.
type Filter struct {
	TenantID, ExecutionID, WorkflowID, ThreadID string
}

func (f *Filter) match(ev *Event) bool {
	return ev.TenantID == f.TenantID &&
		(f.ExecutionID == "" || ev.ExecutionID == f.ExecutionID) &&
		(f.WorkflowID == "" || ev.WorkflowID == f.WorkflowID) &&
		(f.ThreadID == "" || ev.ThreadID == f.ThreadID)
}

// message is the WebSocket message (docs/api.md, "WebSocket").
type message struct {
	EventID       int64           `json:"event_id"`
	Type          messageType     `json:"type"`
	CreatedAt     time.Time       `json:"created_at"`
	TenantID      string          `json:"tenant_id"`
	SourceService string          `json:"source_service"`
	CorrelationID *string         `json:"correlation_id"`
	Metadata      metadata        `json:"metadata"`
	Payload       json.RawMessage `json:"payload"`
}

type messageType struct {
	Domain string `json:"domain"`
	Action string `json:"action"`
}

type metadata struct {
	WorkflowID  string  `json:"workflow_id"`
	ExecutionID string  `json:"execution_id"`
	SessionID   string  `json:"session_id"`
	ThreadID    string  `json:"thread_id"`
	NodeID      *string `json:"node_id,omitempty"`
}

// eventFromRow builds an Event from a row of EventStreamRange.
func eventFromRow(r *dbsqlc.EventStreamRangeRow) (*Event, error) {
	domain, action, _ := strings.Cut(r.Action, ".")
	var corr *string
	if r.CorrelationID != "" {
		corr = &r.CorrelationID
	}
	payload := r.Payload
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	}
	b, err := json.Marshal(message{
		EventID: r.ID, Type: messageType{Domain: domain, Action: action}, CreatedAt: r.CreatedAt.UTC(),
		TenantID: r.TenantID, SourceService: "baton", CorrelationID: corr,
		Metadata: metadata{WorkflowID: r.WorkflowID, ExecutionID: r.ExecutionKey, SessionID: r.ThreadKey, ThreadID: r.ThreadKey, NodeID: r.NodeID},
		Payload:  payload,
	})
	if err != nil {
		return nil, fmt.Errorf("encoding event %d: %w", r.ID, err)
	}
	return &Event{ID: r.ID, TenantID: r.TenantID, ExecutionID: r.ExecutionKey, WorkflowID: r.WorkflowID, ThreadID: r.ThreadKey, Message: b}, nil
}
