package httpapi

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine"
)

type threadLockView struct {
	ActiveExecutionID *string    `json:"active_execution_id"`
	ExecutionLockedAt *time.Time `json:"execution_locked_at"`
	LockMinutes       *float64   `json:"lock_minutes"`
	Stale             bool       `json:"stale"`
}

type threadView struct {
	ThreadID          string                        `json:"thread_id"`
	TenantID          string                        `json:"tenant_id"`
	Channel           *string                       `json:"channel"`
	Contact           *string                       `json:"contact"`
	DefaultWorkflowID *string                       `json:"default_workflow_id"`
	Lock              threadLockView                `json:"lock"`
	QueuedCount       int                           `json:"queued_count"`
	Queue             engine.EffectiveQueueSettings `json:"queue"`
	CreatedAt         time.Time                     `json:"created_at"`
	UpdatedAt         time.Time                     `json:"updated_at"`
}

func renderThread(t *engine.Thread) threadView {
	v := threadView{
		ThreadID: t.ThreadID, TenantID: t.TenantID, DefaultWorkflowID: t.DefaultWorkflowID,
		Lock:        threadLockView{ActiveExecutionID: t.ActiveExecutionID, ExecutionLockedAt: utc(t.ExecutionLockedAt), Stale: t.Stale},
		QueuedCount: t.QueuedCount, Queue: t.Queue, CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.UpdatedAt.UTC(),
	}
	if t.Channel != "api" {
		v.Channel, v.Contact = &t.Channel, &t.Contact
	}
	if t.ExecutionLockedAt != nil {
		m := math.Round(time.Since(*t.ExecutionLockedAt).Minutes()*100) / 100
		v.Lock.LockMinutes = &m
	}
	return v
}

type threadUpsertPayload struct {
	ThreadID          string                `json:"thread_id"`
	Channel           string                `json:"channel"`
	Contact           string                `json:"contact"`
	DefaultWorkflowID string                `json:"default_workflow_id"`
	Queue             *engine.QueueSettings `json:"queue"`
}

func (s *Server) upsertThread(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	var p threadUpsertPayload
	if err := decodePayload(r.envelope, &p, "thread", "upsert"); err != nil {
		return 0, nil, err
	}
	if err := s.checkIDs("thread", "upsert", idField{"payload.thread_id", p.ThreadID}, idField{"payload.channel", p.Channel},
		idField{"payload.contact", p.Contact}, idField{"payload.default_workflow_id", p.DefaultWorkflowID}); err != nil {
		return 0, nil, err
	}
	t, created, err := s.engine.UpsertThread(ctx, db, engine.ThreadUpsert{
		TenantID: r.principal.tenantID, ThreadID: p.ThreadID, Channel: p.Channel, Contact: p.Contact,
		DefaultWorkflowID: p.DefaultWorkflowID, Queue: p.Queue,
	})
	if err != nil {
		return 0, nil, err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return status, renderThread(t), nil
}

func (s *Server) getThread(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	t, err := s.engine.GetThread(ctx, db, r.principal.tenantID, r.PathValue("thread_id"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, renderThread(t), nil
}

type threadMessageView struct {
	// ID is Baton's id of the message, unique, in thread order.
	ID string `json:"id"`
	// MessageID is the id a client knows the message by: an inbound
	// message's message_id (the sender's, or the one Baton gave it), an
	// outbound message's id (as its thread.message_* events carry it).
	MessageID   string     `json:"message_id"`
	ThreadID    string     `json:"thread_id"`
	Direction   string     `json:"direction"`
	ExecutionID *string    `json:"execution_id"`
	Text        string     `json:"text"`
	Status      string     `json:"status"`
	CreatedAt   time.Time  `json:"created_at"`
	DeliveredAt *time.Time `json:"delivered_at"`
}

func (s *Server) threadMessages(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	limit, cursor, err := pageParams(r, "thread", "messages")
	if err != nil {
		return 0, nil, err
	}
	after, err := cursorInt(cursor, "thread", "messages")
	if err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	if err := s.checkIDs("thread", "messages", idField{"direction", q.Get("direction")}, idField{"status", q.Get("status")}); err != nil {
		return 0, nil, err
	}
	msgs, err := s.engine.ListThreadMessages(ctx, db, r.principal.tenantID, r.PathValue("thread_id"), engine.ThreadMessageFilter{
		Direction: q.Get("direction"), Status: q.Get("status"), AfterID: after, Limit: limit + 1,
	})
	if err != nil {
		return 0, nil, err
	}
	key := func(m engine.ThreadMessage) string { return strconv.FormatInt(m.ID, 10) }
	return http.StatusOK, keyedPage(msgs, limit, key, renderThreadMessage), nil
}

func renderThreadMessage(m engine.ThreadMessage) threadMessageView {
	id := strconv.FormatInt(m.ID, 10)
	v := threadMessageView{
		ID: id, MessageID: id, ThreadID: m.ThreadID, Direction: m.Direction, ExecutionID: m.ExecutionID,
		Text: m.Body, Status: m.Status, CreatedAt: m.CreatedAt.UTC(), DeliveredAt: utc(m.DeliveredAt),
	}
	if m.ExternalID != nil {
		v.MessageID = *m.ExternalID
	}
	return v
}

type lockView struct {
	ThreadID          string    `json:"thread_id"`
	ActiveExecutionID string    `json:"active_execution_id"`
	ExecutionLockedAt time.Time `json:"execution_locked_at"`
	LockMinutes       float64   `json:"lock_minutes"`
}

func (s *Server) listLocks(stale bool) func(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	return func(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
		limit, cursor, err := pageParams(r, "monitor", "locks")
		if err != nil {
			return 0, nil, err
		}
		locks, err := s.engine.ListLocks(ctx, db, r.principal.tenantID, engine.LockPage{StaleOnly: stale, After: cursor, Limit: limit + 1})
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, keyedPage(locks, limit, engine.ActiveLock.Key, func(l engine.ActiveLock) lockView {
			return lockView{ThreadID: l.ThreadID, ActiveExecutionID: l.ActiveExecutionID,
				ExecutionLockedAt: l.ExecutionLockedAt.UTC(), LockMinutes: l.LockMinutes}
		}), nil
	}
}

func (s *Server) cleanupLocks(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	tx, ok := db.(pgx.Tx)
	if !ok {
		return 0, nil, fmt.Errorf("cleanup needs a transaction")
	}
	cleared, err := s.engine.CleanupStaleLocks(ctx, tx, r.principal.tenantID)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"released": len(cleared), "thread_ids": cleared}, nil
}
