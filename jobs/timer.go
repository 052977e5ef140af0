package jobs

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// preciseTimers makes scheduled jobs of the timer kinds fire on time
// without depending on River's scheduler.
//
// River inserts a job with a future ScheduledAt in state `scheduled`, and
// only its scheduler moves scheduled jobs to `available`. The scheduler runs
// on the elected leader only, every 5 seconds (an interval River does not
// make configurable); in v0.51.1 it looks one interval ahead, so on a
// healthy leader it is usually on time, but a timer due while no leader is
// elected yet (client start, leader change) or while the scheduler's batch
// falls behind waits for a later run. River's producers, though, fetch
// `available` jobs whose scheduled_at has passed (`state = 'available' AND
// scheduled_at <= now()`), polling every FetchPollInterval (50 ms here) on
// every client. So this insert middleware (River's public
// rivertype.JobInsertMiddleware) inserts timer jobs directly as `available`
// with their scheduled_at kept: no producer takes them before that time,
// and any client's producer takes them within a poll interval after it,
// with no scheduler or leader involved. River does the same itself for
// retries and snoozes shorter than the scheduler interval. The cost is that
// River UI lists pending timers as available rather than scheduled.
type preciseTimers struct {
	river.MiddlewareDefaults
	kinds map[string]bool
}

var _ rivertype.JobInsertMiddleware = (*preciseTimers)(nil)

// InsertMany switches scheduled timer jobs to available.
func (m *preciseTimers) InsertMany(ctx context.Context, manyParams []*rivertype.JobInsertParams, doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	for _, p := range manyParams {
		if m.kinds[p.Kind] && p.State == rivertype.JobStateScheduled && p.ScheduledAt != nil {
			p.State = rivertype.JobStateAvailable
		}
	}
	return doInner(ctx)
}

// InsertWaitTimeout enqueues an execution.wait_timeout job due at at.
func (i *Inserter) InsertWaitTimeout(ctx context.Context, tx pgx.Tx, executionID int64, waitSeq int32, at time.Time) error {
	_, err := i.Client.InsertTx(ctx, tx, WaitTimeoutArgs{ExecutionID: executionID, WaitSeq: waitSeq},
		&river.InsertOpts{Queue: QueueHigh, ScheduledAt: at, MaxAttempts: 25})
	return err
}
