package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/db/dbsqlc"
)

// Prompt delivery.
//
// A message a step sends is in the outbox once its transaction commits.
// Without prompt delivery a message.deliver job, due at once, takes it to
// the channel: a River hop (fetch, then the delivery) and the job's
// completion. With it (DeliverPromptly), the process that committed
// delivers the thread's outbox right away, and no job is inserted: when the
// channel refuses, every slot is busy or the process stops, the process
// inserts the thread's message.deliver job then, due at once, and River
// delivers with its retries. Should the process die first, the outbox
// reaper (ReapOutboxes, run every second on River's leader) finds the
// thread's message pending for DeliveryRescueAfter with no job, and
// inserts one. Delivery stays at least once, in outbox order (the outbox
// lock lets one deliverer per thread work at a time); a holder that gives
// an outbox up looks for messages committed meanwhile (outbox_finish_many
// reads them after the unlock) and delivers them too.
//
// Prompt deliveries go in batches, so that the threads of a busy process
// share their round trips and their commit. One goroutine takes every
// thread queued since its last batch, claims their outboxes in one
// statement (outbox_claim_many), hands each thread's first pending message
// to its channel on a goroutine of its own, and, once all are taken or
// straggleAfter has passed, records the message of each thread that is
// done and gives those outboxes up in one statement (outbox_finish_many).
// Threads still sending finish in groups as they arrive, with the batch's
// connection, which holds their outbox locks, while the next batch starts. One message
// per thread, so that a crash re-sends at most the message in flight on
// each; a thread with messages still pending after its batch is queued
// again at once. At low load a batch is a single thread and costs what a
// delivery alone did.
//
// A delivery holds one of a bounded number of slots from its commit until
// its thread is done. When every slot is busy, or the delivery fails, its
// job is inserted instead, and River delivers it.

// DefaultPromptSlots is how many prompt deliveries a process lets be queued
// or in flight at once (DeliverPromptly). A slot is held from the commit
// until the thread is done, so the bound must cover the deliveries that
// arrive while a batch is out, not only the sends: with 32 slots, 16
// closed-loop clients on 2 cores found every slot busy for 12 % of their
// messages, each of which then cost a job.
const DefaultPromptSlots = 256

// handOverTimeout bounds the transaction that inserts the job of a thread
// this process gives up, which may run while it stops.
const handOverTimeout = 5 * time.Second

// straggleAfter is how long a batch waits for its slowest channel before it
// records the threads that are done and starts the next batch.
const straggleAfter = 20 * time.Millisecond

// promptDelivery delivers the threads queued by committed transactions, in
// batches, with up to cap(slots) deliveries queued or in flight.
type promptDelivery struct {
	e      *Engine
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{}
	wake   chan struct{}
	// mu guards queue, and orders start's queueing before stop's cancel.
	mu    sync.Mutex
	queue []promptItem
	wg    sync.WaitGroup
	// batches and threads count the batches claimed and the threads they
	// delivered.
	batches, threads atomic.Int64
}

// promptItem is a thread queued for delivery and the slots it holds: one
// per committed transaction that sent on it.
type promptItem struct {
	threadID int64
	slots    int
}

// DeliverPromptly makes this process deliver the messages its transactions
// send right after they commit, with up to slots deliveries queued or in
// flight (DefaultPromptSlots in baton serve) and message.deliver jobs for
// what it gives up (see "Prompt delivery"). A process that works River jobs
// calls it; stop ends it, waits for the deliveries in flight and hands what
// is left to jobs.
func (e *Engine) DeliverPromptly(slots int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	p := &promptDelivery{e: e, ctx: ctx, cancel: cancel,
		slots: make(chan struct{}, max(slots, 1)), wake: make(chan struct{}, 1)}
	p.wg.Go(p.run)
	e.prompt.Store(p)
	return func() {
		e.prompt.CompareAndSwap(p, nil)
		p.mu.Lock()
		cancel()
		p.mu.Unlock()
		p.wg.Wait()
		p.giveUpAll(byThread(p.take()), context.Canceled)
	}
}

