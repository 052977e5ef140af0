package retention

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/db/dbsqlc"
)

// Defaults of Config.
const (
	// DefaultInterval is how often the retention.sweep job runs: 1 minute.
	DefaultInterval = time.Minute
	// DefaultBatch is how many executions, or rows of the other tables,
	// one batch removes: 1000.
	DefaultBatch = 1000
	// MaxBudget bounds how long one sweep goes on taking batches: 30
	// seconds, or the interval when that is shorter.
	MaxBudget = 30 * time.Second
)

// The tables a sweep counts, as Result.Removed and the
// baton_retention_removed_total metric name them. MessageIDs counts the
// message_ids of inbound messages forgotten (the messages stay).
const (
	TableExecutions       = "agent_execution"
	TableEvents           = "execution_event"
	TableMessages         = "thread_message"
	TableThreads          = "thread"
	TableInboundEvents    = "inbound_event"
	TableIdempotencyKeys  = "idempotency_key"
	TableConsoleSessions  = "console_session"
	TableOperatorSessions = "operator_session"
	MessageIDs            = "thread_message.external_id"
)

// Policy is how long a tenant's rows are kept. A zero period keeps them
// forever.
type Policy struct {
	// Executions is how long an ended execution is kept after it ended
	// (completed_at), with its event log, its outbound messages and the
	// inbound messages it consumed.
	Executions time.Duration
	// Idempotency is the replay window of request message_ids, inbound
	// message_ids and event_ids: a repeat inside it replays the first
	// answer, a repeat after it is new.
	Idempotency time.Duration
	// Inbound is how long settled inbound messages that no execution owns
	// (dropped, or /queue commands) are kept.
	Inbound time.Duration
}

// Recorder counts what sweeps remove; *metrics.Metrics is one.
type Recorder interface {
	RetentionRemoved(table string, n int64)
}

// Config configures a Sweeper.
type Config struct {
	// Default is the policy of every tenant not in PerTenant.
	Default Policy
	// PerTenant holds the policies of tenants that differ from Default.
	PerTenant map[string]Policy
	// Interval is how often the retention.sweep job runs. Zero means
	// DefaultInterval.
	Interval time.Duration
	// Batch is how many executions (each with its events and messages),
	// or rows of another table, one batch removes in one statement. Zero
	// means DefaultBatch.
	Batch int
	// Budget bounds how long one sweep goes on taking batches; what is
	// left waits for the next sweep. Zero means MaxBudget, or Interval
	// when that is shorter.
	Budget time.Duration
	// Logger receives one line per sweep. Nil discards it.
	Logger *slog.Logger
	// Metrics counts the rows removed. Nil counts nothing.
	Metrics Recorder
}

// Sweeper removes what is past retention.
type Sweeper struct {
	pool *pgxpool.Pool
	q    *dbsqlc.Queries
	cfg  Config
}

