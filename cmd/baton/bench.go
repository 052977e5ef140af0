package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batonrun/baton/internal/benchkit"
	"github.com/batonrun/baton/jobs"
)

// benchConfig is what baton bench's flags set.
type benchConfig struct {
	databaseURL   string
	dataDir       string
	duration      time.Duration
	warmup        time.Duration
	chains        int
	concurrency   []int
	commitClients int
	maxConns      int
	workers       int
	fetchCooldown time.Duration
	fetchPoll     time.Duration
	keep          bool
	jsonOut       bool
	cpuProfile    string
	// retention, when set, adds figure (f) in retentionRounds pairs.
	retention       time.Duration
	retentionRounds int
}

// benchRow is one line of the bench's table.
type benchRow struct {
	Figure string `json:"figure"`
	What   string `json:"what"`
	// Value is the figure, in Unit; zero when not measured.
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// Detail holds latencies, ratios and notes.
	Detail string `json:"detail"`
	// Ratio is the figure against its floor, when it has one.
	Ratio  float64 `json:"ratio,omitempty"`
	Target string  `json:"target,omitempty"`
	// Met says whether the figure meets its target; nil without a target.
	Met *bool `json:"met,omitempty"`
	// Measured is false for the rows that need features not built yet.
	Measured bool `json:"measured"`
}

// benchReport is what --json prints.
type benchReport struct {
	Database string         `json:"database"`
	CPUs     int            `json:"cpus"`
	MaxConns int            `json:"max_conns"`
	River    map[string]any `json:"river"`
	Duration string         `json:"duration_per_figure"`
	Rows     []benchRow     `json:"rows"`
}

func cmdBench(ctx context.Context, args []string, stdout io.Writer) error {
	var c benchConfig
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&c.databaseURL, "database-url", "", "PostgreSQL server to measure on (DATABASE_URL); the bench creates a database of its own there. Unset: a private cluster")
	fs.StringVar(&c.dataDir, "data-dir", filepath.Join(os.TempDir(), "baton-bench"), "data directory of the private PostgreSQL cluster (used when DATABASE_URL is unset)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long each figure is measured")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "how long each figure runs before it is measured")
	fs.IntVar(&c.chains, "chains", 16, "chains of the bare River floor (a)")
	conc := fs.String("concurrency", "16,64", "comma-separated concurrencies of the Baton figure (b); the first is compared with the floor")
	fs.IntVar(&c.commitClients, "commit-clients", 16, "clients of the commit-rate limit (e)")
	fs.IntVar(&c.maxConns, "max-conns", 40, "size of the connection pool all figures share")
	fs.IntVar(&c.workers, "workers", 0, "River workers of the high queue (0: Baton's default)")
	fs.DurationVar(&c.fetchCooldown, "fetch-cooldown", 0, "River FetchCooldown (0: Baton's default)")
	fs.DurationVar(&c.fetchPoll, "fetch-poll-interval", 0, "River FetchPollInterval (0: Baton's default)")
	fs.BoolVar(&c.keep, "keep", false, "keep the bench database instead of dropping it")
	fs.BoolVar(&c.jsonOut, "json", false, "print JSON instead of a table")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the Baton figure (b) to this file")
	fs.DurationVar(&c.retention, "retention", 0, "also measure (f): (b) at the first concurrency with everything kept this long and swept, against (b) without retention, in interleaved pairs (0: skip (f))")
	fs.IntVar(&c.retentionRounds, "retention-rounds", 5, "pairs of runs of (f)")
	if err := parseFlags(fs, args, envFlag{"database-url", "DATABASE_URL"}); err != nil {
		return err
	}
	for _, f := range strings.Split(*conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("--concurrency: %q is not a positive number", f)
		}
		c.concurrency = append(c.concurrency, n)
	}
	if c.duration <= 0 || c.warmup < 0 || c.chains <= 0 || c.commitClients <= 0 || c.maxConns <= 0 {
		return errors.New("--duration, --chains, --commit-clients and --max-conns must be positive and --warmup not negative")
	}
	if c.retention < 0 || c.retentionRounds <= 0 {
		return errors.New("--retention must not be negative and --retention-rounds must be positive")
	}
	if c.workers < 0 || c.fetchCooldown < 0 || c.fetchPoll < 0 {
		return errors.New("--workers, --fetch-cooldown and --fetch-poll-interval must not be negative (0 takes Baton's default)")
	}
	if c.fetchCooldown == 0 {
		c.fetchCooldown = jobs.DefaultFetchCooldown
	}
	if c.fetchPoll == 0 {
		c.fetchPoll = jobs.DefaultFetchPollInterval
	}
	if c.workers == 0 {
		c.workers = jobs.DefaultWorkers
	}
	progress := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", a...) }

	scratch, err := openScratchDatabase(ctx, "baton_bench", c.databaseURL, c.dataDir, c.maxConns, c.keep, progress)
	if err != nil {
		return err
	}
	defer scratch.Close()
	name, pool := scratch.Name, scratch.Pool
	progress("database %s migrated; each figure: %s warm-up, %s measured", name, c.warmup, c.duration)

	report := benchReport{
		Database: name, CPUs: runtime.NumCPU(), MaxConns: c.maxConns, Duration: c.duration.String(),
		River: map[string]any{
			"fetch_cooldown": c.fetchCooldown.String(), "fetch_poll_interval": c.fetchPoll.String(),
			"high_queue_workers": c.workers, "medium_queue_workers": max(c.workers/2, 1),
		},
	}
	b := &bencher{cfg: c, pool: pool, progress: progress}
	rows, err := b.run(ctx)
	if err != nil {
		return err
	}
	report.Rows = rows
	if c.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	printBenchTable(stdout, report, c.keep)
	return nil
}

