package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// Event actions of thread locks and queued messages (docs/api.md, "WebSocket").
const (
	EventLockAcquired   = "thread.lock_acquired"
	EventLockReleased   = "thread.lock_released"
	EventMessageQueued  = "thread.message_queued"
	EventMessageDropped = "thread.message_dropped"
)

// outboxLockBase namespaces the advisory lock that serialises a thread's
// outbox delivery (key = base | thread row id).
const outboxLockBase int64 = 1 << 62

// lockThread takes the thread row FOR UPDATE. Every transaction that changes
// an execution takes its thread first (lock order: thread rows
// before execution rows), so steps, cancellations, drains and hand-backs of
// one thread queue behind each other instead of deadlocking.
func (e *Engine) lockThread(ctx context.Context, tx pgx.Tx, threadID int64) (*dbsqlc.Thread, error) {
	t, err := e.q.ThreadLock(ctx, tx, threadID)
	if err != nil {
		return nil, fmt.Errorf("locking thread %d: %w", threadID, notFound(err))
	}
	return t, nil
}

// heldThread is a thread row its transaction holds FOR UPDATE, with the
// lock columns kept current as the transaction changes them.
type heldThread struct {
	*dbsqlc.Thread
	// private says the lock lives in this value alone until
	// stepRun.writePrivateLock: the transaction inserted the thread, or
	// locked its row and found the lock free and nothing queued
	// (Engine.lockIsPrivate), and runs its execution until it ends or
	// waits. Nobody else can take the lock or queue on the thread before
	// commit, nor see a lock taken and given back within the transaction,
	// so a run that takes the lock and ends writes nothing.
	private bool
}

// holds wraps a thread row the transaction has just locked.
func holds(t *dbsqlc.Thread) *heldThread { return &heldThread{Thread: t} }

// sendDecision says how a message of an execution goes out on a thread.
type sendDecision struct {
	// holder is true when the execution holds (or just took) the lock: its
	// message goes out at once.
	holder bool
	// reason names how the lock was decided, for the log.
	reason string
}

