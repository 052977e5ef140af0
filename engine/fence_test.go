package engine_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/jobs"
)

// arrival is a message as a receiver got it, and from which process.
type arrival struct {
	from string
	msg  engine.OutboundMessage
}

// receiver is the far end of the channels of several processes: it
// records every message in the order they arrive.
type receiver struct {
	mu       sync.Mutex
	arrivals []arrival
}

func (r *receiver) add(from string, msg engine.OutboundMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.arrivals = append(r.arrivals, arrival{from: from, msg: msg})
}

func (r *receiver) all() []arrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]arrival(nil), r.arrivals...)
}

// accepted is what a receiver that follows the documented rule keeps: per
// thread, a message whose Sequence is over the highest seen so far; any
// other is a repeat or a stale copy, dropped.
func (r *receiver) accepted() []engine.OutboundMessage {
	highest := map[string]int64{}
	var out []engine.OutboundMessage
	for _, a := range r.all() {
		if a.msg.Sequence <= highest[a.msg.ThreadID] {
			continue
		}
		highest[a.msg.ThreadID] = a.msg.Sequence
		out = append(out, a.msg)
	}
	return out
}

// receiverChannel hands every message to the receiver at once.
type receiverChannel struct {
	from string
	to   *receiver
}

func (c *receiverChannel) Deliver(_ context.Context, msg engine.OutboundMessage) error {
	c.to.add(c.from, msg)
	return nil
}

// stuckChannel is a channel whose calls hang until released, whatever
// their context says, then reach the receiver: a request already on the
// wire when its deliverer gave up. It keeps the context of its last call.
type stuckChannel struct {
	from    string
	to      *receiver
	release chan struct{}
	calls   atomic.Int32
	mu      sync.Mutex
	ctx     context.Context
}

func (c *stuckChannel) Deliver(ctx context.Context, msg engine.OutboundMessage) error {
	c.calls.Add(1)
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
	<-c.release
	c.to.add(c.from, msg)
	return nil
}

// cause is why the last call's context ended, nil while it has not.
func (c *stuckChannel) cause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		return nil
	}
	return context.Cause(c.ctx)
}

// logged reports whether a line of logs has a message containing text.
func logged(t *testing.T, logs *logBuffer, text string) bool {
	for _, line := range logs.lines(t) {
		if msg, _ := line["msg"].(string); strings.Contains(msg, text) {
			return true
		}
	}
	return false
}

const twiceWorkflow = `{"workflow_id": "twice", "version": "1", "nodes": [
  {"id": "start", "type": "start", "next": "one"},
  {"id": "one", "type": "action", "actionType": "send_message", "parameters": {"message": "m1"}, "next": "two"},
  {"id": "two", "type": "action", "actionType": "send_message", "parameters": {"message": "m2"}, "next": "end"},
  {"id": "end", "type": "end"}]}`