// New returns a Sweeper of cfg, with its defaults applied, working on pool.
func New(pool *pgxpool.Pool, cfg Config) *Sweeper {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Budget <= 0 {
		cfg.Budget = min(cfg.Interval, MaxBudget)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sweeper{pool: pool, q: dbsqlc.New(), cfg: cfg}
}

// Interval is how often the retention.sweep job runs.
func (s *Sweeper) Interval() time.Duration { return s.cfg.Interval }

// Budget bounds how long one sweep takes batches.
func (s *Sweeper) Budget() time.Duration { return s.cfg.Budget }

// Result is what one sweep did.
type Result struct {
	// Removed counts the rows removed, by table (the Table constants),
	// and the message_ids forgotten (MessageIDs).
	Removed map[string]int64
	// More reports that the budget ran out while batches still found
	// rows: the next sweep goes on.
	More bool
}

// Total is the number of rows the sweep removed or changed.
func (r Result) Total() int64 {
	var n int64
	for _, v := range r.Removed {
		n += v
	}
	return n
}

// batchArgs are the parameters every retention query takes (their
// generated parameter structs have this shape).
type batchArgs struct {
	KeepMsByTenant json.RawMessage
	KeepMs         int64
	Batch          int32
}

// pass is one kind of row a sweep removes.
type pass struct {
	name string
	// period picks the pass's period out of a policy; nil for rows that
	// carry their own expiry, removed whatever the policy.
	period func(Policy) time.Duration
	// batch removes one batch, adds what it removed to counts and returns
	// how many rows it took.
	batch func(s *Sweeper, ctx context.Context, args *batchArgs, counts map[string]int64) (int64, error)
}

// passes run in this order: executions first, so that inbound messages
// they consumed go with them rather than have their message_id forgotten.
var passes = []pass{
	{name: "executions", period: func(p Policy) time.Duration { return p.Executions }, batch: (*Sweeper).executionsBatch},
	{name: "inbound messages", period: func(p Policy) time.Duration { return p.Inbound }, batch: (*Sweeper).inboundMessagesBatch},
	{name: "inbound message ids", period: func(p Policy) time.Duration { return p.Idempotency }, batch: (*Sweeper).messageIDsBatch},
	{name: "idempotency keys", period: func(p Policy) time.Duration { return p.Idempotency }, batch: (*Sweeper).idempotencyKeysBatch},
	{name: "inbound events", period: func(p Policy) time.Duration { return p.Idempotency }, batch: (*Sweeper).inboundEventsBatch},
	{name: "console sessions", batch: (*Sweeper).consoleSessionsBatch},
	{name: "operator sessions", batch: (*Sweeper).operatorSessionsBatch},
}

// Sweep removes what is past retention, batch after batch, until each
// kind of row has a batch that finds nothing or the budget is spent. Each
// kind may use an equal share of what is left of the budget, so a backlog
// of one does not hold the others back. An error in one kind stops that
// kind only; the others still run.
func (s *Sweeper) Sweep(ctx context.Context) (Result, error) {
	start := time.Now()
	end := start.Add(s.cfg.Budget)
	res := Result{Removed: map[string]int64{}}
	var errs []error
	for i, p := range passes {
		args, ok := s.args(p.period)
		if !ok {
			continue
		}
		deadline := time.Now().Add(time.Until(end) / time.Duration(len(passes)-i))
		more, err := s.drain(ctx, p, args, deadline, res.Removed)
		res.More = res.More || more
		if err != nil {
			errs = append(errs, fmt.Errorf("retention: removing %s: %w", p.name, err))
		}
	}
	s.log(ctx, res, time.Since(start), errors.Join(errs...))
	return res, errors.Join(errs...)
}

// drain runs p's batches until one takes nothing or the deadline passes
// (more is then true).
func (s *Sweeper) drain(ctx context.Context, p pass, args batchArgs, deadline time.Time, counts map[string]int64) (more bool, err error) {
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if !time.Now().Before(deadline) {
			return true, nil
		}
		n, err := p.batch(s, ctx, &args, counts)
		if err != nil || n == 0 {
			return false, err
		}
	}
}

// args returns the batch parameters of a period, and false when every
// tenant keeps such rows forever. A nil period (rows with their own
// expiry) takes the batch size only.
func (s *Sweeper) args(period func(Policy) time.Duration) (batchArgs, bool) {
	if period == nil {
		return batchArgs{Batch: int32(s.cfg.Batch)}, true
	}
	some := period(s.cfg.Default) > 0
	byTenant := make(map[string]int64, len(s.cfg.PerTenant))
	for tenant, p := range s.cfg.PerTenant {
		byTenant[tenant] = millis(period(p))
		some = some || period(p) > 0
	}
	raw, err := json.Marshal(byTenant)
	if err != nil {
		panic(err) // a map of strings to numbers always encodes
	}
	return batchArgs{KeepMsByTenant: raw, KeepMs: millis(period(s.cfg.Default)), Batch: int32(s.cfg.Batch)}, some
}

// millis is d in whole milliseconds, rounded up so that a period under a
// millisecond still expires.
func millis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