// acquireForSend decides, under the thread row lock, whether x may talk on
// the thread now (one voice per thread, docs/architecture.md):
// free → take; own → refresh; held by an ancestor x may inherit from → take
// over; stale → clear, then take unless others' messages are queued; else
// queue. A free lock with queued messages belongs to the drain: newcomers
// queue behind them. Whenever x takes the lock, its own earlier queued
// messages go into the outbox first. A private lock (heldThread.private)
// is taken in t alone.
func (e *Engine) acquireForSend(ctx context.Context, tx pgx.Tx, held *heldThread, x *dbsqlc.AgentExecution, events *eventLog) (sendDecision, error) {
	t := held.Thread
	if held.private {
		// Nobody else can hold or queue on it before tx commits.
		if t.ActiveExecutionID != nil {
			return sendDecision{holder: true, reason: "own"}, nil
		}
		return e.tookLock(ctx, tx, t, x, events, "free")
	}
	attrs := []any{"thread_id", t.ThreadID, "execution_id", x.ExecutionID, "tenant_id", x.TenantID}
	if t.ActiveExecutionID != nil && *t.ActiveExecutionID == x.ID {
		if err := e.q.ThreadSetLock(ctx, tx, &dbsqlc.ThreadSetLockParams{ID: t.ID, ExecutionID: x.ID}); err != nil {
			return sendDecision{}, fmt.Errorf("refreshing lock: %w", err)
		}
		return sendDecision{holder: true, reason: "own"}, nil
	}
	if t.ActiveExecutionID != nil {
		holder := *t.ActiveExecutionID
		inherit, err := e.mayInherit(ctx, tx, x.ID, holder)
		if err != nil {
			return sendDecision{}, err
		}
		switch {
		case inherit:
			if err := e.q.ExecutionSetLockInheritedFrom(ctx, tx, &dbsqlc.ExecutionSetLockInheritedFromParams{ID: x.ID, LockInheritedFrom: holder}); err != nil {
				return sendDecision{}, fmt.Errorf("recording inherited lock: %w", err)
			}
			x.LockInheritedFrom = &holder
			e.InfoContext(ctx, fmt.Sprintf("Execution %s inheriting lock from parent %d on thread %s", x.ExecutionID, holder, t.ThreadID), attrs...)
			return e.takeQueuedLock(ctx, tx, t, x, events, "inherited")
		case t.ExecutionLockedAt != nil && time.Since(*t.ExecutionLockedAt) > e.cfg.LockTimeout:
			e.WarnContext(ctx, fmt.Sprintf("Lock on thread %s is stale (%dms), clearing...", t.ThreadID, time.Since(*t.ExecutionLockedAt).Milliseconds()), append(attrs, "stale_holder", holder)...)
			if err := e.q.ThreadClearLock(ctx, tx, t.ID); err != nil {
				return sendDecision{}, fmt.Errorf("clearing stale lock: %w", err)
			}
			t.ActiveExecutionID, t.ExecutionLockedAt = nil, nil
		default:
			e.InfoContext(ctx, fmt.Sprintf("Thread %s locked by execution %d, cannot acquire for %s", t.ThreadID, holder, x.ExecutionID), attrs...)
			return sendDecision{reason: "locked"}, nil
		}
	}
	// A free lock and an empty queue: take it in one statement.
	_, err := e.q.ThreadTakeFreeLock(ctx, tx, &dbsqlc.ThreadTakeFreeLockParams{ID: t.ID, ExecutionID: x.ID})
	if err == nil {
		return e.tookLock(ctx, tx, t, x, events, "free")
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return sendDecision{}, fmt.Errorf("taking lock: %w", err)
	}
	queued, err := e.q.MessageCountQueued(ctx, tx, t.ID)
	if err != nil {
		return sendDecision{}, fmt.Errorf("counting queued messages: %w", err)
	}
	if queued > 0 {
		headIsOurs, err := e.queueHeadInFamily(ctx, tx, t.ID, x.ID)
		if err != nil {
			return sendDecision{}, err
		}
		if !headIsOurs {
			// The drain owns a free lock while others' messages wait.
			if err := e.armDrain(ctx, tx, t.ID); err != nil {
				return sendDecision{}, err
			}
			return sendDecision{reason: "queue"}, nil
		}
	}
	if queued > 0 {
		return e.takeQueuedLock(ctx, tx, t, x, events, "free")
	}
	return e.takeLock(ctx, tx, t, x, events, "free")
}

// lockIsPrivate reports whether the lock of a slotless run's thread (a
// settling start's, or a resume's that settles: stepRun.goSlotless) may live
// in memory for its transaction (heldThread.private): the transaction
// inserted the thread (created), or holds its row (ensureThread, tryThread)
// and finds its lock free and nothing queued on it. Either way no other transaction
// can take the lock or queue on the thread before this one commits, and
// none can see a lock taken and given back within it.
func (e *Engine) lockIsPrivate(ctx context.Context, tx pgx.Tx, t *dbsqlc.Thread, created bool) (bool, error) {
	if created {
		return true, nil
	}
	if t.ActiveExecutionID != nil {
		return false, nil
	}
	queued, err := e.q.MessageCountQueued(ctx, tx, t.ID)
	if err != nil {
		return false, fmt.Errorf("counting queued messages: %w", err)
	}
	return queued == 0, nil
}

// queueHeadInFamily reports whether the thread's first queued message
// belongs to x's family (x, or an execution it shares a voice with): then x
// is the drain's next holder anyway and may take the lock now.
func (e *Engine) queueHeadInFamily(ctx context.Context, tx pgx.Tx, threadID, executionID int64) (bool, error) {
	head, err := e.q.MessageFirstQueued(ctx, tx, threadID)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading queue head: %w", err)
	}
	if head.ExecutionID == nil {
		return false, nil
	}
	_, ids, err := e.family(ctx, tx, executionID)
	if err != nil {
		return false, err
	}
	return slices.Contains(ids, *head.ExecutionID), nil
}

