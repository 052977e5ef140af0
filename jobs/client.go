package jobs

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/retention"
)

// River settings Baton uses when Config leaves them zero. River's default
// fetch cooldown, 100 ms, makes every job hop cost about 100 ms; the numbers
// behind these values are in (docs/benchmarks.md, "River settings").
const (
	// DefaultFetchCooldown is the shortest time between two fetches of a
	// queue: 2 ms.
	DefaultFetchCooldown = 2 * time.Millisecond
	// DefaultFetchPollInterval is how often queues are polled when no insert
	// notification arrives: 50 ms.
	DefaultFetchPollInterval = 50 * time.Millisecond
	// DefaultWorkers is the number of workers of the high queue: 32.
	DefaultWorkers = 32
)

// DefaultRescueStuckJobsAfter is how long a running job may go before River
// hands it to another worker: just over the step timeout. River's rescuer is
// the backstop for a worker alive but stuck; a dead process's jobs are
// handed back within seconds by the process sweep (presence.go).
const DefaultRescueStuckJobsAfter = 65 * time.Second

// Config configures Baton's River client.
type Config struct {
	// Engine is the engine the workers call. Required.
	Engine *engine.Engine
	// Logger receives River's log lines, its info lines as debug (see
	// riverLogHandler). Nil discards them.
	Logger *slog.Logger
	// RescueStuckJobsAfter is how long a running job may go without
	// finishing before River hands it to another worker. It must be over
	// StepTimeout. Zero means DefaultRescueStuckJobsAfter (65 s). It
	// matters for a process that is alive but stuck: a dead process's jobs
	// are handed back by the process sweep (StartPresence) within seconds,
	// and a process that runs no presence, within RescueStuckJobsAfter plus
	// River's 30 s rescuer interval.
	RescueStuckJobsAfter time.Duration
	// FetchCooldown is the shortest time between two fetches of a queue.
	// River's default, 100 ms, makes every job hop cost about 100 ms; zero
	// means DefaultFetchCooldown.
	FetchCooldown time.Duration
	// FetchPollInterval is how often queues are polled when no insert
	// notification arrives. Zero means DefaultFetchPollInterval.
	FetchPollInterval time.Duration
	// Workers is the number of workers of the high queue (steps); the
	// medium queue gets half of it and the low queue a quarter. Zero means
	// DefaultWorkers.
	Workers int
	// InsertOnly builds a client that inserts jobs and works none.
	InsertOnly bool
	// LaneSweepInterval is how often lost lane dispatches and session
	// flushes are re-armed. Zero means 5 seconds.
	LaneSweepInterval time.Duration
	// LockReapInterval is how often stale thread locks are cleared and lost
	// drains re-armed (locks.reapInterval). Zero means 30 seconds; negative
	// runs no reaper (for tests that clear locks by hand).
	LockReapInterval time.Duration
	// StepReapInterval is how often the step reaper looks for running
	// executions whose step job was lost (engine.ReapSteps; how long one
	// must sit unchanged first is the engine's StepRescueAfter). Zero means
	// DefaultStepReapInterval (30 s); negative runs no step reaper.
	StepReapInterval time.Duration
	// DeliverReapInterval is how often the outbox reaper looks for
	// messages left pending without a deliverer (engine.ReapOutboxes; how
	// long one must wait first is the engine's DeliveryRescueAfter). Zero
	// means DefaultDeliverReapInterval (1 s); negative runs no outbox
	// reaper.
	DeliverReapInterval time.Duration
	// CompletedJobRetention is how long River keeps a completed job before
	// its JobCleaner removes it. Zero means River's default (24 hours).
	CompletedJobRetention time.Duration
	// ReindexInterval is how often River's reindexer rebuilds river_job's
	// indexes (REINDEX CONCURRENTLY, on the leader). Its GIN index on
	// args keeps an entry for every execution a job ever named, so it
	// grows until rebuilt. Zero means River's default, daily at midnight
	// UTC; baton soak, whose retention is minutes, shortens it to match.
	ReindexInterval time.Duration
	// Retention, when set, runs the periodic retention.sweep job with it
	// (every Retention.Interval()). Nil runs none.
	Retention *retention.Sweeper
	// Fence, when set, is worker middleware that stops this process's jobs
	// while its presence goes unproven; give the same Fence to
	// StartPresence (PresenceConfig.Fence), which puts it up and lifts it.
	// Nil (the default) fences nothing.
	Fence *Fence
}

