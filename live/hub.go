package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine"
)

// Config configures a Hub.
type Config struct {
	// Pool is the database pool: replays read through it, and the hub's own
	// connection is opened with its connection settings. Required.
	Pool *pgxpool.Pool
	// Logger receives the hub's log lines. Nil discards them.
	Logger *slog.Logger
	// SubscriberBuffer is how many bytes of messages may wait for one
	// subscriber; a subscriber that falls further behind is dropped as too
	// slow. (Bytes, not events: one step may write a hundred small events
	// at once, which a fast client takes in stride.) A subscriber with an
	// empty queue always takes the next event. Zero means 1 MiB.
	SubscriberBuffer int
	// PollInterval is how often the hub looks for newly numbered events.
	// Zero means DefaultPollInterval.
	PollInterval time.Duration
	// RecheckInterval is how soon the hub looks again while numbered events
	// wait for older event-writing transactions to end. Zero means 20 ms.
	RecheckInterval time.Duration
	// QueryTimeout bounds each statement of the hub's connection, and each
	// host's connection attempt when the pool's settings give no
	// connect_timeout. A server that stops answering without closing the
	// connection (a primary whose machine vanished in a failover) then
	// costs at most about this long before the hub drops the connection and
	// reconnects, rather than the minutes TCP takes to give up. Zero means
	// DefaultQueryTimeout.
	QueryTimeout time.Duration
}

// DefaultQueryTimeout is a hub's QueryTimeout unless configured.
const DefaultQueryTimeout = 5 * time.Second

// sequenceLockTimeout bounds how long raising a sequence that is behind
// (after a failover) waits for running event writers, during which new
// ones wait too.
const sequenceLockTimeout = time.Second

// DefaultPollInterval is how often a hub looks for new events unless
// configured. Writers do not announce their events: a NOTIFY takes a
// database-wide lock at commit, held through the WAL flush, which would make
// every transaction that writes events commit one after another. A look
// costs one statement that draws no transaction id while nothing is new.
const DefaultPollInterval = 25 * time.Millisecond

// Hub is a process's single polling connection and the fan-out of the
// events it reads to the process's subscribers.
//
// Ordering without gaps: event ids come from a sequence, so a transaction
// can commit id 11 while id 10 is still in flight. Reading "id > cursor" and
// moving the cursor to 11 would lose 10 forever. The hub therefore reads only
// ids that are final. It takes fences (L, B): L is the sequence's last value
// and B a transaction id drawn after L was read. Every id <= L was drawn by
// a transaction that already had its xid and had registered as an event
// writer (migration 00019: a transaction advisory lock keyed by its xid,
// taken before the id), so that xid is < B. When no registered writer older
// than B is still running, all of those transactions have committed or
// rolled back, and the rows with ids <= L are exactly the ones that will ever
// exist: the hub reads (cursor, L], fans them out in id order and moves the
// cursor to L. The price is latency: while an event-writing transaction
// older than B runs, delivery waits for it. Transactions that write no
// events, in this database or any other on the server, never hold it back.
//
// Failover: after a reconnection the hub may be talking to a promoted
// standby whose sequence is behind the L of fences drawn on the old primary
// (ids handed out there whose WAL never arrived). New events would then get
// ids the hub has already passed, and be skipped. So on every connection,
// before anything else, the hub raises the sequence to the greatest id it
// has seen (cursor or L) if it is behind, and it drops the old server's
// fences: their B are transaction ids of that server.
type Hub struct {
	cfg Config
	log *slog.Logger
	q   *dbsqlc.Queries

	mu      sync.Mutex
	cursor  int64 // every event with id <= cursor has been fanned out
	subs    map[*Subscription]struct{}
	ready   chan struct{} // closed once cursor is set
	stopped bool

	cancel context.CancelFunc
	done   chan struct{}
}

// fence is (L, B) above.
type fence struct{ last, bound int64 }

