package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// QueueSettings are a session's inbound queue settings.
type QueueSettings struct {
	// Mode is steer, followup, collect, steer-backlog, interrupt or queue.
	Mode string `json:"mode,omitempty"`
	// DebounceMS is the quiet window before a queued run starts.
	DebounceMS *int `json:"debounce_ms,omitempty"`
	// Cap is the most messages queued per session.
	Cap *int `json:"cap,omitempty"`
	// Drop is old, new or summarize.
	Drop string `json:"drop,omitempty"`
}

// DefaultQueueSettings are the built-in settings (collect,
// debounce 1000 ms, cap 20, drop summarize).
var DefaultQueueSettings = EffectiveQueueSettings{Mode: "collect", DebounceMS: 1000, Cap: 20, Drop: "summarize",
	Sources: map[string]string{"mode": "default", "debounce_ms": "default", "cap": "default", "drop": "default"}}

// EffectiveQueueSettings are the settings in force and where each comes
// from (default, global, channel or session).
type EffectiveQueueSettings struct {
	Mode       string            `json:"mode"`
	DebounceMS int               `json:"debounce_ms"`
	Cap        int               `json:"cap"`
	Drop       string            `json:"drop"`
	Sources    map[string]string `json:"sources"`
}

// Thread is a conversation thread with its lock state.
type Thread struct {
	ID                int64
	TenantID          string
	ThreadID          string
	Channel           string
	Contact           string
	DefaultWorkflowID *string
	// ActiveExecutionID is the external id of the lock holder, if any.
	ActiveExecutionID *string
	ExecutionLockedAt *time.Time
	// Stale says the lock is older than the lock timeout.
	Stale       bool
	QueuedCount int
	Queue       EffectiveQueueSettings
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// ThreadUpsert describes a thread to create or update by (channel, contact).
type ThreadUpsert struct {
	TenantID          string
	ThreadID          string
	Channel           string
	Contact           string
	DefaultWorkflowID string
	Queue             *QueueSettings
}

// UpsertThread creates the thread of a (channel, contact), or updates its
// default workflow and queue settings. It reports whether it was created.
// A thread_id given for a contact whose thread has another id, or one that
// another contact's thread has, is a ConflictError; a default workflow the
// tenant has not defined is an InputError. Either changes nothing.
func (e *Engine) UpsertThread(ctx context.Context, db dbsqlc.DBTX, p ThreadUpsert) (*Thread, bool, error) {
	if err := e.checkThreadUpsert(ctx, db, p); err != nil {
		return nil, false, err
	}
	given := p.ThreadID
	if p.ThreadID == "" {
		p.ThreadID = p.Channel + ":" + p.Contact
	}
	var def *string
	if p.DefaultWorkflowID != "" {
		def = &p.DefaultWorkflowID
	}
	created := true
	row, err := e.q.ThreadInsertByContact(ctx, db, &dbsqlc.ThreadInsertByContactParams{
		TenantID: p.TenantID, ThreadID: p.ThreadID, Channel: p.Channel, Contact: p.Contact, DefaultWorkflowID: def,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		created = false
		params := &dbsqlc.ThreadUpdateByContactParams{TenantID: p.TenantID, Channel: p.Channel, Contact: p.Contact, DefaultWorkflowID: def}
		if given != "" {
			params.ThreadID = &given
		}
		row, err = e.q.ThreadUpdateByContact(ctx, db, params)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, e.threadUpsertConflict(ctx, db, p)
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("upserting thread: %w", err)
	}
	if p.Queue != nil {
		if err := e.storeQueueSettings(ctx, db, row.ID, p.Queue); err != nil {
			return nil, false, fmt.Errorf("storing queue settings: %w", err)
		}
	}
	t, err := e.GetThread(ctx, db, p.TenantID, row.ThreadID)
	return t, created, err
}

// checkThreadUpsert checks what an upsert names before anything is written:
// channel and contact, the queue settings and the default workflow.
func (e *Engine) checkThreadUpsert(ctx context.Context, db dbsqlc.DBTX, p ThreadUpsert) error {
	if p.Channel == "" {
		return &InputError{Field: "payload.channel", Message: "is required"}
	}
	if p.Contact == "" {
		return &InputError{Field: "payload.contact", Message: "is required"}
	}
	if p.Queue != nil {
		if err := e.checkQueueSettings(p.Queue, "payload.queue."); err != nil {
			return err
		}
	}
	if p.DefaultWorkflowID == "" {
		return nil
	}
	_, err := e.q.DefinitionLatestID(ctx, db, &dbsqlc.DefinitionLatestIDParams{TenantID: p.TenantID, WorkflowID: p.DefaultWorkflowID})
	if errors.Is(err, pgx.ErrNoRows) {
		return &InputError{Field: "payload.default_workflow_id", Message: fmt.Sprintf("workflow %q is not defined", p.DefaultWorkflowID)}
	}
	if err != nil {
		return fmt.Errorf("looking up default workflow %s: %w", p.DefaultWorkflowID, err)
	}
	return nil
}

// threadUpsertConflict says why an upsert found neither a thread to create
// nor one to update: the contact's thread has another id than the one
// given, or the thread id belongs to another contact.
func (e *Engine) threadUpsertConflict(ctx context.Context, db dbsqlc.DBTX, p ThreadUpsert) error {
	existing, err := e.q.ThreadIDByContact(ctx, db, &dbsqlc.ThreadIDByContactParams{TenantID: p.TenantID, Channel: p.Channel, Contact: p.Contact})
	if err == nil {
		return &ConflictError{Code: "thread.upsert.contact_has_thread", Message: fmt.Sprintf(
			"channel %s contact %s already has thread %q; a thread's id does not change", p.Channel, p.Contact, existing),
			Details: map[string]any{"field": "payload.thread_id", "thread_id": existing}}
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("looking up the contact's thread: %w", err)
	}
	return &ConflictError{Code: "thread.upsert.thread_id_in_use", Message: fmt.Sprintf("thread_id %q belongs to another channel and contact", p.ThreadID),
		Details: map[string]any{"field": "payload.thread_id"}}
}

// GetThread returns a thread of the tenant with its lock state, queued
// count and effective queue settings.
func (e *Engine) GetThread(ctx context.Context, db dbsqlc.DBTX, tenantID, threadID string) (*Thread, error) {
	r, err := e.q.ThreadViewByThreadID(ctx, db, &dbsqlc.ThreadViewByThreadIDParams{TenantID: tenantID, ThreadID: threadID})
	if err != nil {
		return nil, notFound(err)
	}
	t := &Thread{
		ID: r.Thread.ID, TenantID: r.Thread.TenantID, ThreadID: r.Thread.ThreadID, Channel: r.Thread.Channel,
		Contact: r.Thread.Contact, DefaultWorkflowID: r.Thread.DefaultWorkflowID, ActiveExecutionID: r.HolderKey,
		ExecutionLockedAt: r.Thread.ExecutionLockedAt, QueuedCount: int(r.QueuedCount),
		CreatedAt: r.Thread.CreatedAt, UpdatedAt: r.Thread.UpdatedAt,
	}
	t.Stale = t.ExecutionLockedAt != nil && time.Since(*t.ExecutionLockedAt) > e.cfg.LockTimeout
	t.Queue = e.effectiveQueue(r.Thread.QueueSettings, r.Thread.Channel)
	return t, nil
}

// ThreadMessage is a message of a thread as clients see it.
type ThreadMessage struct {
	ID int64
	// ExternalID is an inbound message's id: the sender's message_id, or
	// the one Baton gave it. Nil for outbound messages.
	ExternalID  *string
	ThreadID    string
	Direction   string
	ExecutionID *string
	Body        string
	Status      string
	CreatedAt   time.Time
	DeliveredAt *time.Time
}

// ThreadMessageFilter narrows ListThreadMessages.
type ThreadMessageFilter struct {
	Direction, Status string
	// AfterID continues a listing after the id of its last item.
	AfterID int64
	Limit   int
}

// MessageStatuses are the statuses a thread message can have. Outbound:
// queued (waiting for the thread's lock), pending (accepted for delivery),
// delivered, dropped (its execution was cancelled while it was queued).
// Inbound: received (waiting in the session's queue),
// steer (handed to the active run), consumed (taken by a run), dropped (by
// the queue's cap), command (a /queue command).
var MessageStatuses = []string{"queued", "pending", "delivered", "dropped", "received", "steer", "consumed", "command"}

// check rejects a direction or status no message has.
func (f ThreadMessageFilter) check() error {
	if f.Direction != "" && f.Direction != "in" && f.Direction != "out" {
		return &InputError{Field: "direction", Message: "must be in or out"}
	}
	if f.Status != "" && !slices.Contains(MessageStatuses, f.Status) {
		return &InputError{Field: "status", Message: "must be one of " + strings.Join(MessageStatuses, ", ")}
	}
	return nil
}

// ListThreadMessages returns a thread's messages, oldest first.
func (e *Engine) ListThreadMessages(ctx context.Context, db dbsqlc.DBTX, tenantID, threadID string, f ThreadMessageFilter) ([]ThreadMessage, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	t, err := e.q.ThreadGetByThreadID(ctx, db, &dbsqlc.ThreadGetByThreadIDParams{TenantID: tenantID, ThreadID: threadID})
	if err != nil {
		return nil, notFound(err)
	}
	params := &dbsqlc.MessageListByThreadParams{ThreadID: t.ID, AfterID: f.AfterID, Max: int32(f.Limit)}
	if f.Direction != "" {
		params.Direction = &f.Direction
	}
	if f.Status != "" {
		params.Status = &f.Status
	}
	rows, err := e.q.MessageListByThread(ctx, db, params)
	if err != nil {
		return nil, fmt.Errorf("listing thread messages: %w", err)
	}
	out := make([]ThreadMessage, 0, len(rows))
	for _, m := range rows {
		out = append(out, ThreadMessage{ID: m.ID, ExternalID: m.ExternalID, ThreadID: t.ThreadID, Direction: m.Direction, ExecutionID: m.ExecutionKey,
			Body: m.Body, Status: m.Status, CreatedAt: m.CreatedAt, DeliveredAt: m.DeliveredAt})
	}
	return out, nil
}

// ActiveLock is a row of monitor_active_locks.
type ActiveLock struct {
	ThreadID          string
	ActiveExecutionID string
	ExecutionLockedAt time.Time
	LockMinutes       float64
}

// Key is where a listing that ends with this lock continues (LockPage.After).
func (l ActiveLock) Key() string {
	return strconv.FormatInt(l.ExecutionLockedAt.UnixMicro(), 10) + ":" + l.ThreadID
}

// LockPage selects a page of ListLocks.
type LockPage struct {
	// StaleOnly keeps the locks older than the lock timeout.
	StaleOnly bool
	// After is the Key of the last lock of the previous page; empty starts
	// at the oldest lock.
	After string
	// Limit is the most locks returned; 0 is no limit.
	Limit int
}

// ListLocks returns a page of the tenant's held thread locks, oldest first
// (by the time the lock was taken, then by thread id). A lock taken again
// while a client pages moves to its new place in that order.
func (e *Engine) ListLocks(ctx context.Context, db dbsqlc.DBTX, tenantID string, page LockPage) ([]ActiveLock, error) {
	params := &dbsqlc.ActiveLockListParams{TenantID: tenantID, StaleOnly: page.StaleOnly, LockTimeoutSeconds: e.cfg.LockTimeout.Seconds(), Max: pageSize(page.Limit)}
	if page.After != "" {
		micros, thread, ok := strings.Cut(page.After, ":")
		n, err := strconv.ParseInt(micros, 10, 64)
		if !ok || err != nil {
			return nil, &InputError{Field: "cursor", Message: "is not one this API gave out"}
		}
		at := time.UnixMicro(n)
		params.AfterLockedAt, params.AfterThreadID = &at, thread
	}
	rows, err := e.q.ActiveLockList(ctx, db, params)
	if err != nil {
		return nil, fmt.Errorf("listing locks: %w", err)
	}
	out := make([]ActiveLock, 0, len(rows))
	for _, r := range rows {
		l := ActiveLock{ThreadID: r.ThreadID, ActiveExecutionID: r.ActiveExecutionID, LockMinutes: r.LockMinutes}
		if r.ExecutionLockedAt != nil {
			l.ExecutionLockedAt = *r.ExecutionLockedAt
		}
		out = append(out, l)
	}
	return out, nil
}

// CleanupStaleLocks clears the tenant's stale and orphan locks (the rule
// of cleanup_stale_locks(), for one tenant) and arms their threads' drains,
// in tx. It returns the cleared threads. Other tenants' locks are left to
// them and to the periodic reaper (ReapLocks).
func (e *Engine) CleanupStaleLocks(ctx context.Context, tx pgx.Tx, tenantID string) ([]string, error) {
	rows, err := e.q.ThreadCleanupStaleLocksByTenant(ctx, tx, &dbsqlc.ThreadCleanupStaleLocksByTenantParams{
		TenantID: tenantID, LockTimeoutSeconds: e.cfg.LockTimeout.Seconds(),
	})
	if err != nil {
		return nil, fmt.Errorf("cleaning up stale locks: %w", err)
	}
	cleared := make([]string, 0, len(rows))
	for _, r := range rows {
		e.WarnContext(ctx, "Thread lock is stale, clearing", "thread_id", r.ThreadID, "tenant_id", tenantID)
		if err := e.q.ThreadForceRearmDrain(ctx, tx, r.ID); err != nil {
			return nil, fmt.Errorf("arming drain: %w", err)
		}
		if err := e.jobs.InsertDrain(ctx, tx, r.ID); err != nil {
			return nil, fmt.Errorf("enqueueing drain: %w", err)
		}
		cleared = append(cleared, r.ThreadID)
	}
	return cleared, nil
}

// startThread gives a start its thread, and reports whether the start
// created it. A thread whose id the start's reservation drew (res.ThreadID)
// is fresh: its insert is held back to go with the run's other writes, and
// its row is the one the insert writes. A held session's thread is read
// again by its id (tx holds it; what tx wrote to it since counts). Any
// other is ensureThread's.
func (e *Engine) startThread(ctx context.Context, tx pgx.Tx, tenantID, threadKey string, res *reservation, held *sessionCtx) (*dbsqlc.Thread, bool, error) {
	if held != nil {
		t, err := e.lockThread(ctx, tx, held.thread.ID)
		return t, false, err
	}
	if res == nil || res.ThreadID == 0 {
		return e.ensureThread(ctx, tx, tenantID, threadKey)
	}
	p := &dbsqlc.ThreadInsertNewParams{ID: res.ThreadID, TenantID: tenantID, ThreadID: threadKey, Channel: "api", Contact: threadKey}
	explain := func(err error) error { return fmt.Errorf("creating thread %s: %w", threadKey, err) }
	if err := e.q.ThreadInsertNew(ctx, later(tx, explain), p); err != nil {
		return nil, false, err
	}
	// created_at and updated_at default to now(), the reservation's
	// created_at: the transaction's start.
	return &dbsqlc.Thread{ID: p.ID, TenantID: tenantID, ThreadID: threadKey, Channel: p.Channel, Contact: p.Contact,
		CreatedAt: res.CreatedAt, UpdatedAt: res.CreatedAt}, true, nil
}

// ensureThread returns the thread named threadKey, created on first use (on
// channel "api", with the key as contact), and holds its row FOR UPDATE in
// tx. created says tx inserted the row: no other transaction can see it
// before tx commits.
func (e *Engine) ensureThread(ctx context.Context, tx pgx.Tx, tenantID, threadKey string) (t *dbsqlc.Thread, created bool, err error) {
	t, err = e.q.ThreadInsertIfAbsent(ctx, tx, &dbsqlc.ThreadInsertIfAbsentParams{TenantID: tenantID, ThreadID: threadKey, Channel: "api", Contact: threadKey})
	if err == nil {
		return t, true, nil // new, and ours until commit
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, fmt.Errorf("creating thread %s: %w", threadKey, err)
	}
	t, err = e.q.ThreadLockByThreadID(ctx, tx, &dbsqlc.ThreadLockByThreadIDParams{TenantID: tenantID, ThreadID: threadKey})
	if errors.Is(err, pgx.ErrNoRows) {
		// The insert met the channel and contact of another thread.
		return nil, false, &ConflictError{Code: "workflow.execute.thread_conflict", Message: fmt.Sprintf(
			"thread %s cannot be created: another thread already has channel api and contact %s", threadKey, threadKey)}
	}
	if err != nil {
		return nil, false, fmt.Errorf("locking thread %s: %w", threadKey, err)
	}
	return t, false, nil
}
