package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/batonrun/baton/retention"
)

// RetentionSweepArgs remove what is past retention (retention.Sweeper).
type RetentionSweepArgs struct{}

// Kind is the job kind River UI shows.
func (RetentionSweepArgs) Kind() string { return "retention.sweep" }

// RetentionSweepWorker runs the periodic retention.sweep job.
type RetentionSweepWorker struct {
	river.WorkerDefaults[RetentionSweepArgs]
	Sweeper *retention.Sweeper
}

// Timeout bounds a sweep: its budget, and a minute for its last batch.
func (w *RetentionSweepWorker) Timeout(*river.Job[RetentionSweepArgs]) time.Duration {
	return w.Sweeper.Budget() + time.Minute
}

// Work runs one sweep. A failed sweep is not retried: the next periodic
// one goes on where it stopped.
func (w *RetentionSweepWorker) Work(ctx context.Context, _ *river.Job[RetentionSweepArgs]) error {
	_, err := w.Sweeper.Sweep(ctx)
	return err
}

// addRetention registers the retention.sweep worker and its periodic job,
// every sweeper.Interval() on the low queue; River's leader enqueues it.
func addRetention(workers *river.Workers, rc *river.Config, sweeper *retention.Sweeper) {
	river.AddWorker(workers, &RetentionSweepWorker{Sweeper: sweeper})
	rc.PeriodicJobs = append(rc.PeriodicJobs,
		river.NewPeriodicJob(river.PeriodicInterval(sweeper.Interval()), func() (river.JobArgs, *river.InsertOpts) {
			return RetentionSweepArgs{}, &river.InsertOpts{Queue: QueueLow, MaxAttempts: 1}
		}, &river.PeriodicJobOpts{RunOnStart: true}))
}