// run measures every figure, each against its floor, one after the other.
func (b *bencher) run(ctx context.Context) ([]benchRow, error) {
	var rows []benchRow

	b.progress("(e) commit-rate limit: %d clients", b.cfg.commitClients)
	commits, err := b.commitRate(ctx)
	if err != nil {
		return nil, err
	}

	b.progress("(a) bare River floor: %d chains", b.cfg.chains)
	floor, err := b.riverFloor(ctx)
	if err != nil {
		return nil, err
	}
	rows = append(rows, benchRow{
		Figure: "(a)", What: fmt.Sprintf("bare River chained jobs, %d chains (floor)", b.cfg.chains),
		Value: floor.PerSecond, Unit: "steps/s", Measured: true,
		Detail: fmt.Sprintf("%d steps; %.1f tx/step", floor.Count, floor.TxPer),
	})

	baton, err := b.batonRuns(ctx)
	if err != nil {
		return nil, err
	}
	for i, r := range baton {
		row := benchRow{
			Figure: "(b)", What: fmt.Sprintf("Baton 5-node executions, concurrency %d", r.Concurrency),
			Value: r.PerSecond, Unit: "executions/s", Measured: true,
			Ratio:  r.PerSecond / floor.PerSecond,
			Detail: fmt.Sprintf("%d executions; start→terminal p50 %s p99 %s; %.1f tx/execution", r.Count, benchkit.Ms(r.P50), benchkit.Ms(r.P99), r.TxPer),
		}
		if i == 0 {
			row.Target = "≥ 0.50× (a)"
			row.Met = verdict(row.Ratio >= 0.5)
		}
		rows = append(rows, row)
	}

	b.progress("(c) resume round trip")
	resumes, err := b.resumeRoundTrip(ctx)
	if err != nil {
		return nil, err
	}
	b.progress("(d) one hot thread, 10 competing executions")
	hotRate, acquire, err := b.hotThread(ctx)
	if err != nil {
		return nil, err
	}
	rows = append(rows,
		benchRow{
			Figure: "(c)", What: "resume round trip (event accepted → next node done)",
			Value: float64(resumes.Percentile(0.5).Microseconds()) / 1000, Unit: "ms p50", Measured: true,
			Target: "p50 ≤ 10ms, p99 ≤ 50ms",
			Met:    verdict(resumes.Percentile(0.5) <= 10*time.Millisecond && resumes.Percentile(0.99) <= 50*time.Millisecond),
			Detail: fmt.Sprintf("%d resumes one at a time; p50 %s p99 %s", len(resumes), benchkit.Ms(resumes.Percentile(0.5)), benchkit.Ms(resumes.Percentile(0.99))),
		},
		benchRow{
			Figure: "(d)", What: "one hot thread, 10 competing executions",
			Value: hotRate, Unit: "messages/s", Measured: true,
			Detail: fmt.Sprintf("%d executions of 3 messages; lock acquisition (start → lock held, committed) p50 %s p99 %s",
				len(acquire), benchkit.Ms(acquire.Percentile(0.5)), benchkit.Ms(acquire.Percentile(0.99))),
		},
		benchRow{
			Figure: "(e)", What: fmt.Sprintf("single-row UPDATE + commit, %d clients (limit)", b.cfg.commitClients),
			Value: commits.PerSecond, Unit: "tx/s", Measured: true, Detail: fmt.Sprintf("%d commits", commits.Count),
		},
	)
	if len(baton) > 0 {
		steps := baton[0].PerSecond * benchkit.Nodes
		rows = append(rows, benchRow{
			Figure: "(e)", What: fmt.Sprintf("Baton node-steps/s at concurrency %d vs. the limit", baton[0].Concurrency),
			Value: steps, Unit: "node-steps/s", Measured: true, Ratio: steps / commits.PerSecond,
			Target: "≥ 0.25× limit", Met: verdict(steps/commits.PerSecond >= 0.25),
			Detail: fmt.Sprintf("%.2f× the commit-rate limit", steps/commits.PerSecond),
		})
	}
	if b.cfg.retention > 0 {
		row, err := b.retentionCost(ctx)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func printBenchTable(w io.Writer, r benchReport, kept bool) {
	fmt.Fprintf(w, "baton bench: %d CPUs, pool of %d connections, database %s", r.CPUs, r.MaxConns, r.Database)
	if kept {
		fmt.Fprint(w, " (kept)")
	}
	fmt.Fprintf(w, "\nRiver: FetchCooldown %s, FetchPollInterval %s, high queue %d workers, medium %d; %s measured per figure\n\n",
		r.River["fetch_cooldown"], r.River["fetch_poll_interval"], r.River["high_queue_workers"], r.River["medium_queue_workers"], r.Duration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FIGURE\tWHAT\tVALUE\tUNIT\tTARGET\tDETAIL")
	for _, row := range r.Rows {
		value := "-"
		switch {
		case row.Measured && row.Unit == "ratio":
			value = fmt.Sprintf("%.2f", row.Value)
		case row.Measured:
			value = fmt.Sprintf("%.1f", row.Value)
		}
		target := row.Target
		if target == "" {
			target = "-"
		} else if row.Measured {
			var notes []string
			if row.Ratio != 0 {
				notes = append(notes, fmt.Sprintf("%.2f", row.Ratio))
			}
			if row.Met != nil {
				notes = append(notes, map[bool]string{true: "met", false: "missed"}[*row.Met])
			}
			if len(notes) > 0 {
				target += " (" + strings.Join(notes, ", ") + ")"
			}
		}
		unit := row.Unit
		if unit == "" {
			unit = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", row.Figure, row.What, value, unit, target, row.Detail)
	}
	_ = tw.Flush()
}

func verdict(ok bool) *bool { return &ok }

// createBenchDatabase creates a scratch database on the server and returns
// its URL (baton demo's).
func createBenchDatabase(ctx context.Context, serverURL, name string) (string, error) {
	return (&benchkit.Server{URL: serverURL}).CreateDatabase(ctx, name)
}

// dropBenchDatabase drops a scratch database.
func dropBenchDatabase(ctx context.Context, serverURL, name string) error {
	return (&benchkit.Server{URL: serverURL}).DropDatabase(ctx, name)
}