// enqueueDelivery makes sure the thread's pending messages go out once tx
// commits: promptly by this process, or by a job due now when prompt
// delivery is off or tx is not one of WithTx's (nothing would run after its
// commit).
func (e *Engine) enqueueDelivery(ctx context.Context, tx pgx.Tx, threadID int64) error {
	p := e.prompt.Load()
	if _, ok := tx.(*committingTx); !ok || p == nil {
		if err := e.jobs.InsertDeliver(ctx, tx, threadID); err != nil {
			return fmt.Errorf("enqueueing delivery: %w", err)
		}
		return nil
	}
	afterCommit(tx, func() { p.start(threadID) })
	return nil
}

// start queues the thread for the next batch, or hands it to its job when
// every slot is busy or the process is stopping.
func (p *promptDelivery) start(threadID int64) {
	select {
	case p.slots <- struct{}{}:
	default:
		p.handOver(threadID)
		return
	}
	p.mu.Lock()
	if p.ctx.Err() != nil {
		p.mu.Unlock()
		<-p.slots
		p.handOver(threadID)
		return
	}
	p.queue = append(p.queue, promptItem{threadID: threadID, slots: 1})
	p.mu.Unlock()
	p.signal()
}

// signal wakes run, which then takes everything queued.
func (p *promptDelivery) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run delivers batches until the process stops.
func (p *promptDelivery) run() {
	for {
		select {
		case <-p.ctx.Done():
			return // stop hands what is queued to jobs
		case <-p.wake:
		}
		for items := p.take(); len(items) > 0 && p.ctx.Err() == nil; items = p.take() {
			p.deliverBatch(items)
		}
	}
}

// take empties the queue.
func (p *promptDelivery) take() []promptItem {
	p.mu.Lock()
	defer p.mu.Unlock()
	items := p.queue
	p.queue = nil
	return items
}

// requeue queues a thread again, with the slots it holds.
func (p *promptDelivery) requeue(t *threadDelivery) {
	p.mu.Lock()
	p.queue = append(p.queue, promptItem{threadID: t.threadID, slots: t.slots})
	p.mu.Unlock()
	p.signal()
}

// release gives up the slots a thread holds.
func (p *promptDelivery) release(t *threadDelivery) {
	for range t.slots {
		<-p.slots
	}
}

// handOver inserts the threads' message.deliver jobs, due now, in one
// statement of a transaction of its own, also while the process stops.
// Should that fail, the outbox reaper inserts them later.
func (p *promptDelivery) handOver(threadIDs ...int64) {
	if len(threadIDs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), handOverTimeout)
	defer cancel()
	if err := p.e.insertDeliveries(ctx, threadIDs...); err != nil {
		p.e.WarnContext(ctx, "enqueueing deliveries failed; the outbox reaper enqueues them", "threads", len(threadIDs), "error", err)
	}
}

// threadDelivery is one thread of a batch.
type threadDelivery struct {
	threadID int64
	// slots are the slots the thread holds, one per committed transaction
	// that queued it.
	slots int
	// message is the thread's first pending message, once claimed; err is
	// its channel's refusal.
	message *dbsqlc.OutboxMessage
	err     error
}

// byThread gathers the items of a batch by thread, in queue order.
func byThread(items []promptItem) []*threadDelivery {
	var threads []*threadDelivery
	index := map[int64]*threadDelivery{}
	for _, it := range items {
		t := index[it.threadID]
		if t == nil {
			t = &threadDelivery{threadID: it.threadID}
			index[it.threadID] = t
			threads = append(threads, t)
		}
		t.slots += it.slots
	}
	return threads
}