// family returns the executions that talk as one voice with id: its
// ancestors up through inheriting links and their inheriting descendants
// (a parent waiting for a child that took over its lock, and so on).
func (e *Engine) family(ctx context.Context, tx pgx.Tx, id int64) ([]*dbsqlc.ExecutionLockFamilyRow, []int64, error) {
	rows, err := e.q.ExecutionLockFamily(ctx, tx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("reading execution family: %w", err)
	}
	ids := make([]int64, 0, len(rows))
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	return rows, ids, nil
}

// takeLock makes x the holder.
func (e *Engine) takeLock(ctx context.Context, tx pgx.Tx, t *dbsqlc.Thread, x *dbsqlc.AgentExecution, events *eventLog, reason string) (sendDecision, error) {
	if err := e.q.ThreadSetLock(ctx, tx, &dbsqlc.ThreadSetLockParams{ID: t.ID, ExecutionID: x.ID}); err != nil {
		return sendDecision{}, fmt.Errorf("taking lock: %w", err)
	}
	return e.tookLock(ctx, tx, t, x, events, reason)
}

// takeQueuedLock is takeLock on a thread where x's family may have queued
// messages: they go into the outbox, in their order, ahead of x's next.
func (e *Engine) takeQueuedLock(ctx context.Context, tx pgx.Tx, t *dbsqlc.Thread, x *dbsqlc.AgentExecution, events *eventLog, reason string) (sendDecision, error) {
	d, err := e.takeLock(ctx, tx, t, x, events, reason)
	if err != nil {
		return sendDecision{}, err
	}
	_, ids, err := e.family(ctx, tx, x.ID)
	if err != nil {
		return sendDecision{}, err
	}
	if _, err := e.q.MessageReleaseQueued(ctx, tx, &dbsqlc.MessageReleaseQueuedParams{ThreadID: t.ID, ExecutionIds: ids}); err != nil {
		return sendDecision{}, fmt.Errorf("releasing the family's queued messages: %w", err)
	}
	return d, nil
}

// tookLock is takeLock once the thread row names x as the holder.
func (e *Engine) tookLock(ctx context.Context, tx pgx.Tx, t *dbsqlc.Thread, x *dbsqlc.AgentExecution, events *eventLog, reason string) (sendDecision, error) {
	t.ActiveExecutionID = &x.ID
	// A child that may inherit its parent's voice gives the lock back to
	// the live parent when it ends, however it took it (inherited, or free
	// as the head of their family's queue).
	if x.LockInheritedFrom == nil && x.CanInheritLock && x.ParentExecutionID != nil {
		parent, err := e.q.ExecutionGetByID(ctx, tx, *x.ParentExecutionID)
		if err != nil {
			return sendDecision{}, fmt.Errorf("reading parent execution: %w", err)
		}
		if !IsTerminal(parent.Status) {
			if err := e.q.ExecutionSetLockInheritedFrom(ctx, tx, &dbsqlc.ExecutionSetLockInheritedFromParams{ID: x.ID, LockInheritedFrom: parent.ID}); err != nil {
				return sendDecision{}, fmt.Errorf("recording the lock's way back: %w", err)
			}
			x.LockInheritedFrom = &parent.ID
		}
	}
	events.add(EventLockAcquired, "info", "", fmt.Sprintf("Thread %s locked by execution %s (%s)", t.ThreadID, x.ExecutionID, reason),
		map[string]any{"thread_id": t.ThreadID, "reason": reason})
	return sendDecision{holder: true, reason: reason}, nil
}

// mayInherit reports whether holder is an ancestor of x and every link from
// x up to the holder lets the lock pass down (can_inherit_lock).
func (e *Engine) mayInherit(ctx context.Context, tx pgx.Tx, x, holder int64) (bool, error) {
	chain, err := e.q.ExecutionAncestors(ctx, tx, x)
	if err != nil {
		return false, fmt.Errorf("reading ancestors: %w", err)
	}
	for _, link := range chain {
		if link.ID == holder {
			return link.Depth > 0, nil
		}
		if !link.CanInheritLock {
			return false, nil
		}
	}
	return false, nil
}

