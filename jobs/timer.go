package jobs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine"
)

// Timers: wait timeouts, session flushes and delayed lane dispatches are
// River jobs with a future scheduled_at, and they must run at that time,
// not seconds later.
//
// River inserts such a job as `scheduled`, and only its scheduler, which
// runs on the elected leader every 5 seconds (an interval River does not
// make configurable), makes scheduled jobs `available`, looking one interval
// ahead; River's producers, polling every FetchPollInterval (50 ms here) on
// every client, then fetch an available job once its scheduled_at has
// passed. On a healthy leader a timer due more than one interval after its
// insert is therefore made available before its time and runs on time; a
// timer due sooner may miss the scheduler's last round before it, and any
// timer due while no leader runs the scheduler (client start, a leader
// that died and whose leadership the process sweep has not released yet)
// waits for a later round.
//
// So Baton does two things. The insert middleware preciseTimers inserts a
// timer due within TimerLookahead as `available` directly, its scheduled_at
// kept, as River itself does for retries and snoozes shorter than the
// scheduler interval. A timer due later is inserted `scheduled`, where
// River UI lists it in its Scheduled tab, and every `baton serve` process
// runs a Timers loop (StartTimers) that makes the timers due within
// TimerLookahead available every TimerPromoteInterval, with no leader
// involved; a process without the loop leaves them to River's scheduler. A timer is thus `available` only in its last TimerLookahead,
// as River's own scheduled jobs are, and runs within a poll interval of its
// time.

const (
	// TimerLookahead is how long before its time a timer job is made
	// available: River's scheduler interval, which is also how far ahead
	// River's scheduler looks.
	TimerLookahead = 5 * time.Second
	// TimerPromoteInterval is how often Timers makes the timers due within
	// TimerLookahead available: four rounds at least before each timer's
	// time.
	TimerPromoteInterval = time.Second
	// timerPromoteBatch is the most timers one statement makes available.
	timerPromoteBatch = 1000
)

// timerKinds are the kinds of the timer jobs, all in the high queue.
var timerKinds = []string{WaitTimeoutArgs{}.Kind(), SessionFlushArgs{}.Kind(), LaneDispatchArgs{}.Kind()}

// timerQueues are the queues timer jobs are inserted in.
var timerQueues = []string{QueueHigh}

// preciseTimers is the insert middleware (River's public
// rivertype.JobInsertMiddleware) that inserts timer jobs due within
// lookahead as available.
type preciseTimers struct {
	river.MiddlewareDefaults
	kinds     map[string]bool
	lookahead time.Duration
}

var _ rivertype.JobInsertMiddleware = (*preciseTimers)(nil)

func newPreciseTimers() *preciseTimers {
	m := &preciseTimers{kinds: map[string]bool{}, lookahead: TimerLookahead}
	for _, k := range timerKinds {
		m.kinds[k] = true
	}
	return m
}

// InsertMany switches timer jobs due within the look-ahead from scheduled
// to available.
func (m *preciseTimers) InsertMany(ctx context.Context, manyParams []*rivertype.JobInsertParams, doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	for _, p := range manyParams {
		if m.kinds[p.Kind] && p.State == rivertype.JobStateScheduled && p.ScheduledAt != nil && time.Until(*p.ScheduledAt) <= m.lookahead {
			p.State = rivertype.JobStateAvailable
		}
	}
	return doInner(ctx)
}

// InsertWaitTimeout enqueues the execution.wait_timeout job of a wait,
// due at timer.At, and returns its id (engine.JobInserter).
func (i *Inserter) InsertWaitTimeout(ctx context.Context, tx pgx.Tx, timer engine.WaitTimer) (int64, error) {
	res, err := i.Client.InsertTx(ctx, tx, WaitTimeoutArgs{
		ExecutionID: timer.ExecutionRowID, WaitSeq: timer.WaitSeq, TenantID: timer.TenantID, Execution: timer.ExecutionID,
	}, &river.InsertOpts{Queue: QueueHigh, ScheduledAt: timer.At, MaxAttempts: 25})
	if err != nil {
		return 0, err
	}
	return res.Job.ID, nil
}

// PromoteTimers makes the scheduled timer jobs due within TimerLookahead
// available, in batches, and returns how many it moved.
func PromoteTimers(ctx context.Context, db dbsqlc.DBTX) (int64, error) {
	q := dbsqlc.New()
	var total int64
	for {
		n, err := q.TimersPromote(ctx, db, &dbsqlc.TimersPromoteParams{
			Queues: timerQueues, Kinds: timerKinds, LookaheadSeconds: TimerLookahead.Seconds(), Max: timerPromoteBatch})
		total += n
		if err != nil || n < timerPromoteBatch {
			return total, err
		}
	}
}

// TimersConfig configures StartTimers.
type TimersConfig struct {
	// Interval is how often the due timers are made available. Zero means
	// TimerPromoteInterval; it must stay well under TimerLookahead.
	Interval time.Duration
	// Logger receives a warning when a round fails, once until one
	// succeeds again. Nil discards it.
	Logger *slog.Logger
}

// Timers is this process's loop that makes due timer jobs available. Stop
// it with Stop.
type Timers struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// StartTimers runs PromoteTimers every cfg.Interval until Stop. A process
// that works jobs runs it beside its River client, so that timers never
// wait for River's leader.
func StartTimers(ctx context.Context, pool *pgxpool.Pool, cfg TimersConfig) *Timers {
	if cfg.Interval <= 0 {
		cfg.Interval = TimerPromoteInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t := &Timers{cancel: cancel}
	t.wg.Go(func() { promoteEvery(runCtx, pool, cfg) })
	return t
}

// Stop ends the loop and waits for its round in progress.
func (t *Timers) Stop() {
	t.cancel()
	t.wg.Wait()
}

// promoteEvery runs PromoteTimers at once, then every cfg.Interval, until
// ctx ends.
func promoteEvery(ctx context.Context, pool *pgxpool.Pool, cfg TimersConfig) {
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	failing := false
	for {
		_, err := PromoteTimers(ctx, pool)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			cfg.Logger.WarnContext(ctx, "making due timer jobs available failed", "error", err)
			failing = true
		case err == nil:
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