// DefaultStepReapInterval is how often the step reaper runs when
// Config.StepReapInterval is zero: with the engine's default StepRescueAfter
// (60 s), a lost step job is replaced within 90 s.
const DefaultStepReapInterval = 30 * time.Second

// DefaultDeliverReapInterval is how often the outbox reaper runs when
// Config.DeliverReapInterval is zero: with the engine's default
// DeliveryRescueAfter (2 s), a message whose deliverer died goes out about
// 3 s after its commit.
const DefaultDeliverReapInterval = time.Second

// NewClient returns Baton's River client with its workers registered and
// wires it into the engine as its JobInserter.
func NewClient(pool *pgxpool.Pool, cfg Config) (*river.Client[pgx.Tx], error) {
	if cfg.Engine == nil {
		return nil, fmt.Errorf("jobs: Config.Engine is required")
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &StepWorker{Engine: cfg.Engine})
	river.AddWorker(workers, &DeliverWorker{Engine: cfg.Engine})
	river.AddWorker(workers, &DrainWorker{Engine: cfg.Engine})
	river.AddWorker(workers, &LockReapWorker{Engine: cfg.Engine})
	river.AddWorker(workers, &StepReapWorker{Engine: cfg.Engine})
	river.AddWorker(workers, &DeliverReapWorker{Engine: cfg.Engine})
	river.AddWorker(workers, &WaitTimeoutWorker{Engine: cfg.Engine})
	river.AddWorker(workers, &CallbackWorker{Engine: cfg.Engine})
	river.AddWorker(workers, &LaneDispatchWorker{Engine: cfg.Engine})
	river.AddWorker(workers, &LaneSweepWorker{Engine: cfg.Engine})
	river.AddWorker(workers, &SessionFlushWorker{Engine: cfg.Engine})
	rc, err := RiverConfig(cfg, workers)
	if err != nil {
		return nil, err
	}
	if cfg.Retention != nil {
		addRetention(workers, rc, cfg.Retention)
	}
	sweepEvery := cfg.LaneSweepInterval
	if sweepEvery <= 0 {
		sweepEvery = 5 * time.Second
	}
	rc.PeriodicJobs = append(rc.PeriodicJobs,
		river.NewPeriodicJob(river.PeriodicInterval(sweepEvery), func() (river.JobArgs, *river.InsertOpts) {
			return LaneSweepArgs{}, &river.InsertOpts{Queue: QueueLow}
		}, nil))
	// The reapers run on start, then every interval; a negative interval
	// runs none.
	for _, r := range []struct {
		every time.Duration
		args  river.JobArgs
	}{
		{cmp.Or(cfg.LockReapInterval, 30*time.Second), LockReapArgs{}},
		{cmp.Or(cfg.StepReapInterval, DefaultStepReapInterval), StepReapArgs{}},
		{cmp.Or(cfg.DeliverReapInterval, DefaultDeliverReapInterval), DeliverReapArgs{}},
	} {
		if r.every > 0 {
			rc.PeriodicJobs = append(rc.PeriodicJobs,
				river.NewPeriodicJob(river.PeriodicInterval(r.every), func() (river.JobArgs, *river.InsertOpts) {
					return r.args, &river.InsertOpts{Queue: QueueLow}
				}, &river.PeriodicJobOpts{RunOnStart: true}))
		}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), rc)
	if err != nil {
		return nil, fmt.Errorf("creating River client: %w", err)
	}
	cfg.Engine.SetJobInserter(&Inserter{Client: client})
	return client, nil
}