// armDrain enqueues a thread.drain job unless one is already pending for the
// thread (the flag lives on the thread row, under its lock).
func (e *Engine) armDrain(ctx context.Context, tx pgx.Tx, threadID int64) error {
	_, err := e.q.ThreadArmDrain(ctx, tx, threadID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("arming drain: %w", err)
	}
	return e.jobs.InsertDrain(ctx, tx, threadID)
}

// releaseLock runs in every finalize transaction, with the thread row
// already locked: it drops a cancelled run's queued messages, hands an
// inherited lock back to the execution it came from (when that one is still
// live) or releases it, and wakes the drain when messages are queued. held
// is the thread the caller holds, else nil. A private lock
// (heldThread.private) lives in held alone: nobody else can have queued on
// it, so releasing is forgetting.
func (e *Engine) releaseLock(ctx context.Context, tx pgx.Tx, x *dbsqlc.AgentExecution, events *eventLog, held *heldThread) error {
	var t *dbsqlc.Thread
	if held != nil {
		t = held.Thread
	}
	if held != nil && held.private {
		if t.ActiveExecutionID != nil && *t.ActiveExecutionID == x.ID {
			t.ActiveExecutionID = nil
			e.lockReleased(ctx, x, t, events)
		}
		return nil
	}
	if t == nil || t.ID != x.ThreadID {
		var err error
		if t, err = e.lockThread(ctx, tx, x.ThreadID); err != nil {
			return err
		}
	}
	if x.Status == StatusCancelled {
		n, err := e.q.MessageDropQueued(ctx, tx, x.ID)
		if err != nil {
			return fmt.Errorf("dropping queued messages: %w", err)
		}
		if n > 0 {
			events.add(EventMessageDropped, "info", "", fmt.Sprintf("Dropped %d queued message(s) of cancelled execution %s", n, x.ExecutionID), map[string]any{"count": n})
		}
	}
	if t.ActiveExecutionID != nil && *t.ActiveExecutionID != x.ID {
		return nil // another execution talks: its own finalize wakes the drain
	}
	attrs := []any{"thread_id", t.ThreadID, "execution_id", x.ExecutionID, "tenant_id", x.TenantID}
	var queued int32
	if t.ActiveExecutionID != nil {
		if x.LockInheritedFrom != nil {
			parent, err := e.q.ExecutionGetByID(ctx, tx, *x.LockInheritedFrom)
			if err != nil {
				return fmt.Errorf("reading lock parent: %w", err)
			}
			if !IsTerminal(parent.Status) {
				if err := e.q.ThreadSetLock(ctx, tx, &dbsqlc.ThreadSetLockParams{ID: t.ID, ExecutionID: parent.ID}); err != nil {
					return fmt.Errorf("handing lock back: %w", err)
				}
				e.InfoContext(ctx, fmt.Sprintf("Execution %s handed the lock on thread %s back to execution %s", x.ExecutionID, t.ThreadID, parent.ExecutionID), attrs...)
				events.add(EventLockReleased, "info", "", fmt.Sprintf("Lock on thread %s handed back to execution %s", t.ThreadID, parent.ExecutionID),
					map[string]any{"thread_id": t.ThreadID, "handed_to": parent.ExecutionID})
				return nil
			}
		}
		var err error
		if queued, err = e.q.ThreadReleaseLock(ctx, tx, t.ID); err != nil {
			return fmt.Errorf("releasing lock: %w", err)
		}
		t.ActiveExecutionID, t.ExecutionLockedAt = nil, nil
		e.lockReleased(ctx, x, t, events)
	} else {
		var err error
		if queued, err = e.q.MessageCountQueued(ctx, tx, t.ID); err != nil {
			return fmt.Errorf("counting queued messages: %w", err)
		}
	}
	if queued > 0 {
		return e.armDrain(ctx, tx, t.ID)
	}
	return nil
}