// deliverBatch claims the batch's outboxes, sends their first messages and
// records them (see "Prompt delivery"). Only the batch's connection is
// held while it works, so that batches waiting on slow channels can never
// keep one another from a connection: the channels' goroutines use none,
// and hand-overs to the jobs happen once it is let go.
func (p *promptDelivery) deliverBatch(items []promptItem) {
	threads := byThread(items)
	conn, err := p.e.pool.Acquire(p.ctx)
	if err != nil {
		p.giveUpAll(threads, err)
		return
	}
	claimed, err := p.claim(conn, threads)
	if err != nil {
		// The locks may have been taken: only closing the session is sure
		// to give them up.
		_ = conn.Conn().Close(context.WithoutCancel(p.ctx))
		conn.Release()
		p.giveUpAll(threads, err)
		return
	}
	if len(claimed) == 0 {
		conn.Release()
		return
	}
	p.batches.Add(1)
	p.threads.Add(int64(len(claimed)))
	b := &batchConn{held: holdOn(p.ctx, conn, claimEpoch(claimed[0].message))}
	done := make(chan *threadDelivery, len(claimed))
	for _, t := range claimed {
		go p.send(b.held.ctx, t, done)
	}
	ready := b.collect(done, len(claimed))
	failed := p.finish(b, ready)
	rest := len(claimed) - len(ready)
	if rest == 0 {
		b.letGo(p.ctx)
		p.giveUpAll(failed, nil)
		return
	}
	if !b.broken {
		p.giveUpAll(failed, nil) // their outboxes are given up
		failed = nil
	}
	// The stragglers finish in groups as they arrive, and the connection
	// is let go once the last has.
	p.wg.Go(func() {
		for rest > 0 {
			late := b.collect(done, rest)
			rest -= len(late)
			failed = append(failed, p.finish(b, late)...)
		}
		b.letGo(p.ctx)
		p.giveUpAll(failed, nil)
	})
}

// batchConn is a batch's connection, which holds its threads' outbox locks
// until they are finished, watched while the channels have the batch's
// messages (heldConn). A statement that failed on it leaves it broken:
// which locks it still holds is unknown, so it is closed, which gives them
// all up, but only once no send of the batch is in flight, since a lock
// given up while its thread is still sending would let a second deliverer
// in; the batch's threads are handed to their jobs after that. A
// connection found lost is broken too, and its sends in flight are
// cancelled at once: its locks are gone already.
type batchConn struct {
	held   *heldConn
	broken bool
}

// errBatchBroken stops the threads of a batch whose connection broke.
var errBatchBroken = errors.New("an earlier statement of the delivery batch failed")

// collect receives from done, watching the connection meanwhile, the
// threads whose channel calls end before straggleAfter passes, up to n.
func (b *batchConn) collect(done <-chan *threadDelivery, n int) []*threadDelivery {
	stop := b.held.watch()
	defer stop()
	return collect(done, n, time.After(straggleAfter))
}

// letGo returns the connection to the pool, closed first when broken.
func (b *batchConn) letGo(ctx context.Context) {
	b.held.done()
	if b.broken {
		_ = b.held.conn.Conn().Close(context.WithoutCancel(ctx))
	}
	b.held.conn.Release()
}

// giveUpAll hands the threads to their jobs, inserted together, and gives
// up their slots; err, when not nil, is what stopped them all, else each
// its own.
func (p *promptDelivery) giveUpAll(threads []*threadDelivery, err error) {
	ids := make([]int64, len(threads))
	for i, t := range threads {
		p.e.DebugContext(p.ctx, "prompt delivery stopped; its job delivers", "thread_row_id", t.threadID, "error", cmp.Or(err, t.err))
		ids[i] = t.threadID
	}
	p.handOver(ids...)
	for _, t := range threads {
		p.release(t)
	}
}

// claim takes the outboxes of the batch's threads and reads the first
// pending message of each: one, so that what a channel has taken is never
// more than the message a crash would send again. The threads it returns
// are those whose outbox conn now holds; the others are done: empty, or
// held by another session, which looks for them once it lets go.
func (p *promptDelivery) claim(conn *pgxpool.Conn, threads []*threadDelivery) ([]*threadDelivery, error) {
	ids := make([]int64, len(threads))
	keys := make([]int64, len(threads))
	index := make(map[int64]*threadDelivery, len(threads))
	for i, t := range threads {
		ids[i], keys[i] = t.threadID, outboxLockBase|t.threadID
		index[t.threadID] = t
	}
	rows, err := p.e.q.OutboxClaimMany(p.ctx, conn, &dbsqlc.OutboxClaimManyParams{ThreadIds: ids, Keys: keys, Max: 1})
	if err != nil {
		return nil, fmt.Errorf("claiming outboxes: %w", err)
	}
	for _, m := range rows {
		index[m.ThreadID].message = m
	}
	var claimed []*threadDelivery
	for _, t := range threads {
		if t.message == nil {
			p.release(t)
			continue
		}
		claimed = append(claimed, t)
	}
	return claimed, nil
}

