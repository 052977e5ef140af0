package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/db/dbsqlc"
)

// OutboundMessage is a message on its way to a channel.
type OutboundMessage struct {
	// ID is the message's stable id (thread_message.id): a receiver that
	// sees it twice can drop the second copy.
	ID int64
	// Sequence is the message's delivery sequence on its thread: it rises
	// with every message the thread delivers, in delivery order, and a
	// message sent again carries the same one. A receiver that keeps, per
	// thread, the highest Sequence it has seen and drops every message at
	// or below it gets each message once and in order, even when a
	// deliverer that lost its outbox sends a copy late (see "Fenced
	// delivery" in outbox_hold.go). Sequences are not consecutive.
	Sequence int64
	// TenantID is the thread's tenant.
	TenantID string
	// ThreadID is the thread's external id.
	ThreadID string
	// Channel and Contact address the conversation.
	Channel, Contact string
	// ExecutionID is the external id of the execution that sent it.
	ExecutionID string
	// Body is the message text.
	Body string
	// CreatedAt is when the execution sent it.
	CreatedAt time.Time
}

// ChannelAdapter delivers outbound messages to the outside world. Delivery
// is at least once: an adapter may see a message again after a crash, or
// late, from a deliverer that lost the thread's outbox meanwhile; the
// message's Sequence lets the receiver drop such copies. Deliver's context
// is cancelled, with ErrOutboxLost as its cause, when the deliverer loses
// the outbox during the call.
type ChannelAdapter interface {
	Deliver(ctx context.Context, msg OutboundMessage) error
}

// DefaultChannel names the adapter of threads whose channel has none of
// its own (Config.Channels).
const DefaultChannel = "default"

// channelFor is the adapter of a thread's channel: the one Config.Channels
// names so, else Config.Channel.
func (e *Engine) channelFor(channel string) ChannelAdapter {
	if c, ok := e.cfg.Channels[channel]; ok && c != nil {
		return c
	}
	return e.channel
}

// LogChannel is the default channel: it writes each message to the log.
// The message's text and its contact are personal data: they are logged
// only at debug level, on a line of their own.
type LogChannel struct {
	// Logger receives one info line per message ("message delivered": its
	// ids, channel and size) and, at debug level, a second one with its
	// contact and text ("message content").
	Logger *slog.Logger
}

var _ ChannelAdapter = (*LogChannel)(nil)

// Deliver logs the message.
func (c *LogChannel) Deliver(ctx context.Context, msg OutboundMessage) error {
	c.Logger.InfoContext(ctx, "message delivered",
		"tenant_id", msg.TenantID, "thread_id", msg.ThreadID, "execution_id", msg.ExecutionID,
		"channel", msg.Channel, "message_id", msg.ID, "sequence", msg.Sequence, "body_bytes", len(msg.Body))
	c.Logger.DebugContext(ctx, "message content", "message_id", msg.ID, "contact", msg.Contact, "body", msg.Body)
	return nil
}

// MemoryChannel keeps delivered messages in memory, for tests and demos.
type MemoryChannel struct {
	mu       sync.Mutex
	messages []OutboundMessage
}

var _ ChannelAdapter = (*MemoryChannel)(nil)

// Deliver records the message.
func (c *MemoryChannel) Deliver(_ context.Context, msg OutboundMessage) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.messages = append(c.messages, msg)
	return nil
}

// Messages returns a copy of the messages delivered so far, in order.
func (c *MemoryChannel) Messages() []OutboundMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]OutboundMessage(nil), c.messages...)
}

