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