// lockReleased logs and records that x gave up its lock on t.
func (e *Engine) lockReleased(ctx context.Context, x *dbsqlc.AgentExecution, t *dbsqlc.Thread, events *eventLog) {
	attrs := []any{"thread_id", t.ThreadID, "execution_id", x.ExecutionID, "tenant_id", x.TenantID}
	e.InfoContext(ctx, fmt.Sprintf("Thread %s lock released by execution %s", t.ThreadID, x.ExecutionID), attrs...)
	e.InfoContext(ctx, fmt.Sprintf("Released locks on 1 thread(s) for execution %s", x.ExecutionID), attrs...)
	events.add(EventLockReleased, "info", "", fmt.Sprintf("Released lock on thread %s", t.ThreadID), map[string]any{"thread_id": t.ThreadID})
}

// maxHeadsPerDrain bounds how many finished executions one drain transaction
// serves before it re-arms itself.
const maxHeadsPerDrain = 50

// DrainThread delivers a thread's queued messages in FIFO order:
// executions are served in the order of each one's
// first queued message, each execution's messages in their own order; a head
// whose execution is live becomes the holder and the drain stops; a finished
// one's messages go out and the drain goes on. A live, fresh holder means
// there is nothing to drain yet: its finalize wakes the drain again.
func (e *Engine) DrainThread(ctx context.Context, threadID int64, complete CompleteFunc) error {
	return e.WithTx(ctx, func(tx pgx.Tx) error {
		t, err := e.lockThread(ctx, tx, threadID)
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				return complete(ctx, tx)
			}
			return err
		}
		if t.ActiveExecutionID != nil {
			holder, err := e.q.ExecutionGetByID(ctx, tx, *t.ActiveExecutionID)
			if err != nil {
				return fmt.Errorf("reading lock holder: %w", err)
			}
			stale := t.ExecutionLockedAt != nil && time.Since(*t.ExecutionLockedAt) > e.cfg.LockTimeout
			if !IsTerminal(holder.Status) && !stale {
				if err := e.q.ThreadDisarmDrain(ctx, tx, t.ID); err != nil {
					return fmt.Errorf("disarming drain: %w", err)
				}
				return complete(ctx, tx)
			}
			e.WarnContext(ctx, fmt.Sprintf("Thread %s lock held by execution %s is stale or orphaned, clearing", t.ThreadID, holder.ExecutionID),
				"thread_id", t.ThreadID, "tenant_id", t.TenantID)
			if err := e.q.ThreadClearLock(ctx, tx, t.ID); err != nil {
				return fmt.Errorf("clearing lock: %w", err)
			}
		}
		delivered := false
		for i := 0; ; i++ {
			if i == maxHeadsPerDrain {
				// More to do: go on in a fresh transaction.
				if err := e.jobs.InsertDrain(ctx, tx, t.ID); err != nil {
					return err
				}
				break
			}
			head, err := e.q.MessageFirstQueued(ctx, tx, t.ID)
			if errors.Is(err, pgx.ErrNoRows) {
				if err := e.q.ThreadDisarmDrain(ctx, tx, t.ID); err != nil {
					return fmt.Errorf("disarming drain: %w", err)
				}
				break
			}
			if err != nil {
				return fmt.Errorf("reading queue head: %w", err)
			}
			// The head's family (an execution and those it shares a voice
			// with) gets the thread: all its queued messages go out, in the
			// order they were written, and its deepest live member holds the
			// lock; a family with no live member only has its say.
			fam, ids, err := e.family(ctx, tx, *head.ExecutionID)
			if err != nil {
				return err
			}
			if _, err := e.q.MessageReleaseQueued(ctx, tx, &dbsqlc.MessageReleaseQueuedParams{ThreadID: t.ID, ExecutionIds: ids}); err != nil {
				return fmt.Errorf("releasing queued messages: %w", err)
			}
			delivered = true
			holder := deepestLive(fam)
			if holder == nil {
				continue
			}
			if holder.ParentExecutionID != nil && slices.Contains(ids, *holder.ParentExecutionID) {
				if err := e.q.ExecutionSetLockInheritedFrom(ctx, tx, &dbsqlc.ExecutionSetLockInheritedFromParams{ID: holder.ID, LockInheritedFrom: *holder.ParentExecutionID}); err != nil {
					return fmt.Errorf("recording inherited lock: %w", err)
				}
			}
			if err := e.q.ThreadSetLock(ctx, tx, &dbsqlc.ThreadSetLockParams{ID: t.ID, ExecutionID: holder.ID}); err != nil {
				return fmt.Errorf("passing lock to queue head: %w", err)
			}
			owner, err := e.q.ExecutionGetByID(ctx, tx, holder.ID)
			if err != nil {
				return fmt.Errorf("reading new holder: %w", err)
			}
			events := &eventLog{tenantID: owner.TenantID, executionID: owner.ID}
			events.add(EventLockAcquired, "info", "", fmt.Sprintf("Thread %s locked by execution %s (drain)", t.ThreadID, owner.ExecutionID),
				map[string]any{"thread_id": t.ThreadID, "reason": "drain"})
			if err := events.write(ctx, e.q, tx); err != nil {
				return err
			}
			if err := e.q.ThreadDisarmDrain(ctx, tx, t.ID); err != nil {
				return fmt.Errorf("disarming drain: %w", err)
			}
			break
		}
		if delivered {
			if err := e.enqueueDelivery(ctx, tx, t.ID); err != nil {
				return err
			}
		}
		return complete(ctx, tx)
	})
}