// send hands a thread's claimed message to its channel, with ctx, and
// reports on done. A channel adapter that panics stops the thread like one
// that refuses.
func (p *promptDelivery) send(ctx context.Context, t *threadDelivery, done chan<- *threadDelivery) {
	defer func() {
		if v := recover(); v != nil {
			p.e.ErrorContext(p.ctx, "channel adapter panicked; the delivery's job delivers", "thread_row_id", t.threadID, "panic", fmt.Sprint(v))
			t.err = fmt.Errorf("channel adapter panicked: %v", v)
		}
		done <- t
	}()
	if err := ctx.Err(); err != nil {
		t.err = err // stopping: what is sent is recorded, so send nothing more
		return
	}
	t.err = p.e.deliverOne(ctx, t.message)
}

// collect receives n threads from done, or as many as arrive before
// deadline (nil: no deadline).
func collect(done <-chan *threadDelivery, n int, deadline <-chan time.Time) []*threadDelivery {
	ready := make([]*threadDelivery, 0, n)
	for len(ready) < n {
		select {
		case t := <-done:
			ready = append(ready, t)
		case <-deadline:
			return ready
		}
	}
	return ready
}

// finish records the refusals, then, in one statement, records the message
// of each other thread delivered and gives the threads' outboxes up (held
// by the batch's connection), fenced by the batch's token. It queues again
// the threads with messages still pending and returns those to hand to
// their jobs: the refused ones, those still pending when the process
// stops, or all when the connection is broken. When it is found lost, the
// messages the channels took are recorded through another connection
// (recordAfterLoss).
func (p *promptDelivery) finish(b *batchConn, threads []*threadDelivery) (failed []*threadDelivery) {
	if len(threads) == 0 {
		return nil
	}
	if b.held.lost() {
		b.broken = true
		cause := context.Cause(b.held.ctx)
		for _, t := range threads {
			if t.err == nil {
				p.e.recordAfterLoss(p.ctx, t.message)
			}
			t.err = cmp.Or(t.err, cause)
		}
		return threads
	}
	if b.broken {
		for _, t := range threads {
			t.err = cmp.Or(t.err, errBatchBroken)
		}
		return threads
	}
	conn := b.held.conn
	arg := dbsqlc.OutboxFinishManyParams{Epoch: b.held.epoch}
	for _, t := range threads {
		arg.ThreadIds = append(arg.ThreadIds, t.threadID)
		arg.Keys = append(arg.Keys, outboxLockBase|t.threadID)
		m := t.message
		switch {
		case t.err == nil:
			arg.MessageIds = append(arg.MessageIds, m.ID)
			arg.ThreadKeys = append(arg.ThreadKeys, m.ThreadKey)
			arg.ExecutionKeys = append(arg.ExecutionKeys, m.ExecutionKey)
			arg.Channels = append(arg.Channels, m.Channel)
		case !errors.Is(t.err, context.Canceled): // not sent because stopping: no attempt
			p.e.recordFailedAttempt(p.ctx, conn, m, t.err)
		}
	}
	more, err := p.e.q.OutboxFinishMany(context.WithoutCancel(p.ctx), conn, &arg)
	if err != nil {
		b.broken = true
		for _, t := range threads {
			t.err = cmp.Or(t.err, fmt.Errorf("releasing outboxes: %w", err))
		}
		return threads
	}
	pending := make(map[int64]bool, len(more))
	for _, id := range more {
		pending[id] = true
	}
	for _, t := range threads {
		switch {
		case t.err != nil:
			failed = append(failed, t)
		case pending[t.threadID] && p.ctx.Err() == nil:
			p.requeue(t)
		case pending[t.threadID]:
			failed = append(failed, t)
		default:
			p.release(t)
		}
	}
	return failed
}
