package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/benchkit"
)

// soakTenant owns everything the soak runs.
const soakTenant = "soak"

// soakInboundWorkflow is the default workflow of the soak's threads: an
// inbound message starts a five-node run that answers it.
var soakInboundWorkflow = benchkit.FiveNode{ID: "soak-inbound", Name: "lastResponse", Condition: "${lastResponse} != ''"}.JSON()

// soakWaitWorkflow is benchkit.WaitWorkflow as "soak-wait", its wait
// ending after timeout when no event comes: a resumed run's timer job stays
// scheduled until then, so a timeout as long as the soak would grow River's
// table with every resume.
func soakWaitWorkflow(timeout time.Duration) string {
	w := strings.Replace(benchkit.WaitWorkflow, `"bench-wait"`, `"soak-wait"`, 1)
	return strings.Replace(w, `"timeout": "1h"`, fmt.Sprintf(`"timeout": "%ds"`, int(timeout.Seconds())), 1)
}

// soakKind is one of the soak's three kinds of work; client i does kind
// i % len(soakKinds).
type soakKind int

const (
	soakRun     soakKind = iota // a five-node run started and settled in its transaction
	soakResume                  // a run that waits for an event; the soak publishes it
	soakInbound                 // a message on the client's thread, answered by a run
)

// soakKinds gives starts half the clients.
var soakKinds = []soakKind{soakRun, soakRun, soakResume, soakInbound}

// soakWindow is what the clients did since the last sample.
type soakWindow struct {
	runs    benchkit.Latencies // start call → terminal
	resumes benchkit.Latencies // event published → the run terminal
	inbound benchkit.Latencies // message received → its run terminal
}

func (w soakWindow) terminal() int { return len(w.runs) + len(w.resumes) + len(w.inbound) }

// soakLoad drives the soak's clients, each paced to its share of the rate.
type soakLoad struct {
	baton    *benchkit.Baton
	pool     *pgxpool.Pool
	clients  int
	interval time.Duration // between one client's operations
	threads  []int64       // row id of client i's thread (inbound clients only)
	runs     *benchkit.Watch[int64]
	handled  *benchkit.Watch[benchkit.InboundKey]
	seq      atomic.Int64

	mu  sync.Mutex
	win soakWindow
}

// take returns what the clients did since the last take.
func (l *soakLoad) take() soakWindow {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.win
	l.win = soakWindow{}
	return w
}

func (l *soakLoad) record(k soakKind, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch k {
	case soakResume:
		l.win.resumes = append(l.win.resumes, d)
	case soakInbound:
		l.win.inbound = append(l.win.inbound, d)
	default:
		l.win.runs = append(l.win.runs, d)
	}
}

// run runs every client until ctx is done; it returns the first error of
// an operation.
func (l *soakLoad) run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, w := range []interface{ Poll(context.Context) error }{l.runs, l.handled} {
		wg.Go(func() {
			if err := w.Poll(ctx); err != nil {
				cancel(err)
			}
		})
	}
	for i := range l.clients {
		wg.Go(func() {
			// Spread the clients' first operations over one interval.
			next := time.Now().Add(time.Duration(rand.Int64N(int64(l.interval))))
			for {
				if err := benchkit.SleepCtx(ctx, time.Until(next)); err != nil {
					return
				}
				next = next.Add(l.interval)
				if err := l.operate(ctx, i); err != nil && ctx.Err() == nil {
					cancel(fmt.Errorf("client %d: %w", i, err))
					return
				}
			}
		})
	}
	<-ctx.Done()
	wg.Wait()
	if err := context.Cause(ctx); err != context.Canceled {
		return err
	}
	return nil
}

// operate does client i's next operation and records how long it took.
func (l *soakLoad) operate(ctx context.Context, i int) error {
	kind := soakKinds[i%len(soakKinds)]
	switch kind {
	case soakResume:
		return l.resume(ctx)
	case soakInbound:
		return l.inbound(ctx, i)
	default:
		began := time.Now()
		x, err := l.baton.Start(ctx, engine.StartParams{TenantID: soakTenant, WorkflowID: "bench", Input: benchkit.FiveNodeInput()})
		if err != nil {
			return err
		}
		if !engine.IsTerminal(x.Status) { // it waited its turn in the lane
			select {
			case <-l.runs.Wait(x.ID):
			case <-ctx.Done():
				return nil
			}
		}
		l.record(kind, time.Since(began))
		return nil
	}
}

// resume starts a run that waits for an event, lets it wait up to 200 ms,
// publishes the event and records the time from the event to the run's end.
func (l *soakLoad) resume(ctx context.Context) error {
	x, err := l.baton.Start(ctx, engine.StartParams{TenantID: soakTenant, WorkflowID: "soak-wait"})
	if err != nil {
		return err
	}
	if err := benchkit.SleepCtx(ctx, time.Duration(rand.Int64N(int64(200*time.Millisecond)))); err != nil {
		return nil
	}
	done := l.runs.Wait(x.ID)
	began := time.Now()
	if _, err := l.baton.Engine.PublishEvent(ctx, engine.PublishEventParams{TenantID: soakTenant, EventType: engine.EventTypeEventCompleted,
		EventID: "soak-" + x.ExecutionID, ExecutionID: x.ExecutionID, Data: map[string]any{"event_id": "go"}}); err != nil {
		return fmt.Errorf("publishing: %w", err)
	}
	select {
	case <-done:
		l.record(soakResume, time.Since(began))
		return nil
	case <-ctx.Done():
		return nil
	}
}

// inbound sends a message on client i's thread and records the time until
// the run that answered it is terminal.
func (l *soakLoad) inbound(ctx context.Context, i int) error {
	msg := fmt.Sprintf("m%d", l.seq.Add(1))
	done := l.handled.Wait(benchkit.InboundKey{Thread: l.threads[i], Message: msg})
	began := time.Now()
	err := l.baton.Engine.WithTx(ctx, func(tx pgx.Tx) error {
		_, err := l.baton.Engine.ReceiveInboundTx(ctx, tx, engine.InboundParams{TenantID: soakTenant, ThreadID: soakThread(i), Text: "Ana " + msg, MessageID: msg})
		return err
	})
	if err != nil {
		return fmt.Errorf("sending a message: %w", err)
	}
	select {
	case <-done:
		l.record(soakInbound, time.Since(began))
		return nil
	case <-ctx.Done():
		return nil
	}
}

// soakThread is client i's thread.
func soakThread(i int) string { return fmt.Sprintf("soak-%03d", i) }

// createSoakThreads creates the threads of the inbound clients, with the
// followup queue mode and no debounce, and returns their row ids by client.
func createSoakThreads(ctx context.Context, eng *engine.Engine, pool *pgxpool.Pool, clients int) ([]int64, error) {
	ids := make([]int64, clients)
	noDebounce := 0
	for i := range ids {
		if soakKinds[i%len(soakKinds)] != soakInbound {
			continue
		}
		th, _, err := eng.UpsertThread(ctx, pool, engine.ThreadUpsert{TenantID: soakTenant, ThreadID: soakThread(i), Channel: "default", Contact: soakThread(i),
			DefaultWorkflowID: "soak-inbound", Queue: &engine.QueueSettings{Mode: "followup", DebounceMS: &noDebounce}})
		if err != nil {
			return nil, fmt.Errorf("creating thread %s: %w", soakThread(i), err)
		}
		ids[i] = th.ID
	}
	return ids, nil
}