func (s *Sweeper) executionsBatch(ctx context.Context, args *batchArgs, counts map[string]int64) (int64, error) {
	row, err := s.q.RetentionSweepExecutions(ctx, s.pool, (*dbsqlc.RetentionSweepExecutionsParams)(args))
	if err != nil {
		return 0, err
	}
	s.count(counts, TableEvents, row.Events)
	s.count(counts, TableMessages, row.Messages)
	s.count(counts, TableExecutions, row.Executions)
	s.count(counts, TableThreads, row.Threads)
	return row.Executions, nil
}

func (s *Sweeper) inboundMessagesBatch(ctx context.Context, args *batchArgs, counts map[string]int64) (int64, error) {
	n, err := s.q.RetentionSweepInboundMessages(ctx, s.pool, (*dbsqlc.RetentionSweepInboundMessagesParams)(args))
	s.count(counts, TableMessages, n)
	return n, err
}

func (s *Sweeper) messageIDsBatch(ctx context.Context, args *batchArgs, counts map[string]int64) (int64, error) {
	n, err := s.q.RetentionForgetInboundMessageIDs(ctx, s.pool, (*dbsqlc.RetentionForgetInboundMessageIDsParams)(args))
	s.count(counts, MessageIDs, n)
	return n, err
}

func (s *Sweeper) idempotencyKeysBatch(ctx context.Context, args *batchArgs, counts map[string]int64) (int64, error) {
	n, err := s.q.RetentionSweepIdempotencyKeys(ctx, s.pool, (*dbsqlc.RetentionSweepIdempotencyKeysParams)(args))
	s.count(counts, TableIdempotencyKeys, n)
	return n, err
}

func (s *Sweeper) inboundEventsBatch(ctx context.Context, args *batchArgs, counts map[string]int64) (int64, error) {
	n, err := s.q.RetentionSweepInboundEvents(ctx, s.pool, (*dbsqlc.RetentionSweepInboundEventsParams)(args))
	s.count(counts, TableInboundEvents, n)
	return n, err
}

// consoleSessionsBatch removes console sessions that have expired, signed
// out or not.
func (s *Sweeper) consoleSessionsBatch(ctx context.Context, args *batchArgs, counts map[string]int64) (int64, error) {
	n, err := s.q.ConsoleSessionDeleteExpired(ctx, s.pool, &dbsqlc.ConsoleSessionDeleteExpiredParams{Batch: args.Batch})
	s.count(counts, TableConsoleSessions, n)
	return n, err
}

// operatorSessionsBatch removes River UI's operator sessions that have
// expired, signed out or not.
func (s *Sweeper) operatorSessionsBatch(ctx context.Context, args *batchArgs, counts map[string]int64) (int64, error) {
	n, err := s.q.OperatorSessionDeleteExpired(ctx, s.pool, &dbsqlc.OperatorSessionDeleteExpiredParams{Batch: args.Batch})
	s.count(counts, TableOperatorSessions, n)
	return n, err
}

// count adds n rows of table to counts and to the metric.
func (s *Sweeper) count(counts map[string]int64, table string, n int64) {
	if n <= 0 {
		return
	}
	counts[table] += n
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.RetentionRemoved(table, n)
	}
}

// log writes the sweep's line: info when it removed something, ran out of
// budget or failed; debug when there was nothing to do.
func (s *Sweeper) log(ctx context.Context, res Result, took time.Duration, err error) {
	attrs := []any{"took", took.Round(time.Millisecond), "more", res.More}
	for _, table := range []string{TableExecutions, TableEvents, TableMessages, TableThreads, MessageIDs, TableIdempotencyKeys, TableInboundEvents, TableConsoleSessions, TableOperatorSessions} {
		attrs = append(attrs, table, res.Removed[table])
	}
	switch {
	case err != nil:
		s.cfg.Logger.WarnContext(ctx, "retention sweep failed", append(attrs, "error", err)...)
	case res.Total() > 0 || res.More:
		s.cfg.Logger.InfoContext(ctx, "retention sweep", attrs...)
	default:
		s.cfg.Logger.DebugContext(ctx, "retention sweep", attrs...)
	}
}
