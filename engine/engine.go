package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine/workflow"
)

// JobInserter enqueues the River jobs a transition needs, inside the
// transition's transaction. Package jobs implements it with River's InsertTx.
type JobInserter interface {
	// InsertStep enqueues an execution.step job that advances the execution
	// from the checkpoint whose step_seq is stepSeq.
	InsertStep(ctx context.Context, tx pgx.Tx, executionID, stepSeq int64, priority int) error
	// InsertDeliver enqueues, in one statement, a message.deliver job per
	// thread, due now, that delivers the thread's pending outbound messages
	// in order.
	InsertDeliver(ctx context.Context, tx pgx.Tx, threadIDs ...int64) error
	// InsertDrain enqueues a thread.drain job that hands the thread's queued
	// messages out in FIFO order.
	InsertDrain(ctx context.Context, tx pgx.Tx, threadID int64) error
	// InsertWaitTimeout enqueues the execution.wait_timeout job of a wait
	// and returns its River job id. The job must fire within a second of
	// the timer's At.
	InsertWaitTimeout(ctx context.Context, tx pgx.Tx, timer WaitTimer) (int64, error)
	// InsertCallback enqueues a workflow.callback job that posts a callback
	// to the execution's callback_url (SendCallback).
	InsertCallback(ctx context.Context, tx pgx.Tx, job CallbackJob) error
	// InsertLaneDispatch enqueues a lane.dispatch job that admits the
	// lane's pending executions.
	InsertLaneDispatch(ctx context.Context, tx pgx.Tx, owner, lane string) error
	// DropLaneDispatches deletes the lane's lane.dispatch jobs that are due
	// and not taken by a worker yet: the caller holds the lane and admits
	// after this, seeing all that the transactions that enqueued them
	// committed.
	DropLaneDispatches(ctx context.Context, tx pgx.Tx, owner, lane string) error
	// InsertLaneDispatchAt enqueues a lane.dispatch job due at at (within a
	// poll interval): the moment a paused run may be admitted again.
	InsertLaneDispatchAt(ctx context.Context, tx pgx.Tx, owner, lane string, at time.Time) error
	// InsertSessionFlush enqueues a session.flush job due at at (within a
	// poll interval, not River's scheduler's 5 s) that starts the session's
	// next run from its queued inbound messages.
	InsertSessionFlush(ctx context.Context, tx pgx.Tx, tenantID, threadKey string, at time.Time) error
}

// WaitTimer is the execution.wait_timeout job of one wait. The
// transaction that ends the wait before At deletes the job (the execution
// row names it, wait_timeout_job_id); a job of a wait that is over does
// nothing when it fires.
type WaitTimer struct {
	// ExecutionRowID is the execution's row id, by which the job finds it.
	ExecutionRowID int64
	// TenantID and ExecutionID name the execution as the API, the console
	// and the logs do, for whoever reads the job in River UI.
	TenantID, ExecutionID string
	// WaitSeq is the wait's wait_seq: a job of an older wait does nothing.
	WaitSeq int32
	// At is when the wait times out.
	At time.Time
}