// NewHub returns a Hub; Start runs it.
func NewHub(cfg Config) (*Hub, error) {
	if cfg.Pool == nil {
		return nil, errors.New("live: Config.Pool is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.SubscriberBuffer <= 0 {
		cfg.SubscriberBuffer = 1 << 20
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.RecheckInterval <= 0 {
		cfg.RecheckInterval = 20 * time.Millisecond
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = DefaultQueryTimeout
	}
	return &Hub{
		cfg: cfg, log: cfg.Logger, q: dbsqlc.New(),
		subs: map[*Subscription]struct{}{}, ready: make(chan struct{}),
	}, nil
}

// Start runs the hub in the background until Stop.
func (h *Hub) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan struct{})
	go func() {
		defer close(h.done)
		h.run(ctx)
	}()
}

// Stop stops the hub and ends every subscription (their Done channels
// close). It waits for the hub's connection to close.
func (h *Hub) Stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	for s := range h.subs {
		delete(h.subs, s)
		s.end(false)
	}
}

// run keeps a connection and serves events until ctx ends, reconnecting
// after errors.
func (h *Hub) run(ctx context.Context) {
	var fences []fence
	for ctx.Err() == nil {
		err := h.session(ctx, &fences)
		if ctx.Err() != nil {
			return
		}
		h.log.Warn("live event hub lost its connection; reconnecting", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// session is one connection's life: make sure the sequence is not behind
// what the hub has seen, then fence, serve and wait in a loop. Every
// statement is bounded by QueryTimeout.
func (h *Hub) session(ctx context.Context, fences *[]fence) error {
	cc := h.cfg.Pool.Config().ConnConfig.Copy()
	if cc.ConnectTimeout <= 0 {
		cc.ConnectTimeout = h.cfg.QueryTimeout // per host
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer func() {
		cctx, cancel := h.bounded(context.WithoutCancel(ctx))
		defer cancel()
		_ = conn.Close(cctx)
	}()
	// The fence's xid makes its statement a transaction with a commit
	// record; it need not wait for the WAL flush.
	if err := h.exec(ctx, conn, "SET synchronous_commit = off"); err != nil {
		return fmt.Errorf("configuring the connection: %w", err)
	}
	known := h.currentCursor()
	if n := len(*fences); n > 0 {
		known = max(known, (*fences)[n-1].last)
	}
	if err := h.raiseSequence(ctx, conn, known); err != nil {
		return err
	}
	*fences = nil
	timer := time.NewTimer(0)
	defer timer.Stop()
	lastFence := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
		// A recheck while fences wait needs no new fence; every poll
		// interval takes one (it costs no xid when nothing new was
		// numbered).
		if len(*fences) == 0 || time.Since(lastFence) >= h.cfg.PollInterval {
			lastFence = time.Now()
			if err := h.takeFence(ctx, conn, fences); err != nil {
				return err
			}
		}
		if len(*fences) > 0 {
			if err := h.serve(ctx, conn, fences); err != nil {
				return err
			}
		}
		wait := h.cfg.PollInterval
		if len(*fences) > 0 {
			wait = min(h.cfg.RecheckInterval, wait)
		}
		timer.Reset(wait)
	}
}

// bounded returns ctx limited to one QueryTimeout. When it expires during a
// statement pgx closes the connection, and the session ends.
func (h *Hub) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, h.cfg.QueryTimeout)
}

func (h *Hub) exec(ctx context.Context, conn *pgx.Conn, sql string) error {
	qctx, cancel := h.bounded(ctx)
	defer cancel()
	_, err := conn.Exec(qctx, sql)
	return err
}

// raiseSequence moves the event id sequence up to known if it is behind,
// which happens only after a failover to a standby that missed the old
// primary's last ids. Event inserts are locked out meanwhile, so no id is
// drawn between the check and setval (which would then move the sequence
// down); the lock waits at most sequenceLockTimeout for running writers,
// and failing that the session ends and the next one tries again. Events
// that writers on the new server numbered at or below known before this ran
// are not delivered live.
func (h *Hub) raiseSequence(ctx context.Context, conn *pgx.Conn, known int64) error {
	if known <= 0 {
		return nil
	}
	qctx, cancel := h.bounded(ctx)
	defer cancel()
	last, err := h.q.EventSequenceLast(qctx, conn)
	if err != nil {
		return fmt.Errorf("reading the event id sequence: %w", err)
	}
	if last >= known {
		return nil
	}
	err = pgx.BeginFunc(qctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(qctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", sequenceLockTimeout.Milliseconds())); err != nil {
			return err
		}
		if _, err := tx.Exec(qctx, "LOCK TABLE execution_event IN SHARE ROW EXCLUSIVE MODE"); err != nil {
			return err
		}
		return h.q.EventSequenceRaise(qctx, tx, known)
	})
	if err != nil {
		return fmt.Errorf("raising the event id sequence from %d to %d: %w", last, known, err)
	}
	h.log.Warn("live event hub raised the event id sequence, which was behind the events it had seen (a failover to a standby that missed the latest ids?)",
		"from", last, "to", known)
	return nil
}

