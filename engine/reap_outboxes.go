package engine

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// The outbox reaper enqueues the delivery of messages whose deliverer died
// (see "Prompt delivery" in deliver_prompt.go).
//
// A message that a process delivers promptly has no message.deliver job
// while it is in that process's hands. Should the process die between the
// commit and the delivery, the message stays pending with no job.
// ReapOutboxes, run every second on River's leader (jobs'
// message.deliver_reap), lists the threads with a message pending for
// Config.DeliveryRescueAfter and no live message.deliver job, and inserts
// one for each. A thread that is in fact still being delivered (a channel
// slower than DeliveryRescueAfter) gets a job that finds its outbox held
// and waits for it (ErrOutboxBusy), then delivers whatever is left: never
// a message twice, since a message is recorded delivered before its outbox
// is given up.

// outboxReapBatch bounds how many threads one ReapOutboxes handles; the
// next run takes the rest.
const outboxReapBatch = 500

// outboxReapLockKey is the transaction advisory lock a reaper takes, so
// that one reaper lists and enqueues at a time: two reapers whose runs
// overlapped (a periodic job runs while the last one still commits) would
// both find a thread without a job and both insert one.
const outboxReapLockKey = outboxLockBase - 1

// ReapOutboxes enqueues a delivery job for every thread whose pending
// messages have had no deliverer for DeliveryRescueAfter, and returns how
// many it enqueued; 0 when another reaper is at work.
func (e *Engine) ReapOutboxes(ctx context.Context) (int, error) {
	var threads []int64
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		won, err := e.q.OutboxReapLock(ctx, tx, outboxReapLockKey)
		if err != nil || !won {
			return err
		}
		threads, err = e.q.OutboxListStranded(ctx, tx, &dbsqlc.OutboxListStrandedParams{
			IdleSeconds: e.cfg.DeliveryRescueAfter.Seconds(), Max: outboxReapBatch,
		})
		if err != nil {
			return fmt.Errorf("listing stranded outboxes: %w", err)
		}
		if len(threads) == 0 {
			return nil
		}
		if err := e.jobs.InsertDeliver(ctx, tx, threads...); err != nil {
			return fmt.Errorf("enqueueing the delivery of %d stranded outboxes: %w", len(threads), err)
		}
		return nil
	})
	if err != nil || len(threads) == 0 {
		return 0, err
	}
	e.WarnContext(ctx, "enqueued the delivery of messages left pending without a deliverer",
		"threads", len(threads), "after", e.cfg.DeliveryRescueAfter)
	return len(threads), nil
}

// insertDeliveries inserts the threads' message.deliver jobs, due now, in
// one statement of a transaction of its own.
func (e *Engine) insertDeliveries(ctx context.Context, threadIDs ...int64) error {
	return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		return e.jobs.InsertDeliver(ctx, tx, threadIDs...)
	})
}