// DeliverThread delivers a thread's pending outbound messages in outbox
// order (delivery_seq) through the channel adapter. One deliverer per thread
// works at a time, across processes: it holds a session advisory lock on the
// thread's outbox while it delivers, and marks each message delivered in its
// own statement right after the adapter accepts it, so a deadline or a crash
// re-sends at most the message in flight. A failed delivery stops the thread
// there and returns the error, so the job retries without sending later
// messages first. A deliverer that finds the outbox claimed returns
// ErrOutboxBusy at once: the holder looks again for pending messages after
// it lets go, and the job tries again later in case it never does. A
// deliverer whose lock connection is lost stops at once and returns an
// error wrapping ErrOutboxLost (see "Fenced delivery" in outbox_hold.go).
func (e *Engine) DeliverThread(ctx context.Context, threadID int64) error {
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquiring connection: %w", err)
	}
	defer conn.Release()
	defer func() {
		if v := recover(); v != nil {
			// The outbox lock may be held: only closing the session is
			// sure to give it up.
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
			panic(v)
		}
	}()
	key := outboxLockBase | threadID
	for {
		// Rows mean this session now holds the thread's outbox; none mean
		// another session delivers it, or nothing is pending.
		first, err := e.q.OutboxClaim(ctx, conn, &dbsqlc.OutboxClaimParams{ThreadID: threadID, Key: key, Max: outboxBatch})
		if err != nil {
			// The lock may have been taken: only closing the session is
			// sure to give it up.
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
			return fmt.Errorf("claiming outbox of thread %d: %w", threadID, err)
		}
		if len(first) == 0 {
			return e.outboxSettled(ctx, conn, threadID)
		}
		more, err := e.deliverHeld(ctx, holdOn(ctx, conn, claimEpoch(first[0])), threadID, first)
		if err != nil || !more {
			return err
		}
	}
}

// deliverHeld delivers the messages of the outbox held claimed, then gives
// the outbox up and reports whether messages are still pending. When the
// connection is lost meanwhile, the message the channel took last is
// recorded through another connection, fenced (recordAfterLoss), and the
// connection is closed.
func (e *Engine) deliverHeld(ctx context.Context, held *heldConn, threadID int64, claimed []*dbsqlc.OutboxMessage) (bool, error) {
	defer held.done()
	last, deliverErr := e.deliverClaimed(held, threadID, claimed)
	if held.lost() {
		if last != nil {
			e.recordAfterLoss(ctx, last)
		}
		_ = held.conn.Conn().Close(context.WithoutCancel(ctx))
		return false, fmt.Errorf("delivering thread %d: %w", threadID, context.Cause(held.ctx))
	}
	more, err := e.releaseOutbox(context.WithoutCancel(ctx), held, threadID, last)
	if err != nil {
		_ = held.conn.Conn().Close(context.WithoutCancel(ctx))
		return false, fmt.Errorf("releasing outbox of thread %d: %w", threadID, err)
	}
	return more, deliverErr
}

// ErrOutboxBusy says that a thread's outbox has messages pending but another
// session holds it: its holder looks again after it lets go, and a job
// that got it tries again later, so that the messages keep a job until
// they are delivered even should the holder die first.
var ErrOutboxBusy = errors.New("another deliverer holds the thread's outbox")

// outboxSettled is what a claim that read nothing means: nil when the
// thread has nothing pending, ErrOutboxBusy when another session holds it.
func (e *Engine) outboxSettled(ctx context.Context, conn *pgxpool.Conn, threadID int64) error {
	pending, err := e.q.OutboxHasPending(ctx, conn, threadID)
	if err != nil {
		return fmt.Errorf("looking for pending messages of thread %d: %w", threadID, err)
	}
	if pending {
		return ErrOutboxBusy
	}
	return nil
}

// outboxBatch is how many pending messages a deliverer reads at a time.
const outboxBatch = 50

// deliverClaimed delivers pending messages, pending first, while held
// holds the thread's outbox, a page of outboxBatch at a time
// (sendInOrder). It returns the last message the channel took, which the
// caller records (releaseOutbox, or recordAfterLoss when the connection
// was lost).
func (e *Engine) deliverClaimed(held *heldConn, threadID int64, pending []*dbsqlc.OutboxMessage) (*dbsqlc.OutboxMessage, error) {
	for {
		last, err := e.sendInOrder(held, pending)
		if err != nil || held.lost() || len(pending) < outboxBatch {
			return last, err
		}
		if err := e.recordDelivered(held, last); err != nil {
			return nil, err
		}
		if pending, err = e.q.OutboxNext(held.ctx, held.conn, &dbsqlc.OutboxNextParams{ThreadID: threadID, Max: outboxBatch, Epoch: held.epoch}); err != nil {
			return nil, fmt.Errorf("listing pending messages: %w", err)
		}
		if len(pending) == 0 {
			return nil, nil
		}
	}
}