// RiverConfig returns the River client settings NewClient uses for cfg, with
// cfg's defaults applied, working the given workers; cfg.Engine is not used.
// baton bench builds its bare-River floor with it so that both run under the
// same settings.
func RiverConfig(cfg Config, workers *river.Workers) (*river.Config, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RescueStuckJobsAfter == 0 {
		cfg.RescueStuckJobsAfter = DefaultRescueStuckJobsAfter
	}
	if cfg.RescueStuckJobsAfter <= StepTimeout {
		return nil, fmt.Errorf("jobs: RescueStuckJobsAfter (%s) must be over the step timeout (%s)", cfg.RescueStuckJobsAfter, StepTimeout)
	}
	if cfg.FetchCooldown == 0 {
		cfg.FetchCooldown = DefaultFetchCooldown
	}
	if cfg.FetchPollInterval == 0 {
		cfg.FetchPollInterval = DefaultFetchPollInterval
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	rc := &river.Config{
		Logger:               slog.New(riverLogHandler{cfg.Logger.Handler()}),
		Workers:              workers,
		FetchCooldown:        cfg.FetchCooldown,
		FetchPollInterval:    cfg.FetchPollInterval,
		JobTimeout:           StepTimeout,
		RescueStuckJobsAfter: cfg.RescueStuckJobsAfter,
		MaxAttempts:          25,
		Middleware:           []rivertype.Middleware{newPreciseTimers()},
	}
	if cfg.Fence != nil {
		rc.Middleware = append(rc.Middleware, cfg.Fence)
	}
	if cfg.CompletedJobRetention > 0 {
		rc.CompletedJobRetentionPeriod = cfg.CompletedJobRetention
	}
	if cfg.ReindexInterval > 0 {
		rc.ReindexerSchedule = river.PeriodicInterval(cfg.ReindexInterval)
	}
	if !cfg.InsertOnly {
		rc.Queues = map[string]river.QueueConfig{
			QueueHigh:   {MaxWorkers: cfg.Workers},
			QueueMedium: {MaxWorkers: max(cfg.Workers/2, 1)},
			QueueLow:    {MaxWorkers: max(cfg.Workers/4, 1)},
		}
	}
	return rc, nil
}

// Inserter enqueues Baton's jobs with River's InsertTx in the caller's
// transaction.
type Inserter struct {
	// Client inserts the jobs.
	Client *river.Client[pgx.Tx]
}

var _ engine.JobInserter = (*Inserter)(nil)

// InsertStep enqueues an execution.step job.
func (i *Inserter) InsertStep(ctx context.Context, tx pgx.Tx, executionID, stepSeq int64, priority int) error {
	_, err := i.Client.InsertTx(ctx, tx, StepArgs{ExecutionID: executionID, StepSeq: stepSeq},
		&river.InsertOpts{Queue: QueueHigh, Priority: priority})
	return err
}

// InsertDrain enqueues a thread.drain job.
func (i *Inserter) InsertDrain(ctx context.Context, tx pgx.Tx, threadID int64) error {
	_, err := i.Client.InsertTx(ctx, tx, DrainArgs{ThreadID: threadID}, &river.InsertOpts{Queue: QueueMedium})
	return err
}

// InsertDeliver enqueues a message.deliver job per thread, due now, in one
// statement.
func (i *Inserter) InsertDeliver(ctx context.Context, tx pgx.Tx, threadIDs ...int64) error {
	params := make([]river.InsertManyParams, len(threadIDs))
	for k, id := range threadIDs {
		params[k] = river.InsertManyParams{Args: DeliverArgs{ThreadID: id}, InsertOpts: deliverOpts}
	}
	_, err := i.Client.InsertManyTx(ctx, tx, params)
	return err
}

// deliverOpts are the insert options of message.deliver jobs: many
// attempts, since a channel may be down for a while.
var deliverOpts = &river.InsertOpts{Queue: QueueMedium, MaxAttempts: 100}

// InsertCallback enqueues a workflow.callback job on the low queue.
func (i *Inserter) InsertCallback(ctx context.Context, tx pgx.Tx, job engine.CallbackJob) error {
	_, err := i.Client.InsertTx(ctx, tx, CallbackArgs{ExecutionID: job.ExecutionID, MessageID: job.MessageID,
		InputRequestWaitSeq: job.InputRequestWaitSeq, Event: job.Event, Payload: job.Payload},
		&river.InsertOpts{Queue: QueueLow, MaxAttempts: 20})
	return err
}

// riverLogHandler hands River's log lines to Baton's handler with info
// lowered to debug: River's info lines (each producer's job counts every few
// seconds while the periodic jobs run) are operational detail, shown with
// --log-level debug. Its warnings and errors pass unchanged.
type riverLogHandler struct{ slog.Handler }

func (h riverLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	if l == slog.LevelInfo {
		l = slog.LevelDebug
	}
	return h.Handler.Enabled(ctx, l)
}

func (h riverLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo {
		r.Level = slog.LevelDebug
	}
	return h.Handler.Handle(ctx, r)
}

func (h riverLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return riverLogHandler{h.Handler.WithAttrs(attrs)}
}

func (h riverLogHandler) WithGroup(name string) slog.Handler {
	return riverLogHandler{h.Handler.WithGroup(name)}
}
