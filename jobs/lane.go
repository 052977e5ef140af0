package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/batonrun/baton/engine"
)

// LaneDispatchWorker runs lane.dispatch jobs.
type LaneDispatchWorker struct {
	river.WorkerDefaults[LaneDispatchArgs]
	Engine *engine.Engine
}

// NextRetry retries a failed dispatch almost at once: it is idempotent
// under the lane row lock.
func (w *LaneDispatchWorker) NextRetry(job *river.Job[LaneDispatchArgs]) time.Time {
	return time.Now().Add(time.Duration(job.Attempt) * 50 * time.Millisecond)
}

// Work admits what fits and completes the job in the same transaction.
func (w *LaneDispatchWorker) Work(ctx context.Context, job *river.Job[LaneDispatchArgs]) error {
	return w.Engine.DispatchLane(ctx, job.Args.Owner, job.Args.Lane, func(ctx context.Context, tx pgx.Tx) error {
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

// LaneSweepWorker runs the periodic lane.sweep job.
type LaneSweepWorker struct {
	river.WorkerDefaults[LaneSweepArgs]
	Engine *engine.Engine
}

// Work re-arms lost dispatches and flushes.
func (w *LaneSweepWorker) Work(ctx context.Context, _ *river.Job[LaneSweepArgs]) error {
	return w.Engine.SweepLanes(ctx)
}

// InsertLaneDispatch enqueues a lane.dispatch job on the high queue: it
// stands between a free slot and the next step.
func (i *Inserter) InsertLaneDispatch(ctx context.Context, tx pgx.Tx, owner, lane string) error {
	_, err := i.Client.InsertTx(ctx, tx, LaneDispatchArgs{Owner: owner, Lane: lane}, &river.InsertOpts{Queue: QueueHigh, Priority: 1, MaxAttempts: 50})
	return err
}

// DropLaneDispatches deletes the lane's available lane.dispatch jobs
// (engine.JobInserter): running ones are a worker's, and scheduled ones
// wait for a moment of their own (a paused run, a held head).
func (i *Inserter) DropLaneDispatches(ctx context.Context, tx pgx.Tx, owner, lane string) error {
	params := river.NewJobDeleteManyParams().Kinds(LaneDispatchArgs{}.Kind()).States(rivertype.JobStateAvailable).
		Where("coalesce(args->>'owner', '') = @owner AND args->>'lane' = @lane", river.NamedArgs{"owner": owner, "lane": lane})
	if _, err := i.Client.JobDeleteManyTx(ctx, tx, params); err != nil {
		return fmt.Errorf("dropping lane.dispatch jobs of %s: %w", lane, err)
	}
	return nil
}

// InsertLaneDispatchAt enqueues a lane.dispatch job due at at; the timer
// middleware makes it fire within a poll interval of at.
func (i *Inserter) InsertLaneDispatchAt(ctx context.Context, tx pgx.Tx, owner, lane string, at time.Time) error {
	_, err := i.Client.InsertTx(ctx, tx, LaneDispatchArgs{Owner: owner, Lane: lane}, &river.InsertOpts{Queue: QueueHigh, Priority: 1, MaxAttempts: 50, ScheduledAt: at})
	return err
}

// SessionFlushWorker runs session.flush jobs.
type SessionFlushWorker struct {
	river.WorkerDefaults[SessionFlushArgs]
	Engine *engine.Engine
}

// NextRetry retries a failed flush soon: it is idempotent under the
// session's locks.
func (w *SessionFlushWorker) NextRetry(job *river.Job[SessionFlushArgs]) time.Time {
	return time.Now().Add(time.Duration(job.Attempt) * 100 * time.Millisecond)
}

// Work flushes the session and completes the job in the same transaction.
func (w *SessionFlushWorker) Work(ctx context.Context, job *river.Job[SessionFlushArgs]) error {
	return w.Engine.FlushSession(ctx, job.Args.TenantID, job.Args.ThreadID, func(ctx context.Context, tx pgx.Tx) error {
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

// InsertSessionFlush enqueues a session.flush job due at at; the timer
// middleware makes it fire within a poll interval of at.
func (i *Inserter) InsertSessionFlush(ctx context.Context, tx pgx.Tx, tenantID, threadKey string, at time.Time) error {
	_, err := i.Client.InsertTx(ctx, tx, SessionFlushArgs{TenantID: tenantID, ThreadID: threadKey},
		&river.InsertOpts{Queue: QueueHigh, ScheduledAt: at, MaxAttempts: 50})
	return err
}