// sendInOrder hands a thread's pending messages to their channel in order,
// watching the held connection during each call. Each but the last is
// recorded delivered (with its thread.message_delivered event, in one
// statement) as soon as the channel takes it; the last, which the channel
// took, is returned for the caller to record as it gives the outbox up, so
// that a deadline or a crash re-sends at most the message in flight. So is
// the message the channel took when the connection was found lost during
// its call. A refusal is recorded as a failed attempt and stops the thread
// there.
func (e *Engine) sendInOrder(held *heldConn, pending []*dbsqlc.OutboxMessage) (*dbsqlc.OutboxMessage, error) {
	for i, m := range pending {
		// A stopping deliverer sends nothing more: what it sends, it records.
		if err := held.ctx.Err(); err != nil {
			return nil, fmt.Errorf("delivering thread %d: %w", m.ThreadID, context.Cause(held.ctx))
		}
		stop := held.watch()
		err := e.deliverOne(held.ctx, m)
		stop()
		if err != nil {
			if !held.lost() {
				e.recordFailedAttempt(held.ctx, held.conn, m, err)
			}
			return nil, fmt.Errorf("delivering message %d: %w", m.ID, err)
		}
		if i == len(pending)-1 || held.lost() {
			return m, nil
		}
		if err := e.recordDelivered(held, m); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// deliverOne hands one message to its channel and returns the channel's
// error.
func (e *Engine) deliverOne(ctx context.Context, m *dbsqlc.OutboxMessage) error {
	return e.channelFor(m.Channel).Deliver(ctx, OutboundMessage{
		ID: m.ID, Sequence: sequenceOf(m), TenantID: m.TenantID, ThreadID: m.ThreadKey, Channel: m.Channel,
		Contact: m.Contact, ExecutionID: m.ExecutionKey, Body: m.Body, CreatedAt: m.CreatedAt,
	})
}

// recordFailedAttempt counts a refused delivery of m, with its error, on
// the message, through db and fenced by the token of the claim that took
// it; the delivery's retry is what matters, so a failure to record is not
// reported.
func (e *Engine) recordFailedAttempt(ctx context.Context, db dbsqlc.DBTX, m *dbsqlc.OutboxMessage, cause error) {
	_ = e.q.MessageRecordFailedAttempt(context.WithoutCancel(ctx), db, &dbsqlc.MessageRecordFailedAttemptParams{
		ID: m.ID, Epoch: claimEpoch(m), LastError: cause.Error()})
}

// recordDelivered marks m delivered with its thread.message_delivered
// event, through the held connection and fenced: a message that carries
// another claim's token is not recorded, and stops the deliverer
// (errOutboxFenced).
func (e *Engine) recordDelivered(held *heldConn, m *dbsqlc.OutboxMessage) error {
	recorded, err := e.q.MessageRecordDelivered(context.WithoutCancel(held.ctx), held.conn, &dbsqlc.MessageRecordDeliveredParams{
		ID: m.ID, Epoch: claimEpoch(m), ThreadKey: m.ThreadKey, ExecutionKey: m.ExecutionKey, Channel: m.Channel,
	})
	if err != nil {
		return fmt.Errorf("recording message %d delivered: %w", m.ID, err)
	}
	if !recorded {
		return fmt.Errorf("recording message %d delivered: %w", m.ID, errOutboxFenced)
	}
	return nil
}

// releaseOutbox gives the thread's outbox lock up, first recording last
// (when not nil) delivered in the same statement, fenced by the claim's
// token (outbox_finish_many, as a prompt batch of one thread), and reports
// whether messages are still pending.
func (e *Engine) releaseOutbox(ctx context.Context, held *heldConn, threadID int64, last *dbsqlc.OutboxMessage) (bool, error) {
	arg := dbsqlc.OutboxFinishManyParams{ThreadIds: []int64{threadID}, Keys: []int64{outboxLockBase | threadID}, Epoch: held.epoch}
	if last != nil {
		arg.MessageIds, arg.ThreadKeys = []int64{last.ID}, []string{last.ThreadKey}
		arg.ExecutionKeys, arg.Channels = []string{last.ExecutionKey}, []string{last.Channel}
	}
	more, err := e.q.OutboxFinishMany(ctx, held.conn, &arg)
	return len(more) > 0, err
}
