package scalefixture

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The fixture: a month of history at about 0.4 executions a second, the
// scale at which a missing index shows as a Seq Scan or a costly plan, and
// a slow page as a slow page. Most of it is ended work; the live set (what
// the monitoring views and the lane queries read) is the size a busy
// deployment holds at one time. Ids are given, so that tests can name rows.
const (
	// DefaultTenants is how many tenants share the rows when
	// Config.Tenants is zero.
	DefaultTenants = 100
	// Executions is the number of executions, ids 1 to Executions.
	Executions = 1_000_000
	// Threads is the number of threads, ids 1 to Threads; execution i runs
	// on thread (i - 1) % Threads + 1.
	Threads = 200_000
	// Events is the number of events: ten per execution, and those of the
	// busy thread's conversation.
	Events = 10*Executions + busyEvents
	// Live is the number of live (pending, running, waiting) executions.
	Live = 13_000
)

// The rows with more than their share, for the pages and queries that read
// many of something.
const (
	// BusyThread is a thread with a long conversation: BusyTurns inbound
	// messages, each answered by an outbound one, spread over the month,
	// besides the messages every thread has. Its five executions
	// (BusyThread + k × Threads) took the turns, 200 each, and logged five
	// events a turn; one outbound message in ten was queued for the
	// thread's lock.
	BusyThread int64 = 154_342
	// BusyTurns is the number of turns of BusyThread's conversation.
	BusyTurns = 1_000
	// BusyFirstMessage is the id of the conversation's first message; turn
	// k (from 1) is messages BusyFirstMessage + 2(k - 1) (inbound) and the
	// next id (its reply).
	BusyFirstMessage int64 = 1_500_001
	// JobsExecution is one of BusyThread's executions, the newest, that
	// has ExecutionJobs River jobs: step jobs, wait timeouts and the step
	// job of the last day every execution has.
	JobsExecution int64 = BusyThread + 4*Threads
	// ExecutionJobs is the number of JobsExecution's River jobs.
	ExecutionJobs = 41
)

// busyEvents is the number of events of BusyThread's conversation.
const busyEvents = 5 * BusyTurns

// Config sizes a fixture.
type Config struct {
	// Tenants is how many tenants share the rows: a row with id i belongs
	// to tenant TenantOf(i, Tenants). Each tenant has 50 workflows of 20
	// versions. Zero means DefaultTenants (100); at 1, one tenant has a
	// million executions.
	Tenants int
	// Logf, when set, receives how long each step took.
	Logf func(format string, args ...any)
}

// TenantOf is the tenant of the execution, thread or message with id i in a
// fixture of tenants tenants: "t" followed by i modulo tenants.
func TenantOf(i int64, tenants int) string {
	return "t" + strconv.FormatInt(i%int64(tenants), 10)
}

// Build loads the fixture into pool's database, which must be migrated and
// empty, in one transaction, then vacuums and analyzes it, as autovacuum
// would have by then. It takes about a minute on two cores.
func Build(ctx context.Context, pool *pgxpool.Pool, cfg Config) error {
	if cfg.Tenants == 0 {
		cfg.Tenants = DefaultTenants
	}
	if cfg.Tenants < 1 || cfg.Tenants > 1000 {
		return fmt.Errorf("scalefixture: Config.Tenants is %d; it must be 1 to 1000", cfg.Tenants)
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	fill := strings.NewReplacer("{tenants}", strconv.Itoa(cfg.Tenants),
		"{busy_thread}", strconv.FormatInt(BusyThread, 10), "{busy_turns}", strconv.Itoa(BusyTurns),
		"{busy_first_message}", strconv.FormatInt(BusyFirstMessage, 10),
		"{jobs_execution}", strconv.FormatInt(JobsExecution, 10))
	start := time.Now()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := setLoadSettings(ctx, tx); err != nil {
			return fmt.Errorf("setting the load's settings: %w", err)
		}
		for _, s := range steps {
			began := time.Now()
			if _, err := tx.Exec(ctx, fill.Replace(s.sql)); err != nil {
				return fmt.Errorf("loading %s: %w", s.name, err)
			}
			logf("loaded %-24s in %s", s.name, time.Since(began).Round(time.Millisecond))
		}
		return nil
	})
	if err != nil {
		return err
	}
	loaded := time.Now()
	if _, err := pool.Exec(ctx, "VACUUM (ANALYZE)"); err != nil {
		return fmt.Errorf("vacuuming the fixture: %w", err)
	}
	logf("fixture loaded in %s, vacuumed and analyzed in %s",
		loaded.Sub(start).Round(time.Millisecond), time.Since(loaded).Round(time.Millisecond))
	return nil
}

// setLoadSettings makes the load transaction cheap: it does not wait for
// its commit to be flushed and, for a superuser, skips the foreign key
// checks and triggers, which take most of the load's time; the rows are
// consistent by construction.
func setLoadSettings(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
		return err
	}
	var super bool
	if err := tx.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil || !super {
		return err
	}
	_, err := tx.Exec(ctx, "SET LOCAL session_replication_role = replica")
	return err
}
