package benchkit

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/batonrun/baton/jobs"
)

// FloorConfig configures RiverFloor.
type FloorConfig struct {
	Window Window
	// Chains is how many chains of jobs run at once.
	Chains int
	// Jobs are Baton's River settings (FetchCooldown, FetchPollInterval,
	// Workers); its Engine is not used.
	Jobs jobs.Config
}

// chainArgs is a link of a floor chain.
type chainArgs struct {
	Chain int   `json:"chain"`
	Seq   int64 `json:"seq"`
}

// Kind names the floor's job kind.
func (chainArgs) Kind() string { return "bench.chain" }

// chainWorker inserts the chain's next link with InsertTx and completes its
// job with JobCompleteTx in one transaction.
type chainWorker struct {
	river.WorkerDefaults[chainArgs]
	pool *pgxpool.Pool
	stop *atomic.Bool
	done *atomic.Int64
}

func (w *chainWorker) Work(ctx context.Context, job *river.Job[chainArgs]) error {
	client := river.ClientFromContext[pgx.Tx](ctx)
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if !w.stop.Load() {
		next := chainArgs{Chain: job.Args.Chain, Seq: job.Args.Seq + 1}
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

// jobHistory is how many finished jobs the floor's river_job holds before
// its chains start.
const jobHistory = 10000

// sqlSeedJobHistory tops river_job up to $1 completed jobs, as a running
// system's table holds the jobs River keeps after they finish.
const sqlSeedJobHistory = `
INSERT INTO river_job (args, attempt, attempted_at, finalized_at, kind, max_attempts, priority, queue, state, scheduled_at)
SELECT '{}', 1, now(), now(), 'bench.history', 1, 1, 'high', 'completed', now()
FROM generate_series(1, $1::int - (SELECT count(*) FROM river_job)::int)`

// seedJobHistory gives the floor the river_job table of a running system:
// jobHistory finished jobs, with statistics that know them. On a table the
// planner last saw empty, River's completion (JobSetStateIfRunningMany)
// joins river_job by sequential scan, and its cost grows with every job
// the window completes until autovacuum analyzes the table: the floor then
// ran at about a third of its rate or at full rate depending on when
// autovacuum came (575 to 1695 steps/s in one sitting, the completion's
// mean 1.6 ms against 0.2 ms).
func seedJobHistory(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, sqlSeedJobHistory, jobHistory); err != nil {
		return fmt.Errorf("seeding the floor's job history: %w", err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE river_job"); err != nil {
		return fmt.Errorf("analyzing river_job: %w", err)
	}
	return nil
}

// RiverFloor is the floor every Baton figure is compared with: chains of
// bare River jobs under Baton's River settings, each job inserting the next
// with InsertTx and completing itself with JobCompleteTx in one transaction.
// It counts steps (jobs) over the window, then drains the chains.
func RiverFloor(ctx context.Context, pool *pgxpool.Pool, cfg FloorConfig) (Rate, error) {
	var stop atomic.Bool
	var done atomic.Int64
	workers := river.NewWorkers()
	river.AddWorker(workers, &chainWorker{pool: pool, stop: &stop, done: &done})
	jc := cfg.Jobs
	jc.Engine = nil
	rc, err := jobs.RiverConfig(jc, workers)
	if err != nil {
		return Rate{}, err
	}
	client, err := river.NewClient(riverpgxv5.New(pool), rc)
	if err != nil {
		return Rate{}, fmt.Errorf("creating the floor's River client: %w", err)
	}
	if err := client.Start(ctx); err != nil {
		return Rate{}, fmt.Errorf("starting the floor's River client: %w", err)
	}
	defer StopClient(ctx, client)
	if err := seedJobHistory(ctx, pool); err != nil {
		return Rate{}, err
	}
	seeds := make([]river.InsertManyParams, cfg.Chains)
	for i := range seeds {
		seeds[i] = river.InsertManyParams{Args: chainArgs{Chain: i}, InsertOpts: &river.InsertOpts{Queue: jobs.QueueHigh}}
	}
	if _, err := client.InsertMany(ctx, seeds); err != nil {
		return Rate{}, fmt.Errorf("inserting the chains' first links: %w", err)
	}
	r, err := Measure(ctx, pool, cfg.Window, &done)
	stop.Store(true)
	if err != nil {
		return Rate{}, err
	}
	return r, DrainJobs(ctx, pool)
}