// takeFence appends a fence when ids were drawn since the last one.
func (h *Hub) takeFence(ctx context.Context, conn *pgx.Conn, fences *[]fence) error {
	known := h.currentCursor()
	if n := len(*fences); n > 0 {
		known = (*fences)[n-1].last
	}
	qctx, cancel := h.bounded(ctx)
	defer cancel()
	f, err := h.q.EventFence(qctx, conn, known)
	if err != nil {
		return fmt.Errorf("taking an event fence: %w", err)
	}
	if f.Bound != nil {
		*fences = append(*fences, fence{last: f.LastID, bound: *f.Bound})
	} else if !h.isReady() {
		// Nothing was ever numbered past known: the start is final.
		*fences = append(*fences, fence{last: f.LastID, bound: 0})
	}
	return nil
}

// serve fans out the events below the newest fence that has become final.
func (h *Hub) serve(ctx context.Context, conn *pgx.Conn, fences *[]fence) error {
	qctx, cancel := h.bounded(ctx)
	oldest, err := h.q.EventWritersXmin(qctx, conn, (*fences)[len(*fences)-1].bound)
	cancel()
	if err != nil {
		return fmt.Errorf("reading the oldest running event writer: %w", err)
	}
	upTo := int64(-1)
	for len(*fences) > 0 && (*fences)[0].bound <= oldest {
		upTo = (*fences)[0].last
		*fences = (*fences)[1:]
	}
	if upTo < 0 {
		return nil
	}
	if !h.isReady() {
		// The first final bound is where a new process starts: its
		// subscribers replay older events with since.
		h.mu.Lock()
		h.cursor = upTo
		close(h.ready)
		h.mu.Unlock()
		return nil
	}
	after := h.currentCursor()
	for after < upTo {
		qctx, cancel := h.bounded(ctx)
		rows, err := h.q.EventStreamRange(qctx, conn, &dbsqlc.EventStreamRangeParams{
			AfterID: after, UpTo: upTo, Actions: engine.StreamedActions, Max: 1000,
		})
		cancel()
		if err != nil {
			return fmt.Errorf("reading events: %w", err)
		}
		events := make([]*Event, 0, len(rows))
		for _, r := range rows {
			ev, err := eventFromRow(r)
			if err != nil {
				return err
			}
			events = append(events, ev)
		}
		next := upTo
		if len(rows) == 1000 {
			next = rows[len(rows)-1].ID
		}
		h.fanOut(events, next)
		after = next
	}
	return nil
}

// fanOut hands events to the matching subscribers without ever blocking: a
// subscriber whose buffer is full is dropped and told it lagged.
func (h *Hub) fanOut(events []*Event, cursor int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range events {
		for s := range h.subs {
			if !s.filter.match(ev) {
				continue
			}
			if !s.push(ev, h.cfg.SubscriberBuffer) {
				delete(h.subs, s)
				s.end(true)
			}
		}
	}
	h.cursor = cursor
}

func (h *Hub) currentCursor() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cursor
}

