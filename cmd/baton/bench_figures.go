package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/jobs"
)

// benchTenant owns the bench's workflow and executions.
const benchTenant = "bench"

// benchNodes is how many nodes one execution of benchWorkflow visits.
const benchNodes = 5

// benchWorkflow is figure (b)'s workflow: start, set_variables, decision,
// send_message, end; with visits > 1 it visits all five.
const benchWorkflow = `{
  "workflow_id": "bench", "name": "Bench", "version": "1.0.0",
  "nodes": [
    {"id": "start", "type": "start", "next": "remember"},
    {"id": "remember", "type": "action", "actionType": "set_variables",
     "parameters": {"values": {"greeting": "Hola {{name}}"}}, "next": "check"},
    {"id": "check", "type": "decision", "condition": "${visits} > 1",
     "branches": {"true": "send", "false": "end"}},
    {"id": "send", "type": "action", "actionType": "send_message",
     "parameters": {"message": "{{greeting}}, qué gusto verte"}, "next": "end"},
    {"id": "end", "type": "end", "result": {"summary": "Saludo enviado a {{name}}"}}
  ]
}`

// Bench-only SQL: a scratch table for the commit-rate limit and the
// measurements of figure (b). None of it runs in Baton itself.
const (
	sqlCommitTable = `CREATE TABLE bench_commit (id integer PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
INSERT INTO bench_commit (id) SELECT generate_series(1, 1000)`
	sqlCommitUpdate = `UPDATE bench_commit SET n = n + 1 WHERE id = $1`
	sqlTerminal     = `SELECT id FROM agent_execution WHERE id = ANY($1::bigint[]) AND status IN ('completed', 'failed', 'timeout', 'cancelled')`
	sqlWindowBad    = `SELECT count(*) FILTER (WHERE status <> 'completed' OR cardinality(node_path) <> $3)
FROM agent_execution WHERE completed_at >= $1 AND completed_at < $2`
	sqlLiveJobs = `SELECT count(*) FROM river_job WHERE state NOT IN ('completed', 'discarded', 'cancelled')`
	sqlCommits  = `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`
)

// bencher measures the figures on one pool.
type bencher struct {
	cfg      benchConfig
	pool     *pgxpool.Pool
	progress func(format string, a ...any)
}

// rate is a count over a measured window.
type rate struct {
	count     int64
	perSecond float64
	// txPer is how many transactions the database committed per counted
	// unit over the window (statistics are flushed about once a second, so
	// this is approximate).
	txPer float64
}

// commits returns the database's committed transactions so far, read-only
// ones included.
func (b *bencher) commits(ctx context.Context) (int64, error) {
	var n int64
	if err := b.pool.QueryRow(ctx, sqlCommits).Scan(&n); err != nil {
		return 0, fmt.Errorf("reading pg_stat_database: %w", err)
	}
	return n, nil
}

// measure waits out the warm-up, then counts what done gains over the
// measured window.
func (b *bencher) measure(ctx context.Context, done *atomic.Int64) (rate, error) {
	if err := sleepCtx(ctx, b.cfg.warmup); err != nil {
		return rate{}, err
	}
	x0, err := b.commits(ctx)
	if err != nil {
		return rate{}, err
	}
	c0, t0 := done.Load(), time.Now()
	if err := sleepCtx(ctx, b.cfg.duration); err != nil {
		return rate{}, err
	}
	n := done.Load() - c0
	elapsed := time.Since(t0)
	x1, err := b.commits(ctx)
	if err != nil {
		return rate{}, err
	}
	return rate{count: n, perSecond: float64(n) / elapsed.Seconds(), txPer: float64(x1-x0) / float64(max(n, 1))}, nil
}

