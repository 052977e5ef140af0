package engine

import (
	"context"
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
// is at least once: an adapter may see a message again after a crash.
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
		"channel", msg.Channel, "message_id", msg.ID, "body_bytes", len(msg.Body))
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
// messages first. A deliverer that finds the outbox claimed returns at once:
// the holder looks again for pending messages after it lets go.
func (e *Engine) DeliverThread(ctx context.Context, threadID int64) error {
	return e.deliverThread(ctx, threadID, 0)
}

// deliverThread is DeliverThread; when it leaves the outbox empty, it also
// deletes the message.deliver job backstop (0: none) unless a worker has
// taken it.
func (e *Engine) deliverThread(ctx context.Context, threadID, backstop int64) error {
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
			return nil
		}
		last, deliverErr := e.deliverClaimed(ctx, conn, threadID, first)
		more, err := e.releaseOutbox(context.WithoutCancel(ctx), conn, threadID, last, backstop)
		if err != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
			return fmt.Errorf("releasing outbox of thread %d: %w", threadID, err)
		}
		if deliverErr != nil {
			return deliverErr
		}
		if !more {
			return nil
		}
	}
}

// outboxBatch is how many pending messages a deliverer reads at a time.
const outboxBatch = 50

// deliverClaimed delivers pending messages, pending first, while this
// session holds the thread's outbox. Each message is recorded delivered
// (with its thread.message_delivered event, in one statement) as soon as the
// channel takes it, except the outbox's last, which the channel took and
// which it returns: the release records it (releaseOutbox).
func (e *Engine) deliverClaimed(ctx context.Context, conn *pgxpool.Conn, threadID int64, pending []*dbsqlc.OutboxMessage) (*dbsqlc.OutboxMessage, error) {
	for {
		for i, m := range pending {
			// A stopping worker sends nothing more: what it sends, it records.
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("delivering thread %d: %w", threadID, err)
			}
			msg := OutboundMessage{
				ID: m.ID, TenantID: m.TenantID, ThreadID: m.ThreadKey, Channel: m.Channel,
				Contact: m.Contact, ExecutionID: m.ExecutionKey, Body: m.Body, CreatedAt: m.CreatedAt,
			}
			if err := e.channelFor(m.Channel).Deliver(ctx, msg); err != nil {
				_ = e.q.MessageRecordFailedAttempt(context.WithoutCancel(ctx), conn, &dbsqlc.MessageRecordFailedAttemptParams{ID: m.ID, LastError: err.Error()})
				return nil, fmt.Errorf("delivering message %d: %w", m.ID, err)
			}
			if i == len(pending)-1 && len(pending) < outboxBatch {
				return m, nil
			}
			if _, err := e.q.MessageRecordDelivered(context.WithoutCancel(ctx), conn, &dbsqlc.MessageRecordDeliveredParams{
				ID: m.ID, ThreadKey: m.ThreadKey, ExecutionKey: m.ExecutionKey, Channel: m.Channel,
			}); err != nil {
				return nil, fmt.Errorf("recording message %d delivered: %w", m.ID, err)
			}
		}
		if len(pending) < outboxBatch {
			return nil, nil
		}
		var err error
		if pending, err = e.q.OutboxNext(ctx, conn, &dbsqlc.OutboxNextParams{ThreadID: threadID, Max: outboxBatch}); err != nil {
			return nil, fmt.Errorf("listing pending messages: %w", err)
		}
	}
}

// releaseOutbox gives the thread's outbox lock up, first recording last
// (when not nil) delivered in the same statement, and reports whether
// messages are still pending. With none left, the backstop job (0: none)
// is deleted.
func (e *Engine) releaseOutbox(ctx context.Context, conn *pgxpool.Conn, threadID int64, last *dbsqlc.OutboxMessage, backstop int64) (bool, error) {
	key := outboxLockBase | threadID
	if last == nil {
		return e.q.OutboxRelease(ctx, conn, &dbsqlc.OutboxReleaseParams{ThreadID: threadID, Key: key, Backstop: backstop})
	}
	return e.q.OutboxFinish(ctx, conn, &dbsqlc.OutboxFinishParams{ThreadID: threadID, Key: key, ID: last.ID,
		ThreadKey: last.ThreadKey, ExecutionKey: last.ExecutionKey, Channel: last.Channel, Backstop: backstop})
}
