package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/benchkit"
	"github.com/batonrun/baton/jobs"
)

// benchTenant owns the bench's workflow and executions.
const benchTenant = "bench"

// Bench-only SQL: a scratch table for the commit-rate limit. None of it
// runs in Baton itself.
const (
	sqlCommitTable = `CREATE TABLE bench_commit (id integer PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
INSERT INTO bench_commit (id) SELECT generate_series(1, 1000)`
	sqlCommitUpdate = `UPDATE bench_commit SET n = n + 1 WHERE id = $1`
)

// bencher measures the figures on one pool.
type bencher struct {
	cfg      benchConfig
	pool     *pgxpool.Pool
	progress func(format string, a ...any)
}

// window is the bench's warm-up and measured window.
func (b *bencher) window() benchkit.Window {
	return benchkit.Window{Warmup: b.cfg.warmup, Duration: b.cfg.duration}
}

// commitRate is figure (e)'s limit: clients each updating a row of their own
// in single-statement transactions.
func (b *bencher) commitRate(ctx context.Context) (benchkit.Rate, error) {
	if _, err := b.pool.Exec(ctx, sqlCommitTable); err != nil {
		return benchkit.Rate{}, fmt.Errorf("creating the commit table: %w", err)
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
	r, err := benchkit.Measure(runCtx, b.pool, b.window(), &done)
	cancel()
	wg.Wait()
	return r, errors.Join(append(errs, err)...)
}

// jobsConfig is Baton's River configuration with the bench's flags.
func (b *bencher) jobsConfig() jobs.Config {
	return jobs.Config{FetchCooldown: b.cfg.fetchCooldown, FetchPollInterval: b.cfg.fetchPoll, Workers: b.cfg.workers}
}

// riverFloor is figure (a): chains of bare River jobs under Baton's River
// settings.
func (b *bencher) riverFloor(ctx context.Context) (benchkit.Rate, error) {
	return benchkit.RiverFloor(ctx, b.pool, benchkit.FloorConfig{Window: b.window(), Chains: b.cfg.chains, Jobs: b.jobsConfig()})
}

// batonRuns is figure (b): the bench workflow started through the engine,
// closed loop, at each concurrency.
func (b *bencher) batonRuns(ctx context.Context) ([]benchkit.ExecutionRun, error) {
	baton, err := benchkit.StartBaton(ctx, b.pool, b.jobsConfig(), benchTenant, benchkit.FiveNodeWorkflow)
	if err != nil {
		return nil, err
	}
	defer baton.Stop(ctx)
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
	params := func(int) engine.StartParams {
		return engine.StartParams{TenantID: benchTenant, WorkflowID: "bench", Input: benchkit.FiveNodeInput(), Priority: 5, LaneFirst: true}
	}
	var runs []benchkit.ExecutionRun
	for _, c := range b.cfg.concurrency {
		b.progress("(b) Baton executions: concurrency %d", c)
		r, err := benchkit.RunExecutions(ctx, b.pool, baton, b.window(), c, benchkit.Nodes, params)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}