// Config configures an Engine.
type Config struct {
	// Pool is the database pool. Required.
	Pool *pgxpool.Pool
	// Jobs enqueues River jobs in the engine's transactions. Required before
	// any execution starts; it may be set after New with SetJobInserter.
	Jobs JobInserter
	// Tools are the Go-registered tools tasks may call. Nil means none.
	Tools *Tools
	// Channel delivers the outbound messages of threads whose channel has
	// no adapter in Channels (the config file's channels.default). Nil
	// means Channels["default"], else a LogChannel on Logger.
	Channel ChannelAdapter
	// Channels are the channel adapters by channel name (the config file's
	// channels): a thread's outbound messages go through the adapter named
	// by the thread's channel, and through Channel when there is none of
	// that name. Nil (the default) sends every thread's through Channel.
	Channels map[string]ChannelAdapter
	// Logger receives the engine's log lines. Nil discards them.
	Logger *slog.Logger
	// MaxNodesPerStep bounds how many nodes one step transaction runs before
	// it checkpoints and enqueues the next step. Zero means 100.
	MaxNodesPerStep int
	// ToolTimeout bounds a tool call when neither the node nor the workflow
	// sets a timeout. Zero means 30 seconds.
	ToolTimeout time.Duration
	// DeferFirstStep leaves an execution's first step to an execution.step
	// job instead of running it in the start transaction. False (the
	// default) saves a River hop per execution.
	DeferFirstStep bool
	// LockTimeout is how long a thread lock may sit unrefreshed before it is
	// stale and another execution may clear it (BATON_LOCK_TIMEOUT). Zero
	// means 10 minutes.
	LockTimeout time.Duration
	// CallbackAllowHosts are the hosts and ports callback_url may name
	// (AllowList: "host" for ports 80 and 443, "host:port", "*.example.com"
	// for subdomains, "*" for any host). Empty (the default) means
	// callbacks are refused. A malformed entry is an error.
	CallbackAllowHosts []string
	// CallbackSecret signs callbacks (X-Baton-Signature). Empty (the
	// default) signs with an empty key, which receivers should not accept;
	// `baton serve` requires MinSecretBytes.
	CallbackSecret []byte
	// HTTPClient sends callbacks. Nil (the default) means
	// NewOutboundClient over CallbackAllowHosts: no redirects, and every
	// connection checked against the list. A client given here is used as
	// is.
	HTTPClient *http.Client
	// Metrics receives durations and counts for /metrics. Nil means none
	// are reported.
	Metrics Metrics
	// LaneLimits are the lanes' concurrency limits by name
	// (agents.defaults.maxConcurrent is "main", lanes.* the others). A lane
	// missing here gets DefaultLaneLimits' value (main 4, subagent 8, cron
	// 2), else 1; session lanes always get 1. Every process sharing a
	// database should use the same limits.
	LaneLimits map[string]int
	// LanePerTenant caps, for the lanes named, how many of a lane's slots
	// one tenant may hold at once (lanes.<name>.perTenant); a lane not
	// named has no cap of its own.
	LanePerTenant map[string]int
	// Queue is the global inbound queue configuration (messages.queue);
	// zero values mean the defaults (collect, 1000 ms, 20, summarize).
	Queue QueueConfig
	// Limits bound what tenants control: definitions, variables, rendered
	// text, ids, queue settings (the config file's limits). Zero fields
	// take workflow.DefaultLimits' values.
	Limits workflow.Limits
	// DefinitionCacheVersions bounds how many parsed definition versions
	// the process keeps in memory, besides their size (about 128 MiB): the
	// least recently used go first and are read again from the database
	// when needed. Zero means DefaultDefinitionCacheVersions (10,000);
	// negative is an error.
	DefinitionCacheVersions int
	// KnownLanes bounds how many lane rows the process remembers having
	// seen, so as not to insert them again: one per session (a thread that
	// received messages) and per tenant lane in use, the least recently
	// used forgotten first. Zero means DefaultKnownLanes (10,000); negative
	// is an error.
	KnownLanes int
	// StepRescueAfter is how long a running execution may go unchanged
	// with no live execution.step job before the step reaper (ReapSteps)
	// enqueues its step again. Zero means DefaultStepRescueAfter (60 s);
	// negative is an error.
	StepRescueAfter time.Duration
	// MaxStepRecoveries is how many times the step reaper enqueues the
	// step of one execution again; when its step job is lost once more,
	// the reaper fails it. Zero means DefaultMaxStepRecoveries (3);
	// negative is an error.
	MaxStepRecoveries int
	// DeliveryRescueAfter is how long a message may stay pending delivery
	// with no message.deliver job before the outbox reaper (ReapOutboxes)
	// enqueues one: how late a message can be when the process that was
	// delivering it died. Zero means DefaultDeliveryRescueAfter (2 s);
	// negative is an error.
	DeliveryRescueAfter time.Duration
}

// DefaultDeliveryRescueAfter is Config.DeliveryRescueAfter's default: far
// beyond a prompt delivery (milliseconds), so that a live deliverer's
// threads are seldom taken for stranded.
const DefaultDeliveryRescueAfter = 2 * time.Second

// Step reaper defaults (Config.StepRescueAfter, Config.MaxStepRecoveries).
const (
	DefaultStepRescueAfter   = 60 * time.Second
	DefaultMaxStepRecoveries = 3
)

// Engine runs workflow executions on Postgres.
type Engine struct {
	*slog.Logger

	pool    *pgxpool.Pool
	q       *dbsqlc.Queries
	jobs    JobInserter
	tools   *Tools
	channel ChannelAdapter
	metrics Metrics
	cfg     Config

	// definitions keeps parsed stored definitions, at most
	// Config.DefinitionCacheVersions of them within definitionCacheBytes.
	definitions *definitionCache
	// lanesKnown remembers lane rows that exist, at most Config.KnownLanes.
	lanesKnown *knownLanes
	// sharedAdmissions counts the runs this process made running in share
	// mode (lane_shared.go), for tests.
	sharedAdmissions atomic.Int64
	// callbackHosts is Config.CallbackAllowHosts, parsed.
	callbackHosts AllowList
	// prompt delivers messages right after their transaction commits, once
	// DeliverPromptly has started it.
	prompt atomic.Pointer[promptDelivery]
}

