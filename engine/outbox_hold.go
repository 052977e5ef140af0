package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/db/dbsqlc"
)

// Fenced delivery.
//
// A thread's outbox is held through a session advisory lock, which lives as
// long as the session that took it. A failover, a network cut or
// pg_terminate_backend ends the session while the holder's channel call may
// still be in flight; the lock is free at once, and another deliverer (the
// outbox reaper's job, another process's prompt delivery) takes the outbox
// and sends the same messages. Three things answer that.
//
//   - The holder learns it at once. While its channel calls are in flight
//     the holding connection is idle, and a goroutine waits on it
//     (heldConn.watch): a session the server ends is a read that fails at
//     once, and the delivery's context is cancelled with ErrOutboxLost as
//     its cause, which stops the channel calls in flight and the sends not
//     yet made. A connection quiet for outboxPingEvery is pinged, so a
//     silent network cut is noticed within outboxPingEvery +
//     outboxPingTimeout; the server frees a session cut off that way only
//     once its own dead-peer detection gives up (tcp_keepalives_*,
//     minutes to hours), so the holder stops first.
//   - Every write the holder makes after a channel call is fenced
//     (migration 00031): a claim stamps its token on the messages it takes,
//     and a message is recorded delivered, or a failed attempt counted, only
//     while it still carries the token of the claim that sent it. A holder
//     that lost its connection and whose channel took the message anyway
//     records it through another connection (recordAfterLoss): if nobody
//     has claimed it since, it is not sent again; if somebody has, the write
//     changes nothing.
//   - Every message carries its delivery sequence (OutboundMessage.Sequence),
//     which rises with every message of its thread in outbox order: the
//     copy a stale holder sends late carries a number the receiver has
//     already seen.

// ErrOutboxLost is the cause of the context of the channel calls made while
// the connection that holds their thread's outbox lock was lost: another
// deliverer may hold the outbox now.
var ErrOutboxLost = errors.New("the connection holding the thread's outbox lock was lost")

// errOutboxFenced says that a message the holder sent carries another
// claim's token: the outbox is no longer the holder's.
var errOutboxFenced = errors.New("another deliverer has claimed the thread's outbox since")

const (
	// outboxPingEvery is how long a connection holding outbox locks may stay
	// quiet during channel calls before the holder pings it.
	outboxPingEvery = time.Second
	// outboxPingTimeout is how long such a ping may take before the
	// connection counts as lost.
	outboxPingTimeout = time.Second
)

// heldConn is a connection that holds outbox locks, and the context of the
// channel calls made under them, which ends with ErrOutboxLost as its cause
// once the connection is found lost.
type heldConn struct {
	conn   *pgxpool.Conn
	ctx    context.Context
	cancel context.CancelCauseFunc
	// epoch is the fencing token of the claim that took the messages.
	epoch int64
}

// holdOn returns conn, which has just claimed messages under the token
// epoch, with a context for its channel calls derived from ctx. done
// releases the context.
func holdOn(ctx context.Context, conn *pgxpool.Conn, epoch int64) *heldConn {
	ctx, cancel := context.WithCancelCause(ctx)
	return &heldConn{conn: conn, ctx: ctx, cancel: cancel, epoch: epoch}
}

// done releases the channel calls' context.
func (h *heldConn) done() { h.cancel(context.Canceled) }

// lost reports whether the connection was found lost.
func (h *heldConn) lost() bool { return errors.Is(context.Cause(h.ctx), ErrOutboxLost) }

// watch waits on the idle connection until stop is called, pinging it when
// it has been quiet for outboxPingEvery, and cancels the channel calls'
// context the moment it finds the connection lost. Nothing else may use
// the connection between watch and stop, which returns once the
// connection is free again (after a ping in flight, at most
// outboxPingTimeout).
func (h *heldConn) watch() (stop func()) {
	waitCtx, cancelWait := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		pg := h.conn.Conn().PgConn()
		for {
			quiet, cancelQuiet := context.WithTimeout(waitCtx, outboxPingEvery)
			err := pg.WaitForNotification(quiet)
			cancelQuiet()
			switch {
			case waitCtx.Err() != nil:
				return
			case err == nil: // a notification: nothing listens here, but the connection lives
				continue
			case !errors.Is(err, context.DeadlineExceeded):
				h.cancel(fmt.Errorf("%w: %w", ErrOutboxLost, err))
				return
			}
			// A ping is never cut short by stop: a query interrupted
			// midway closes its connection.
			pingCtx, cancelPing := context.WithTimeout(context.Background(), outboxPingTimeout)
			err = pg.Ping(pingCtx)
			cancelPing()
			if err != nil {
				h.cancel(fmt.Errorf("%w: ping: %w", ErrOutboxLost, err))
				return
			}
		}
	}()
	return func() {
		cancelWait()
		<-stopped
	}
}

// recordAfterLoss records m delivered, which its channel took while the
// connection holding its outbox lock was lost, through another connection
// and fenced by the token of the claim that sent it: if no claim has taken
// m since, nobody sends it again; if one has, nothing changes, and the
// copy the new holder sends carries the same sequence, which the receiver
// drops.
func (e *Engine) recordAfterLoss(ctx context.Context, m *dbsqlc.OutboxMessage) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handOverTimeout)
	defer cancel()
	recorded, err := e.q.MessageRecordDelivered(ctx, e.pool, &dbsqlc.MessageRecordDeliveredParams{
		ID: m.ID, Epoch: claimEpoch(m), ThreadKey: m.ThreadKey, ExecutionKey: m.ExecutionKey, Channel: m.Channel,
	})
	attrs := []any{"tenant_id", m.TenantID, "thread_id", m.ThreadKey, "message_id", m.ID, "sequence", sequenceOf(m)}
	switch {
	case err != nil:
		e.WarnContext(ctx, "recording a message its channel took after the outbox lock was lost failed; it will be sent again",
			append(attrs, "error", err)...)
	case !recorded:
		e.WarnContext(ctx, "a message its channel took after the outbox lock was lost was claimed by another deliverer meanwhile; "+
			"it is sent again under the same sequence", attrs...)
	default:
		e.InfoContext(ctx, "recorded a message its channel took after the outbox lock was lost", attrs...)
	}
}

// claimEpoch is the fencing token a claimed message carries.
func claimEpoch(m *dbsqlc.OutboxMessage) int64 {
	if m.ClaimEpoch == nil {
		return 0
	}
	return *m.ClaimEpoch
}

// sequenceOf is a pending message's delivery sequence (delivery_seq).
func sequenceOf(m *dbsqlc.OutboxMessage) int64 {
	if m.DeliverySeq == nil {
		return 0
	}
	return *m.DeliverySeq
}
