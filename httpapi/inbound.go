package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine"
)

type inboundPayload struct {
	Text      string `json:"text"`
	MessageID string `json:"message_id"`
	Channel   string `json:"channel"`
}

// threadInbound routes a user's message (POST /threads/{id}/messages); the
// message is stored in the request's transaction before the 202.
func (s *Server) threadInbound(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	var p inboundPayload
	if err := decodePayload(r.envelope, &p, "thread", "inbound"); err != nil {
		return 0, nil, err
	}
	if err := s.checkIDs("thread", "inbound", idField{"payload.message_id", p.MessageID}, idField{"payload.channel", p.Channel}); err != nil {
		return 0, nil, err
	}
	tx, ok := db.(pgx.Tx)
	if !ok {
		return 0, nil, fmt.Errorf("thread.inbound needs a transaction")
	}
	res, err := s.engine.ReceiveInboundTx(ctx, tx, engine.InboundParams{
		TenantID: r.principal.tenantID, ThreadID: r.PathValue("thread_id"), Text: p.Text, MessageID: p.MessageID, Channel: p.Channel,
	})
	// The input of the run a message starts is its text.
	renameField(err, "payload.text", "payload.input")
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, res, nil
}

// threadQueue sets (PUT) or removes (DELETE) the session's queue override.
func (s *Server) threadQueue(reset bool) func(context.Context, *request, dbsqlc.DBTX) (int, any, error) {
	return func(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
		var settings *engine.QueueSettings
		if !reset {
			settings = &engine.QueueSettings{}
			if err := decodePayload(r.envelope, settings, "thread", "queue"); err != nil {
				return 0, nil, err
			}
			if *settings == (engine.QueueSettings{}) {
				return 0, nil, newAPIError(http.StatusBadRequest, "thread.queue.invalid_request",
					"payload must set at least one of mode, debounce_ms, cap and drop (DELETE resets the settings)").with("field", "payload")
			}
		}
		tx, ok := db.(pgx.Tx)
		if !ok {
			return 0, nil, fmt.Errorf("thread.queue needs a transaction")
		}
		t, err := s.engine.SetQueueSettingsTx(ctx, tx, r.principal.tenantID, r.PathValue("thread_id"), settings)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, renderThread(t), nil
	}
}
