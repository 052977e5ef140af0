package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/db/dbsqlc"
)

// defaultWatchInterval is how often --watch refreshes when it is given no
// interval.
const defaultWatchInterval = 2 * time.Second

// clearScreen moves the cursor home and clears the terminal between --watch
// frames.
const clearScreen = "\033[H\033[2J"

// watchFlag is --watch: a boolean flag ("--watch") that also takes an
// interval ("--watch=5s", or "--watch 5s", which joinWatchInterval turns
// into the former).
type watchFlag struct {
	on       bool
	interval time.Duration
}

func (w *watchFlag) IsBoolFlag() bool { return true }

func (w *watchFlag) String() string {
	if w == nil || !w.on {
		return "false"
	}
	return w.interval.String()
}

func (w *watchFlag) Set(s string) error {
	if b, err := strconv.ParseBool(s); err == nil {
		w.on = b
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("want a positive interval such as 2s, got %q", s)
	}
	w.on, w.interval = true, d
	return nil
}

// monitorOptions are baton monitor's flags.
type monitorOptions struct {
	databaseURL string
	tenant      string
	limit       int
	json        bool
	watch       watchFlag
}

func cmdMonitor(ctx context.Context, args []string) error {
	opts := monitorOptions{watch: watchFlag{interval: defaultWatchInterval}}
	fs := flag.NewFlagSet("monitor", flag.ContinueOnError)
	fs.StringVar(&opts.databaseURL, "database-url", "", "PostgreSQL connection string (DATABASE_URL)")
	fs.StringVar(&opts.tenant, "tenant", "", "show only this tenant (default: all tenants)")
	fs.IntVar(&opts.limit, "limit", 20, "rows shown per list (totals always count every row)")
	fs.BoolVar(&opts.json, "json", false, "print one JSON object (one per line with --watch) instead of tables")
	fs.Var(&opts.watch, "watch", "refresh until interrupted, every 2s or the interval given (--watch 5s)")
	if err := parseFlags(fs, joinWatchInterval(args), envFlag{"database-url", "DATABASE_URL"}); err != nil {
		return err
	}
	if opts.databaseURL == "" {
		return errors.New("DATABASE_URL is not set")
	}
	if opts.limit < 1 {
		return errors.New("--limit must be at least 1")
	}
	poolCfg, err := pgxpool.ParseConfig(opts.databaseURL)
	if err != nil {
		return fmt.Errorf("parsing DATABASE_URL: %w", err)
	}
	poolCfg.MaxConns = 2
	pool, err := connectPool(ctx, poolCfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := checkMigrated(ctx, pool); err != nil {
		return err
	}
	return runMonitor(ctx, pool, opts, os.Stdout)
}

// joinWatchInterval rewrites "--watch 5s" as "--watch=5s", so that the
// flag parser, for which --watch alone is a boolean, reads the interval with
// it wherever it stands among the flags. The monitor takes no argument that
// is not a flag, so a word after --watch can only be its interval.
func joinWatchInterval(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if (a == "--watch" || a == "-watch") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}

// runMonitor prints one frame, or with --watch a frame every interval until
// ctx ends. In watch mode a failed read is shown in its frame and the next
// frame tries again.
func runMonitor(ctx context.Context, pool *pgxpool.Pool, opts monitorOptions, out io.Writer) error {
	frame := func() error {
		snap, err := readSnapshot(ctx, pool, opts)
		if err != nil {
			return err
		}
		if opts.json {
			return json.NewEncoder(out).Encode(snap)
		}
		return renderSnapshot(out, snap)
	}
	if !opts.watch.on {
		return frame()
	}
	ticker := time.NewTicker(opts.watch.interval)
	defer ticker.Stop()
	for {
		if !opts.json {
			fmt.Fprint(out, clearScreen)
		}
		if err := frame(); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			fmt.Fprintf(out, "baton monitor: %v (retrying every %s)\n", err, opts.watch.interval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// monitorSnapshot is one frame: what --json prints.
type monitorSnapshot struct {
	GeneratedAt time.Time `json:"generated_at"`
	// Tenant is the --tenant filter; null means all tenants.
	Tenant *string `json:"tenant"`
	// Status is monitor_execution_status: pending, running and waiting
	// executions per tenant; Totals sums it over the tenants shown.
	Status      []statusRow      `json:"status"`
	Totals      map[string]int64 `json:"totals"`
	Waiting     executionList    `json:"waiting"`
	Stuck       executionList    `json:"stuck"`
	ActiveLocks lockList         `json:"active_locks"`
	StaleLocks  lockList         `json:"stale_locks"`
	Lanes       laneTable        `json:"lanes"`
}

type statusRow struct {
	TenantID      string  `json:"tenant_id"`
	Status        string  `json:"status"`
	Count         int64   `json:"count"`
	AvgAgeSeconds float64 `json:"avg_age_seconds"`
}

// executionList is a page of waiting or stuck executions; Total counts all.
type executionList struct {
	Total int64          `json:"total"`
	Rows  []executionRow `json:"rows"`
}

type executionRow struct {
	TenantID     string     `json:"tenant_id"`
	ExecutionID  string     `json:"execution_id"`
	WorkflowID   string     `json:"workflow_id"`
	ThreadID     string     `json:"thread_id"`
	WaitingFor   *string    `json:"waiting_for"`
	WaitingUntil *time.Time `json:"waiting_until"`
	UpdatedAt    time.Time  `json:"updated_at"`
	WaitingHours float64    `json:"waiting_hours"`
}

// lockList is a page of thread locks; Total counts all.
type lockList struct {
	Total int64     `json:"total"`
	Rows  []lockRow `json:"rows"`
}

type lockRow struct {
	TenantID          string     `json:"tenant_id"`
	ThreadID          string     `json:"thread_id"`
	ActiveExecutionID string     `json:"active_execution_id"`
	ExecutionLockedAt *time.Time `json:"execution_locked_at"`
	LockMinutes       float64    `json:"lock_minutes"`
}

// readSnapshot reads every view in one read-only REPEATABLE READ
// transaction, so the figures of a frame agree with each other.
func readSnapshot(ctx context.Context, pool *pgxpool.Pool, opts monitorOptions) (*monitorSnapshot, error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("beginning the monitor transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	q := dbsqlc.New()
	snap := &monitorSnapshot{GeneratedAt: time.Now().UTC(), Totals: map[string]int64{}}
	var tenant *string
	if opts.tenant != "" {
		tenant = &opts.tenant
		snap.Tenant = tenant
	}
	limit := int32(min(opts.limit, 1<<30))

	status, err := q.MonitorCLIStatus(ctx, tx, tenant)
	if err != nil {
		return nil, fmt.Errorf("reading monitor_execution_status: %w", err)
	}
	snap.Status = make([]statusRow, 0, len(status))
	for _, s := range status {
		snap.Status = append(snap.Status, statusRow{s.TenantID, string(s.Status), s.Count, s.AvgAgeSeconds})
		snap.Totals[string(s.Status)] += s.Count
	}

	waiting, err := q.MonitorCLIWaiting(ctx, tx, &dbsqlc.MonitorCLIWaitingParams{TenantID: tenant, Max: limit})
	if err != nil {
		return nil, fmt.Errorf("reading monitor_waiting_executions: %w", err)
	}
	snap.Waiting.Rows = make([]executionRow, 0, len(waiting))
	for _, w := range waiting {
		snap.Waiting.Total = w.Total
		snap.Waiting.Rows = append(snap.Waiting.Rows, executionRow{w.TenantID, w.ExecutionID, w.WorkflowID, w.ThreadID, w.WaitingFor, w.WaitingUntil, w.UpdatedAt, w.WaitingHours})
	}

	stuck, err := q.MonitorCLIStuck(ctx, tx, &dbsqlc.MonitorCLIStuckParams{TenantID: tenant, Max: limit})
	if err != nil {
		return nil, fmt.Errorf("reading monitor_stuck_executions: %w", err)
	}
	snap.Stuck.Rows = make([]executionRow, 0, len(stuck))
	for _, w := range stuck {
		snap.Stuck.Total = w.Total
		snap.Stuck.Rows = append(snap.Stuck.Rows, executionRow{w.TenantID, w.ExecutionID, w.WorkflowID, w.ThreadID, w.WaitingFor, w.WaitingUntil, w.UpdatedAt, w.WaitingHours})
	}

	active, err := q.MonitorCLIActiveLocks(ctx, tx, &dbsqlc.MonitorCLIActiveLocksParams{TenantID: tenant, Max: limit})
	if err != nil {
		return nil, fmt.Errorf("reading monitor_active_locks: %w", err)
	}
	snap.ActiveLocks.Rows = make([]lockRow, 0, len(active))
	for _, l := range active {
		snap.ActiveLocks.Total = l.Total
		snap.ActiveLocks.Rows = append(snap.ActiveLocks.Rows, lockRow{l.TenantID, l.ThreadID, l.ActiveExecutionID, l.ExecutionLockedAt, l.LockMinutes})
	}

	stale, err := q.MonitorCLIStaleLocks(ctx, tx, &dbsqlc.MonitorCLIStaleLocksParams{TenantID: tenant, Max: limit})
	if err != nil {
		return nil, fmt.Errorf("reading monitor_stale_locks: %w", err)
	}
	snap.StaleLocks.Rows = make([]lockRow, 0, len(stale))
	for _, l := range stale {
		snap.StaleLocks.Total = l.Total
		snap.StaleLocks.Rows = append(snap.StaleLocks.Rows, lockRow{l.TenantID, l.ThreadID, l.ActiveExecutionID, l.ExecutionLockedAt, l.LockMinutes})
	}

	if snap.Lanes, err = readLanes(ctx, tx, q, opts.tenant, opts.limit); err != nil {
		return nil, err
	}
	return snap, nil
}