// deepestLive returns the family's live member farthest from its root (the
// one the others wait for), or nil when all have ended.
func deepestLive(fam []*dbsqlc.ExecutionLockFamilyRow) *dbsqlc.ExecutionLockFamilyRow {
	var best *dbsqlc.ExecutionLockFamilyRow
	for _, m := range fam {
		if !IsTerminal(m.Status) && (best == nil || m.Depth >= best.Depth) {
			best = m
		}
	}
	return best
}

// ReapLocks clears stale and orphan locks with cleanup_stale_locks() and
// drains their threads, and re-arms drains whose job was lost. It returns the
// threads it cleared, by tenant.
func (e *Engine) ReapLocks(ctx context.Context) (map[string][]string, error) {
	var cleared map[string][]string
	err := e.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		cleared, err = e.cleanupStaleLocks(ctx, tx)
		return err
	})
	return cleared, err
}

func (e *Engine) cleanupStaleLocks(ctx context.Context, tx pgx.Tx) (map[string][]string, error) {
	rows, err := e.q.ThreadCleanupStaleLocks(ctx, tx, e.cfg.LockTimeout.Seconds())
	if err != nil {
		return nil, fmt.Errorf("cleaning up stale locks: %w", err)
	}
	cleared := map[string][]string{}
	for _, r := range rows {
		cleared[r.TenantID] = append(cleared[r.TenantID], r.ThreadID)
		e.WarnContext(ctx, fmt.Sprintf("Thread %s lock is stale, clearing", r.ThreadID), "thread_id", r.ThreadID, "tenant_id", r.TenantID)
	}
	ids, err := e.q.ThreadListNeedingDrain(ctx, tx, &dbsqlc.ThreadListNeedingDrainParams{RearmAfterSeconds: drainRearmAfter.Seconds(), Max: 500})
	if err != nil {
		return nil, fmt.Errorf("listing threads to drain: %w", err)
	}
	for _, id := range ids {
		if err := e.q.ThreadForceRearmDrain(ctx, tx, id); err != nil {
			return nil, fmt.Errorf("re-arming drain: %w", err)
		}
		if err := e.jobs.InsertDrain(ctx, tx, id); err != nil {
			return nil, fmt.Errorf("enqueueing drain: %w", err)
		}
	}
	return cleared, nil
}

// drainRearmAfter is how long a drain may stay pending before the reaper
// assumes its job was lost and enqueues another.
const drainRearmAfter = 5 * time.Minute