func (h *Hub) isReady() bool {
	select {
	case <-h.ready:
		return true
	default:
		return false
	}
}

// Subscription is one subscriber's live events.
type Subscription struct {
	// Start is the hub's cursor when the subscription began: every event it
	// receives has a greater id, and the events up to Start are final and
	// readable with Replay.
	Start int64

	hub    *Hub
	filter Filter
	done   chan struct{}
	once   sync.Once
	lagged bool // guarded by hub.mu

	mu      sync.Mutex
	queue   []*Event
	pending int           // bytes in queue
	wake    chan struct{} // capacity 1: something was queued
}

// ErrLagged is Next's error for a subscriber the hub dropped because too
// many bytes of messages waited for it.
var ErrLagged = errors.New("live: subscriber too slow")

// ErrStopped is Next's error once the hub has stopped.
var ErrStopped = errors.New("live: the event hub stopped")

// Subscribe registers a subscriber. It waits until the hub knows where the
// stream starts, or ctx ends.
func (h *Hub) Subscribe(ctx context.Context, f Filter) (*Subscription, error) {
	if f.TenantID == "" {
		return nil, errors.New("live: a subscription needs a tenant")
	}
	select {
	case <-h.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the event hub: %w", ctx.Err())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return nil, ErrStopped
	}
	s := &Subscription{Start: h.cursor, hub: h, filter: f, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	h.subs[s] = struct{}{}
	return s, nil
}

// push queues ev unless that would put more than limit bytes in the queue.
func (s *Subscription) push(ev *Event, limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) > 0 && s.pending+len(ev.Message) > limit {
		return false
	}
	s.queue = append(s.queue, ev)
	s.pending += len(ev.Message)
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true
}

// Next returns the subscription's next event in id order. It returns
// ErrLagged as soon as the hub has dropped the subscriber (queued events
// are discarded), ErrStopped when the hub stopped, or ctx's error.
func (s *Subscription) Next(ctx context.Context) (*Event, error) {
	for {
		select {
		case <-s.done:
			if s.Lagged() {
				return nil, ErrLagged
			}
			return nil, ErrStopped
		default:
		}
		s.mu.Lock()
		if len(s.queue) > 0 {
			ev := s.queue[0]
			s.queue[0] = nil
			s.queue = s.queue[1:]
			s.pending -= len(ev.Message)
			s.mu.Unlock()
			return ev, nil
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-s.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Lagged reports whether the hub dropped the subscription as too slow.
func (s *Subscription) Lagged() bool {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.lagged
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	delete(s.hub.subs, s)
	s.end(false)
}

// end closes done once; the hub's mutex is held.
func (s *Subscription) end(lagged bool) {
	s.once.Do(func() {
		s.lagged = lagged
		close(s.done)
	})
}

// Replay calls fn with the tenant's events that match f and have ids in
// (after, upTo], oldest first. upTo should be a Subscription's Start, which
// is final.
func (h *Hub) Replay(ctx context.Context, f Filter, after, upTo int64, fn func(*Event) error) error {
	params := &dbsqlc.EventStreamRangeParams{UpTo: upTo, Actions: engine.StreamedActions, TenantID: &f.TenantID, Max: 500}
	if f.ExecutionID != "" {
		params.ExecutionKey = &f.ExecutionID
	}
	if f.WorkflowID != "" {
		params.WorkflowID = &f.WorkflowID
	}
	if f.ThreadID != "" {
		params.ThreadKey = &f.ThreadID
	}
	for params.AfterID = after; params.AfterID < upTo; {
		rows, err := h.q.EventStreamRange(ctx, h.cfg.Pool, params)
		if err != nil {
			return fmt.Errorf("replaying events: %w", err)
		}
		for _, r := range rows {
			ev, err := eventFromRow(r)
			if err != nil {
				return err
			}
			if err := fn(ev); err != nil {
				return err
			}
		}
		if len(rows) < int(params.Max) {
			return nil
		}
		params.AfterID = rows[len(rows)-1].ID
	}
	return nil
}