// messageState is what the database says of a thread's messages.
func messageState(t *testing.T, pool *pgxpool.Pool, thread string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT m.body || ' ' || m.status || ' attempts=' || m.attempts || ' at=' || coalesce(m.delivered_at::text, '-')
		       || ' token=' || coalesce(m.claim_epoch::text, '-') || ' error=' || coalesce(m.last_error, '-')
		       || ' events=' || (SELECT count(*) FROM execution_event e
		                         WHERE e.action = 'thread.message_delivered' AND e.payload->>'message_id' = m.id::text)
		FROM thread_message m JOIN thread t ON t.id = m.thread_id
		WHERE t.thread_id = $1 AND m.direction = 'out'
		ORDER BY m.id`, thread)
	require.NoError(t, err)
	state, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return state
}

// Two processes on one database. A delivers promptly and its channel call
// for m1 hangs; A's connection holding the outbox lock is terminated: A
// learns it at once (the call's context ends, ErrOutboxLost), B's outbox
// reaper hands the thread to B, which delivers m1 and m2. Then A's call
// goes through after all. A's late record of m1 changes nothing in the
// database, and a receiver that keeps the highest sequence it has seen and
// drops anything at or below it gets m1 and m2 once each, in order.
func TestStaleOutboxHolderIsFenced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	far := &receiver{}

	// A: delivers promptly, works no jobs.
	staleConfig, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	stalePool, err := pgxpool.NewWithConfig(ctx, staleConfig)
	require.NoError(t, err)
	t.Cleanup(stalePool.Close)
	stuck := &stuckChannel{from: "A", to: far, release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(stuck.release) }) }
	logs := &logBuffer{}
	stale, err := engine.New(engine.Config{Pool: stalePool, Channel: stuck, DeliveryRescueAfter: time.Hour,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	require.NoError(t, err)
	_, err = jobs.NewClient(stalePool, jobs.Config{Engine: stale, InsertOnly: true}) // its job inserter
	require.NoError(t, err)
	t.Cleanup(stale.DeliverPromptly(4))
	t.Cleanup(release) // before prompt delivery stops, which waits for the call

	// B: works River jobs, its outbox reaper among them.
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	other, err := engine.New(engine.Config{Pool: pool, Channel: &receiverChannel{from: "B", to: far}, DeliveryRescueAfter: 300 * time.Millisecond})
	require.NoError(t, err)
	client, err := jobs.NewClient(pool, jobs.Config{Engine: other, DeliverReapInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	startClient(t, client)
	_, _, err = other.DefineWorkflow(ctx, pool, "tenant-fence", []byte(twiceWorkflow))
	require.NoError(t, err)

	require.NoError(t, stale.WithTx(ctx, func(tx pgx.Tx) error {
		_, err := stale.StartExecution(ctx, tx, engine.StartParams{TenantID: "tenant-fence", WorkflowID: "twice", ThreadID: "fenced"})
		return err
	}))
	require.Eventually(t, func() bool { return stuck.calls.Load() == 1 }, 10*time.Second, 5*time.Millisecond,
		"A took m1 to its channel")

	// The connection holding the thread's outbox lock is terminated.
	var threadID int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM thread WHERE thread_id = 'fenced'`).Scan(&threadID))
	key := engine.OutboxLockBase | threadID
	require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 1 AND classid::bigint = $1::bigint >> 32 AND objid::bigint = $1::bigint & 4294967295) k
		WHERE pg_terminate_backend`, key), "one session held the outbox, and it was ended")
	require.Eventually(t, func() bool { return stuck.cause() != nil }, 10*time.Second, 5*time.Millisecond,
		"A's call in flight was cancelled when its lock connection was lost")
	require.ErrorIs(t, stuck.cause(), engine.ErrOutboxLost)

	require.Eventually(t, func() bool { return len(far.all()) == 2 }, 20*time.Second, 10*time.Millisecond,
		"B delivered both messages")
	require.Eventually(t, func() bool {
		return countRows(t, pool, `SELECT count(*) FROM thread_message WHERE status = 'delivered'`) == 2
	}, 10*time.Second, 10*time.Millisecond)
	before := messageState(t, pool, "fenced")

	release() // A's call goes through after all
	require.Eventually(t, func() bool { return logged(t, logs, "claimed by another deliverer meanwhile") },
		10*time.Second, 10*time.Millisecond, "A tried to record m1 and was fenced off")
	require.Equal(t, before, messageState(t, pool, "fenced"), "A's late record changed nothing")
	for _, m := range before {
		require.Contains(t, m, " delivered attempts=1 ")
		require.Contains(t, m, " events=1")
	}

	got := far.all()
	require.Len(t, got, 3)
	require.Equal(t, []string{"B", "B", "A"}, []string{got[0].from, got[1].from, got[2].from})
	require.Equal(t, "m1", got[2].msg.Body, "A's copy of m1 came last")
	require.Equal(t, got[0].msg.Sequence, got[2].msg.Sequence, "a copy carries its message's sequence")
	accepted := far.accepted()
	require.Len(t, accepted, 2)
	require.Equal(t, []string{"m1", "m2"}, []string{accepted[0].Body, accepted[1].Body})
	require.Less(t, accepted[0].Sequence, accepted[1].Sequence)
	require.Eventually(t, func() bool {
		return countRows(t, pool, `SELECT count(*) FROM river_job WHERE kind = 'message.deliver' AND `+liveJob) == 0
	}, 10*time.Second, 10*time.Millisecond, "whatever jobs A handed the thread to find nothing left")
	require.Len(t, far.all(), 3, "nobody sent anything more")
}

// A thread's delivery sequence follows the order its messages go out in,
// which is not the order they were written in: B's queued messages, written
// before A's last one, go out after it, when A gives the thread up. Each
// message has a sequence of its own, B's two released together included,
// so a receiver keeping the highest sequence drops none of them.
func TestDeliverySequenceFollowsDeliveryOrder(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, setupOpts{tools: map[string]engine.ToolFunc{"gate": g.tool}})
	b.define(t, talker("agent-a", []string{"a1"}, []string{"a2"}))
	b.define(t, talker("agent-b", []string{"b1", "b2"}, nil))

	a := b.start(t, engine.StartParams{WorkflowID: "agent-a", ThreadID: "order", Input: map[string]any{"key": "a"}})
	g.waitEntered(t, "a")
	bx := b.start(t, engine.StartParams{WorkflowID: "agent-b", ThreadID: "order", Input: map[string]any{"key": "b"}})
	g.waitEntered(t, "b") // its two messages queued
	g.release("a")        // A sends a2, ends, and the drain releases B's messages
	b.waitFor(t, a.ExecutionID, terminal)
	b.waitDelivered(t, "order", 4)
	g.release("b")
	b.waitFor(t, bx.ExecutionID, terminal)

	var sent []engine.OutboundMessage
	for _, m := range b.channel.Messages() {
		if m.ThreadID == "order" {
			sent = append(sent, m)
		}
	}
	require.Len(t, sent, 4)
	require.Equal(t, []string{"a1", "a2", "b1", "b2"}, []string{sent[0].Body, sent[1].Body, sent[2].Body, sent[3].Body})
	require.Greater(t, sent[1].ID, sent[2].ID, "a2 was written after b1 and went out before it: ids are not the delivery order")
	for i := 1; i < len(sent); i++ {
		require.Greater(t, sent[i].Sequence, sent[i-1].Sequence, "message %d's sequence", i)
	}
}
