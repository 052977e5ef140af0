package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Prompt delivery.
//
// A message a step sends is in the outbox once its transaction commits.
// Without prompt delivery a message.deliver job, due at once, takes it to
// the channel: a River hop (fetch, then the delivery) and the job's
// completion. With it (DeliverPromptly), the process that committed
// delivers the thread's outbox right away, on one of a bounded number of
// goroutines, and the job is only a backstop: it is inserted due
// deliverBackstop later, and the prompt delivery deletes it, in the
// statement that gives the outbox up, once the outbox is empty. Should the
// process die or the channel fail first, the backstop job delivers as
// before, with its retries: delivery stays at least once, in outbox order
// (the outbox lock lets one deliverer per thread work at a time).
//
// When every goroutine is busy, the backstop is made due at once instead,
// and River delivers it.

// deliverBackstop is how long after its transaction a promptly delivered
// message's backstop job is due.
const deliverBackstop = 2 * time.Second

// promptDelivery runs prompt deliveries on up to cap(slots) goroutines.
type promptDelivery struct {
	e      *Engine
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{}
	// mu orders start's wg.Add before stop's wg.Wait.
	mu sync.RWMutex
	wg sync.WaitGroup
}

// DeliverPromptly makes this process deliver the messages its transactions
// send right after they commit, on up to workers goroutines, with
// message.deliver jobs as backstops (see "Prompt delivery"). A process that
// works River jobs calls it; stop ends it and waits for the deliveries in
// flight, whose messages a backstop job delivers if they were cut short.
func (e *Engine) DeliverPromptly(workers int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	p := &promptDelivery{e: e, ctx: ctx, cancel: cancel, slots: make(chan struct{}, max(workers, 1))}
	e.prompt.Store(p)
	return func() {
		e.prompt.CompareAndSwap(p, nil)
		p.mu.Lock()
		cancel()
		p.mu.Unlock()
		p.wg.Wait()
	}
}

// enqueueDelivery makes sure the thread's pending messages go out once tx
// commits: promptly by this process with a backstop job, or by a job due
// now when prompt delivery is off or tx is not one of WithTx's (nothing
// would run after its commit).
func (e *Engine) enqueueDelivery(ctx context.Context, tx pgx.Tx, threadID int64) error {
	p := e.prompt.Load()
	if _, ok := tx.(*committingTx); !ok || p == nil {
		if _, err := e.jobs.InsertDeliver(ctx, tx, threadID, time.Time{}); err != nil {
			return fmt.Errorf("enqueueing delivery: %w", err)
		}
		return nil
	}
	jobID, err := e.jobs.InsertDeliver(ctx, tx, threadID, time.Now().Add(deliverBackstop))
	if err != nil {
		return fmt.Errorf("enqueueing delivery: %w", err)
	}
	afterCommit(tx, func() { p.start(threadID, jobID) })
	return nil
}

// start delivers the thread on a free goroutine, or makes its backstop due
// now when none is free.
func (p *promptDelivery) start(threadID, jobID int64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.ctx.Err() != nil {
		return // stopping: the backstop delivers
	}
	select {
	case p.slots <- struct{}{}:
	default:
		p.handOver(jobID)
		return
	}
	p.wg.Go(func() {
		defer func() { <-p.slots }()
		p.deliver(threadID, jobID)
	})
}

// deliver delivers the thread's outbox. On a failure or a panic the
// backstop job is made due now, and River delivers with its retries.
func (p *promptDelivery) deliver(threadID, jobID int64) {
	defer func() {
		if v := recover(); v != nil {
			p.e.ErrorContext(p.ctx, "prompt delivery panicked; its job delivers", "thread_row_id", threadID, "job_id", jobID, "panic", fmt.Sprint(v))
			p.handOver(jobID)
		}
	}()
	if err := p.e.deliverThread(p.ctx, threadID, jobID); err != nil {
		p.e.DebugContext(p.ctx, "prompt delivery stopped; its job delivers", "thread_row_id", threadID, "job_id", jobID, "error", err)
		p.handOver(jobID)
	}
}

// handOver makes the backstop job due now, unless this process is stopping
// (it is then due at its time).
func (p *promptDelivery) handOver(jobID int64) {
	if p.ctx.Err() != nil {
		return
	}
	if err := p.e.jobs.DeliverNow(p.ctx, jobID); err != nil {
		p.e.WarnContext(p.ctx, "making a delivery job due now failed; it runs at its time", "job_id", jobID, "error", err)
	}
}
