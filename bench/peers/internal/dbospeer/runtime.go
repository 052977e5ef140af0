package dbospeer

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/internal/benchkit"
)

// Config configures the DBOS figures.
type Config struct {
	// DatabaseURL is DBOS's database (system tables and bench_outbound).
	DatabaseURL string
	// MaxConns is the size of each figure's pool (40, as Baton's).
	MaxConns int
	Window   benchkit.Window
	// Clients drive the five-node figures (16).
	Clients int
	// Keys are the partition keys of the queued figure (40), and
	// KeyedClients its clients (80), client i on key i mod Keys.
	Keys, KeyedClients int
	// QueuePoll is the partitioned queue's base polling interval (10 ms).
	QueuePoll time.Duration
	// Waiting is how many workflows wait in Recv in the resume figure (200).
	Waiting int
}

// Bench runs the DBOS figures.
type Bench struct {
	cfg Config
}

// New returns a bench on cfg.
func New(cfg Config) *Bench { return &Bench{cfg: cfg} }

// sqlOutboundTable is the application's table: one row per message sent.
const sqlOutboundTable = `CREATE TABLE IF NOT EXISTS bench_outbound (
  id bigserial PRIMARY KEY,
  workflow_id text NOT NULL UNIQUE,
  body text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
)`

// Prepare creates the application's table and DBOS's system tables.
func (b *Bench) Prepare(ctx context.Context) error {
	pool, err := pgxpool.New(ctx, b.cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connecting to DBOS's database: %w", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, sqlOutboundTable); err != nil {
		return fmt.Errorf("creating bench_outbound: %w", err)
	}
	if err := dbos.Migrate(ctx, b.cfg.DatabaseURL, dbos.WithMigrateLogger(errorLogger())); err != nil {
		return fmt.Errorf("migrating DBOS's system database: %w", err)
	}
	return nil
}

// runtime is one figure's launched DBOS context.
type runtime struct {
	dbos dbos.Context
	pool *pgxpool.Pool
	// ds is the data source of the transactional steps: the system pool
	// itself, so a step's write and its checkpoint commit together.
	ds *dbos.DataSource
	// live counts, per partition key, the workflows of that key inside
	// their body; overlaps counts the times one entered while another was.
	live     map[string]*atomic.Int32
	overlaps atomic.Int64
	// inRecv counts the workflows that reached Recv.
	inRecv atomic.Int64
	queue  dbos.Queue
}

// launch starts a DBOS context on a pool of its own with the bench's
// workflows registered, and the partitioned queue when queue names one.
func (b *Bench) launch(ctx context.Context, queue string) (*runtime, error) {
	pcfg, err := pgxpool.ParseConfig(b.cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("parsing DBOS's database URL: %w", err)
	}
	pcfg.MaxConns = int32(b.cfg.MaxConns)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to DBOS's database: %w", err)
	}
	dctx, err := dbos.NewContext(ctx, dbos.Config{
		AppName: "peers", ApplicationVersion: "peers", SystemDBPool: pool,
		Logger: errorLogger(),
	})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("creating the DBOS context: %w", err)
	}
	rt := &runtime{dbos: dctx, pool: pool, live: map[string]*atomic.Int32{}}
	for k := range b.cfg.Keys {
		rt.live[partitionKey(k)] = &atomic.Int32{}
	}
	if err := rt.register(queue, b.cfg.QueuePoll); err != nil {
		rt.shutdown()
		return nil, err
	}
	if err := dbos.Launch(dctx); err != nil {
		rt.shutdown()
		return nil, fmt.Errorf("launching DBOS: %w", err)
	}
	return rt, nil
}

// register registers the workflows, the data source and, when queue is not
// empty, the partitioned queue: concurrency 1 per partition key.
func (rt *runtime) register(queue string, poll time.Duration) error {
	ds, err := dbos.NewDataSource(rt.dbos, rt.pool, dbos.WithDataSourceName("bench"))
	if err != nil {
		return fmt.Errorf("creating the DBOS data source: %w", err)
	}
	rt.ds = ds
	dbos.RegisterWorkflow(rt.dbos, rt.stepsWorkflow, dbos.WithWorkflowName(wfSteps))
	dbos.RegisterWorkflow(rt.dbos, rt.txWorkflow, dbos.WithWorkflowName(wfTx))
	dbos.RegisterWorkflow(rt.dbos, rt.waitWorkflow, dbos.WithWorkflowName(wfWait))
	if queue == "" {
		return nil
	}
	q, err := dbos.RegisterQueue(rt.dbos, queue, dbos.WithPartitionConcurrency(1),
		dbos.WithQueueBasePollingInterval(poll), dbos.WithQueueOnConflict(dbos.QueueConflictAlwaysUpdate))
	if err != nil {
		return fmt.Errorf("registering queue %s: %w", queue, err)
	}
	rt.queue = q
	return nil
}

// shutdown stops the context; DBOS closes the pool.
func (rt *runtime) shutdown() {
	_ = dbos.Shutdown(rt.dbos, 10*time.Second)
	rt.pool.Close()
}

// partitionKey is the partition key (conversation) k.
func partitionKey(k int) string { return fmt.Sprintf("k%03d", k) }

// errorLogger is DBOS's logger: errors only, to stderr.
func errorLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}