// New returns an Engine.
func New(cfg Config) (*Engine, error) {
	if cfg.Pool == nil {
		return nil, fmt.Errorf("engine: Config.Pool is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Tools == nil {
		cfg.Tools = NewTools()
	}
	if cfg.Channel == nil {
		cfg.Channel = cfg.Channels[DefaultChannel]
	}
	if cfg.Channel == nil {
		cfg.Channel = &LogChannel{Logger: cfg.Logger}
	}
	if cfg.MaxNodesPerStep <= 0 {
		cfg.MaxNodesPerStep = 100
	}
	callbackHosts, err := ParseAllowList(cfg.CallbackAllowHosts)
	if err != nil {
		return nil, fmt.Errorf("engine: CallbackAllowHosts: %w", err)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = NewOutboundClient(callbackHosts, 0)
	}
	if cfg.ToolTimeout <= 0 {
		cfg.ToolTimeout = 30 * time.Second
	}
	if cfg.LockTimeout <= 0 {
		cfg.LockTimeout = 10 * time.Minute
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	if cfg.DeliveryRescueAfter < 0 {
		return nil, fmt.Errorf("engine: DeliveryRescueAfter (%s) must not be negative", cfg.DeliveryRescueAfter)
	}
	if cfg.DeliveryRescueAfter == 0 {
		cfg.DeliveryRescueAfter = DefaultDeliveryRescueAfter
	}
	if cfg.StepRescueAfter < 0 || cfg.MaxStepRecoveries < 0 {
		return nil, fmt.Errorf("engine: StepRescueAfter (%s) and MaxStepRecoveries (%d) must not be negative", cfg.StepRescueAfter, cfg.MaxStepRecoveries)
	}
	if cfg.DefinitionCacheVersions < 0 || cfg.KnownLanes < 0 {
		return nil, fmt.Errorf("engine: DefinitionCacheVersions (%d) and KnownLanes (%d) must not be negative", cfg.DefinitionCacheVersions, cfg.KnownLanes)
	}
	if cfg.DefinitionCacheVersions == 0 {
		cfg.DefinitionCacheVersions = DefaultDefinitionCacheVersions
	}
	if cfg.KnownLanes == 0 {
		cfg.KnownLanes = DefaultKnownLanes
	}
	if cfg.StepRescueAfter == 0 {
		cfg.StepRescueAfter = DefaultStepRescueAfter
	}
	if cfg.MaxStepRecoveries == 0 {
		cfg.MaxStepRecoveries = DefaultMaxStepRecoveries
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	if err := cfg.Limits.Check(); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	return &Engine{
		Logger:  cfg.Logger,
		pool:    cfg.Pool,
		q:       dbsqlc.New(),
		jobs:    cfg.Jobs,
		tools:   cfg.Tools,
		channel: cfg.Channel,
		metrics: cfg.Metrics,
		cfg:     cfg,

		definitions:   newDefinitionCache(cfg.DefinitionCacheVersions, definitionCacheBytes),
		lanesKnown:    newKnownLanes(cfg.KnownLanes),
		callbackHosts: callbackHosts,
	}, nil
}

// SetJobInserter sets the job inserter when it could not be given to New
// (the River client that implements it needs the engine's workers first).
func (e *Engine) SetJobInserter(j JobInserter) { e.jobs = j }

// Pool returns the engine's pool.
func (e *Engine) Pool() *pgxpool.Pool { return e.pool }

// Limits returns the limits the engine enforces, defaults filled in.
func (e *Engine) Limits() workflow.Limits { return e.cfg.Limits }

// Tools returns the engine's tool registry.
func (e *Engine) Tools() *Tools { return e.tools }

// withTx runs fn in a transaction on pool and commits it. The rollback runs
// under context.WithoutCancel so that a cancelled request never leaks a
// connection.
//
// A transaction that fails before its COMMIT — in BEGIN (taking a
// connection included) or in fn — with an error IsUnavailable reports (a
// serialization failure or deadlock, a lost connection, a server stopping,
// starting or read-only, too many connections) is rolled back and run
// again on a fresh connection: txAttempts (3) times in all, after pauses of
// about 20 and 50 ms, and no more once ctx has ended. The last error is
// returned. An error from COMMIT itself is never retried: the transaction
// may have committed.
//
// fn must therefore be safe to run more than once: it changes the database
// only through tx, sets the variables it shares with its caller afresh on
// every run, and leaves whatever reaches outside the database (metrics,
// channels, HTTP calls) to after withTx has returned nil, or to
// afterCommit, which runs it once the transaction has committed.
func withTx(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger, fn func(pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		onCommit, atCommit, err := runTx(ctx, pool, fn)
		if err == nil {
			for _, f := range onCommit {
				f()
			}
			return nil
		}
		if atCommit || attempt == txAttempts || !IsUnavailable(err) {
			return err
		}
		delay := txRetryDelay(attempt)
		logger.InfoContext(ctx, "transaction failed; running it again", "attempt", attempt, "retry_in", delay, "error", err)
		if !sleepCtx(ctx, delay) {
			return err
		}
	}
}

// WithTx runs fn in a transaction on the engine's pool and commits it when fn
// returns nil. A transaction that fails before its COMMIT because of a
// serialization failure, a deadlock or an outage (IsUnavailable) runs again,
// up to three times in all, so fn must be safe to run more than once: see
// withTx.
func (e *Engine) WithTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return withTx(ctx, e.pool, e.Logger, fn)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshalling %T: %v", v, err)) // only engine-built values reach here
	}
	return b
}
