package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine"
)

// publishEventPayload is the payload of event.publish (docs/api.md).
type publishEventPayload struct {
	EventType   string         `json:"event_type"`
	EventID     string         `json:"event_id"`
	ExecutionID string         `json:"execution_id"`
	ThreadID    string         `json:"thread_id"`
	Data        map[string]any `json:"data"`
}

func (s *Server) publishEvent(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	var p publishEventPayload
	if err := decodePayload(r.envelope, &p, "event", "publish"); err != nil {
		return 0, nil, err
	}
	dataChannel, _ := p.Data["channel"].(string)
	dataEventID, _ := p.Data["event_id"].(string)
	if err := s.checkIDs("event", "publish", idField{"payload.event_type", p.EventType}, idField{"payload.event_id", p.EventID},
		idField{"payload.execution_id", p.ExecutionID}, idField{"payload.thread_id", p.ThreadID},
		idField{"payload.data.channel", dataChannel}, idField{"payload.data.event_id", dataEventID}); err != nil {
		return 0, nil, err
	}
	tx, ok := db.(pgx.Tx)
	if !ok {
		return 0, nil, fmt.Errorf("publishing an event needs a transaction")
	}
	res, err := s.engine.PublishEventTx(ctx, tx, engine.PublishEventParams{
		TenantID: r.principal.tenantID, EventType: p.EventType, EventID: p.EventID,
		ExecutionID: p.ExecutionID, ThreadID: p.ThreadID, Data: p.Data,
	})
	// A MESSAGE_RECEIVED's text went to the inbound router, whose problems
	// (a refused /queue command, a run whose input would be too large)
	// name payload.text.
	renameField(err, "payload.data.text", "payload.text", "payload.input")
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, res, nil
}

// inputPayload is the payload of workflow.input.
type inputPayload struct {
	InputData map[string]any `json:"input_data"`
	NodeID    string         `json:"node_id"`
}

func (s *Server) provideInput(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	var p inputPayload
	if err := decodePayload(r.envelope, &p, "workflow", "input"); err != nil {
		return 0, nil, err
	}
	if err := s.checkIDs("workflow", "input", idField{"payload.node_id", p.NodeID}); err != nil {
		return 0, nil, err
	}
	if p.InputData == nil {
		return 0, nil, newAPIError(http.StatusBadRequest, "workflow.input.invalid_request", "payload.input_data is required (an object)").with("field", "payload.input_data")
	}
	requestID, isString := r.envelope.Metadata["input_request_id"].(string)
	if !isString && r.envelope.Metadata["input_request_id"] != nil {
		return 0, nil, newAPIError(http.StatusBadRequest, "workflow.input.invalid_request", "metadata.input_request_id must be a string").with("field", "metadata.input_request_id")
	}
	tx, ok := db.(pgx.Tx)
	if !ok {
		return 0, nil, fmt.Errorf("input needs a transaction")
	}
	x, err := s.engine.ProvideInputTx(ctx, tx, engine.InputParams{
		TenantID: r.principal.tenantID, ExecutionID: r.PathValue("execution_id"), NodeID: p.NodeID, Input: p.InputData,
		InputRequestID: requestID,
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, renderExecution(x), nil
}