// commitRate is figure (e)'s limit: clients each updating a row of their own
// in single-statement transactions.
func (b *bencher) commitRate(ctx context.Context) (rate, error) {
	if _, err := b.pool.Exec(ctx, sqlCommitTable); err != nil {
		return rate{}, fmt.Errorf("creating the commit table: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, b.cfg.commitClients)
	for i := range b.cfg.commitClients {
		wg.Go(func() {
			for runCtx.Err() == nil {
				if _, err := b.pool.Exec(runCtx, sqlCommitUpdate, i%1000+1); err != nil {
					if runCtx.Err() == nil {
						errs[i] = fmt.Errorf("updating: %w", err)
					}
					return
				}
				done.Add(1)
			}
		})
	}
	r, err := b.measure(runCtx, &done)
	cancel()
	wg.Wait()
	return r, errors.Join(append(errs, err)...)
}

// benchChainArgs is a link of a floor chain.
type benchChainArgs struct {
	Chain int   `json:"chain"`
	Seq   int64 `json:"seq"`
}

// Kind names the floor's job kind.
func (benchChainArgs) Kind() string { return "bench.chain" }

// benchChainWorker inserts the chain's next link with InsertTx and completes
// its job with JobCompleteTx in one transaction.
type benchChainWorker struct {
	river.WorkerDefaults[benchChainArgs]
	pool *pgxpool.Pool
	stop *atomic.Bool
	done *atomic.Int64
}

func (w *benchChainWorker) Work(ctx context.Context, job *river.Job[benchChainArgs]) error {
	client := river.ClientFromContext[pgx.Tx](ctx)
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if !w.stop.Load() {
		next := benchChainArgs{Chain: job.Args.Chain, Seq: job.Args.Seq + 1}
		if _, err := client.InsertTx(ctx, tx, next, &river.InsertOpts{Queue: jobs.QueueHigh}); err != nil {
			return fmt.Errorf("inserting the next link: %w", err)
		}
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return fmt.Errorf("completing: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	w.done.Add(1)
	return nil
}

// jobsConfig is Baton's River configuration with the bench's flags.
func (b *bencher) jobsConfig(eng *engine.Engine) jobs.Config {
	return jobs.Config{Engine: eng, FetchCooldown: b.cfg.fetchCooldown, FetchPollInterval: b.cfg.fetchPoll, Workers: b.cfg.workers}
}

// riverFloor is figure (a): chains of bare River jobs under Baton's River
// settings.
func (b *bencher) riverFloor(ctx context.Context) (rate, error) {
	var stop atomic.Bool
	var done atomic.Int64
	workers := river.NewWorkers()
	river.AddWorker(workers, &benchChainWorker{pool: b.pool, stop: &stop, done: &done})
	rc, err := jobs.RiverConfig(b.jobsConfig(nil), workers)
	if err != nil {
		return rate{}, err
	}
	client, err := river.NewClient(riverpgxv5.New(b.pool), rc)
	if err != nil {
		return rate{}, fmt.Errorf("creating the floor's River client: %w", err)
	}
	if err := client.Start(ctx); err != nil {
		return rate{}, fmt.Errorf("starting the floor's River client: %w", err)
	}
	defer stopClient(ctx, client)
	seeds := make([]river.InsertManyParams, b.cfg.chains)
	for i := range seeds {
		seeds[i] = river.InsertManyParams{Args: benchChainArgs{Chain: i}, InsertOpts: &river.InsertOpts{Queue: jobs.QueueHigh}}
	}
	if _, err := client.InsertMany(ctx, seeds); err != nil {
		return rate{}, fmt.Errorf("inserting the chains' first links: %w", err)
	}
	r, err := b.measure(ctx, &done)
	stop.Store(true)
	if err != nil {
		return rate{}, err
	}
	return r, b.drainJobs(ctx)
}

// batonRun is figure (b) at one concurrency.
type batonRun struct {
	concurrency int
	count       int64
	perSecond   float64
	p50, p99    time.Duration
	// txPer is the transactions committed per execution over the window,
	// the bench's own polling left out.
	txPer float64
}

// batonRuns is figure (b): the bench workflow started through the engine,
// closed loop, at each concurrency.
func (b *bencher) batonRuns(ctx context.Context) ([]batonRun, error) {
	eng, client, err := b.batonEngine(ctx, benchWorkflow)
	if err != nil {
		return nil, err
	}
	defer stopClient(ctx, client)
	if b.cfg.cpuProfile != "" {
		f, err := os.Create(b.cfg.cpuProfile)
		if err != nil {
			return nil, fmt.Errorf("creating the CPU profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, fmt.Errorf("starting the CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	var runs []batonRun
	for _, c := range b.cfg.concurrency {
		b.progress("(b) Baton executions: concurrency %d", c)
		r, err := b.batonRun(ctx, eng, c)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}

func (b *bencher) batonRun(ctx context.Context, eng *engine.Engine, concurrency int) (batonRun, error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &terminalWatch{pool: b.pool, waiting: map[int64]chan struct{}{}}
	var wg sync.WaitGroup
	errs := make([]error, concurrency+1)
	wg.Go(func() { errs[concurrency] = w.poll(runCtx) })
	// Each client's start call → its execution seen terminal, by the
	// client's clock (the database's timestamps cannot tell: a run that ends
	// in its start transaction has its created_at at that transaction's
	// start, after the client began waiting for a connection).
	type sample struct{ began, ended time.Time }
	samples := make([][]sample, concurrency)
	for i := range concurrency {
		wg.Go(func() {
			input := map[string]any{"name": "Ana", "visits": 2}
			for runCtx.Err() == nil {
				var x *engine.Execution
				began := time.Now()
				err := eng.WithTx(runCtx, func(tx pgx.Tx) error {
					var err error
					x, err = eng.StartExecution(runCtx, tx, engine.StartParams{TenantID: benchTenant, WorkflowID: "bench", Input: input, Priority: 5, LaneFirst: true})
					return err
				})
				if err != nil {
					if runCtx.Err() == nil {
						errs[i] = fmt.Errorf("starting an execution: %w", err)
						cancel()
					}
					return
				}
				if engine.IsTerminal(x.Status) {
					// It ended in its start transaction, which has committed.
					samples[i] = append(samples[i], sample{began, time.Now()})
					continue
				}
				select {
				case <-w.wait(x.ID):
					samples[i] = append(samples[i], sample{began, time.Now()})
				case <-runCtx.Done():
					return
				}
			}
		})
	}
	var t0, t1, g0, g1 time.Time
	var x0, x1, p0, p1 int64
	err := sleepCtx(runCtx, b.cfg.warmup)
	if err == nil {
		p0 = w.polls.Load()
		x0, err = b.commits(runCtx)
	}
	if err == nil {
		g0 = time.Now()
		err = b.pool.QueryRow(runCtx, "SELECT clock_timestamp()").Scan(&t0)
	}
	if err == nil {
		err = sleepCtx(runCtx, b.cfg.duration)
	}
	if err == nil {
		g1 = time.Now()
		err = b.pool.QueryRow(runCtx, "SELECT clock_timestamp()").Scan(&t1)
	}
	if err == nil {
		p1 = w.polls.Load()
		x1, err = b.commits(runCtx)
	}
	cancel()
	wg.Wait()
	if err := errors.Join(append(errs, err)...); err != nil {
		return batonRun{}, err
	}
	if err := b.drainJobs(ctx); err != nil {
		return batonRun{}, err
	}
	var bad int64
	if err := b.pool.QueryRow(ctx, sqlWindowBad, t0, t1, benchNodes).Scan(&bad); err != nil {
		return batonRun{}, fmt.Errorf("measuring the window: %w", err)
	}
	if bad > 0 {
		return batonRun{}, fmt.Errorf("%d executions ended in the window without completing all %d nodes", bad, benchNodes)
	}
	// Executions count when a client saw them end inside the window, not by
	// completed_at: the client sees the end only when the transaction has
	// committed, which can be well after completed_at under load.
	var lat latencies
	for _, ss := range samples {
		for _, smp := range ss {
			if !smp.ended.Before(g0) && smp.ended.Before(g1) {
				lat = append(lat, smp.ended.Sub(smp.began))
			}
		}
	}
	completed := int64(len(lat))
	return batonRun{
		concurrency: concurrency, count: completed, perSecond: float64(completed) / g1.Sub(g0).Seconds(),
		p50: lat.percentile(0.50), p99: lat.percentile(0.99),
		txPer: float64(x1-x0-(p1-p0)-2) / float64(max(completed, 1)),
	}, nil
}

// terminalWatch tells waiters when their executions reach a terminal state,
// polling for all of them with one query.
type terminalWatch struct {
	pool    *pgxpool.Pool
	polls   atomic.Int64
	mu      sync.Mutex
	waiting map[int64]chan struct{}
}

// terminalPoll is how often terminalWatch looks.
const terminalPoll = 2 * time.Millisecond

func (w *terminalWatch) wait(id int64) <-chan struct{} {
	ch := make(chan struct{})
	w.mu.Lock()
	w.waiting[id] = ch
	w.mu.Unlock()
	return ch
}

func (w *terminalWatch) poll(ctx context.Context) error {
	t := time.NewTicker(terminalPoll)
	defer t.Stop()
	ids := make([]int64, 0, 64)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		ids = ids[:0]
		w.mu.Lock()
		for id := range w.waiting {
			ids = append(ids, id)
		}
		w.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		w.polls.Add(1)
		rows, err := w.pool.Query(ctx, sqlTerminal, ids)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("polling executions: %w", err)
		}
		ended, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("polling executions: %w", err)
		}
		w.mu.Lock()
		for _, id := range ended {
			close(w.waiting[id])
			delete(w.waiting, id)
		}
		w.mu.Unlock()
	}
}

// drainJobs waits until River has no job left to work, so that one figure's
// leftovers do not run in the next one's window.
func (b *bencher) drainJobs(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var n int
		if err := b.pool.QueryRow(ctx, sqlLiveJobs).Scan(&n); err != nil {
			return fmt.Errorf("counting live jobs: %w", err)
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d River jobs still live a minute after the figure", n)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

func stopClient(ctx context.Context, client *river.Client[pgx.Tx]) {
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		_ = client.StopAndCancel(stopCtx)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
