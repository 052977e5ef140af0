package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// armFlush enqueues a session.flush job at at unless one is armed. With
// held, the caller holds the session lane row; otherwise it tries to take it
// and, when it is held, enqueues the job without the flag (see the lock-order
// note in lane.go).
func (e *Engine) armFlush(ctx context.Context, tx pgx.Tx, tenantID, session string, at time.Time, held bool) error {
	threadKey := strings.TrimPrefix(session, sessionLanePrefix)
	if !held {
		_, ok, err := e.lockLane(ctx, tx, tenantID, session, false)
		if err != nil {
			return err
		}
		if !ok {
			return e.jobs.InsertSessionFlush(ctx, tx, tenantID, threadKey, at)
		}
	}
	_, err := e.q.SessionArmFlush(ctx, tx, &dbsqlc.SessionArmFlushParams{TenantID: tenantID, Name: session, FlushAt: at})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("arming session flush: %w", err)
	}
	return e.jobs.InsertSessionFlush(ctx, tx, tenantID, threadKey, at)
}

// sessionFreed runs when a run ends or starts waiting; for a session run, messages
// steered into it that it did not take become followups, and the session's
// queue is flushed (after its debounce) into the next run. Nothing queued is
// lost whether the run completed, failed, timed out or was cancelled.
func (e *Engine) sessionFreed(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution) error {
	if row.SessionKey == nil {
		return nil
	}
	if _, err := e.q.InboundRevertSteered(ctx, tx, row.ID); err != nil {
		return fmt.Errorf("returning steered messages to the queue: %w", err)
	}
	n, err := e.q.InboundCountReceived(ctx, tx, row.ThreadID)
	if err != nil {
		return fmt.Errorf("counting queued messages: %w", err)
	}
	if n == 0 {
		if _, err := e.q.InboundSummaryRow(ctx, tx, row.ThreadID); err != nil {
			return nil // nothing queued
		}
	}
	return e.armFlush(ctx, tx, row.TenantID, *row.SessionKey, time.Now(), false)
}

// FlushSession is the session.flush job: under the session's locks, taken in
// order, it starts the next run from the queued messages once no session
// run is active and the debounce window since the last message has passed
// (re-arming itself for that moment otherwise), and completes the job in the
// same transaction.
func (e *Engine) FlushSession(ctx context.Context, tenantID, threadKey string, complete CompleteFunc) error {
	return e.WithTx(ctx, func(tx pgx.Tx) error {
		s, err := e.lockSession(ctx, tx, tenantID, threadKey, "")
		if errors.Is(err, ErrNotFound) {
			return complete(ctx, tx)
		}
		if err != nil {
			return err
		}
		disarm := func() error {
			if err := e.q.SessionDisarmFlush(ctx, tx, &dbsqlc.SessionDisarmFlushParams{TenantID: tenantID, Name: s.session}); err != nil {
				return fmt.Errorf("disarming session flush: %w", err)
			}
			return complete(ctx, tx)
		}
		if _, err := e.q.SessionActiveRun(ctx, tx, &dbsqlc.SessionActiveRunParams{TenantID: tenantID, SessionKey: s.session}); err == nil {
			return disarm() // its end flushes again
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("finding the session's active run: %w", err)
		}
		queue, err := e.q.InboundListReceived(ctx, tx, s.thread.ID)
		if err != nil {
			return fmt.Errorf("reading the session's queue: %w", err)
		}
		if len(queue) == 0 {
			return disarm()
		}
		last, err := e.q.InboundLastReceivedAt(ctx, tx, s.thread.ID)
		if err != nil {
			return fmt.Errorf("reading the last queued message: %w", err)
		}
		if due := last.LastAt.Add(time.Duration(s.settings.DebounceMS) * time.Millisecond); last.NowAt.Before(due) {
			// Trailing quiet window: come back when it has passed. The run
			// would be created at this transaction's start, which must not
			// fall inside the window.
			if err := e.q.SessionDisarmFlush(ctx, tx, &dbsqlc.SessionDisarmFlushParams{TenantID: tenantID, Name: s.session}); err != nil {
				return fmt.Errorf("disarming session flush: %w", err)
			}
			if err := e.armFlush(ctx, tx, tenantID, s.session, due, true); err != nil {
				return err
			}
			return complete(ctx, tx)
		}
		batch, prompt := nextBatch(queue)
		msgs := make([]map[string]any, 0, len(batch))
		ids := make([]int64, 0, len(batch))
		for _, m := range batch {
			ids = append(ids, m.ID)
			if !m.Summary {
				msgs = append(msgs, map[string]any{"message_id": deref(m.ExternalID), "text": m.Body, "channel": deref(m.Channel)})
			}
		}
		x, err := e.startSessionRun(ctx, tx, s, prompt, msgs)
		if err != nil {
			var conflict *ConflictError
			if errors.As(err, &conflict) {
				e.WarnContext(ctx, conflict.Message, "thread_id", threadKey, "tenant_id", tenantID)
				return disarm() // no workflow to run: the messages stay queued
			}
			return err
		}
		if err := e.q.InboundConsume(ctx, tx, &dbsqlc.InboundConsumeParams{ExecutionID: x.ID, Ids: ids}); err != nil {
			return fmt.Errorf("consuming queued messages: %w", err)
		}
		return disarm()
	})
}

// nextBatch picks the messages of the next run and its prompt: a collect
// head takes every queued collect message of its channel (other channels
// are flushed one by one); any other head is a followup of its own. The
// overflow summary leads: inside a collect prompt, or as a synthetic
// followup.
func nextBatch(queue []*dbsqlc.ThreadMessage) ([]*dbsqlc.ThreadMessage, string) {
	head := queue[0]
	if deref(head.QueueMode) != "collect" {
		return queue[:1], head.Body
	}
	var batch []*dbsqlc.ThreadMessage
	var summary string
	var b strings.Builder
	b.WriteString(collectHeader)
	n := 0
	for _, m := range queue {
		if deref(m.QueueMode) != "collect" || deref(m.Channel) != deref(head.Channel) {
			continue
		}
		batch = append(batch, m)
		if m.Summary {
			summary = m.Body
			continue
		}
		n++
		fmt.Fprintf(&b, "\n\n---\nQueued #%d\n%s", n, m.Body)
	}
	if summary != "" {
		return batch, summary + "\n\n" + b.String()
	}
	return batch, b.String()
}

// sweepSessions re-arms flushes of idle sessions whose queue waits with no
// flush on its way.
func (e *Engine) sweepSessions(ctx context.Context) error {
	rows, err := e.q.SessionListNeedingFlush(ctx, e.pool)
	if err != nil {
		return fmt.Errorf("listing sessions to flush: %w", err)
	}
	for _, r := range rows {
		err := e.WithTx(ctx, func(tx pgx.Tx) error {
			session := SessionLane(r.ThreadID)
			if _, _, err := e.lockLane(ctx, tx, r.TenantID, session, true); err != nil {
				return err
			}
			if err := e.q.SessionDisarmFlush(ctx, tx, &dbsqlc.SessionDisarmFlushParams{TenantID: r.TenantID, Name: session}); err != nil {
				return err
			}
			return e.armFlush(ctx, tx, r.TenantID, session, time.Now(), true)
		})
		if err != nil {
			return fmt.Errorf("re-arming flush of thread %s: %w", r.ThreadID, err)
		}
	}
	return nil
}
