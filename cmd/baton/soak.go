package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/batonrun/baton/internal/benchkit"
	"github.com/batonrun/baton/jobs"
	"github.com/batonrun/baton/retention"
	"github.com/jackc/pgx/v5/pgxpool"
)

// soakConfig is what baton soak's flags set.
type soakConfig struct {
	databaseURL string
	dataDir     string
	duration    time.Duration
	sample      time.Duration
	rate        float64
	clients     int
	retention   time.Duration
	maxConns    int
	csvPath     string
	keep        bool
}

func cmdSoak(ctx context.Context, args []string, stdout io.Writer) error {
	var c soakConfig
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.StringVar(&c.databaseURL, "database-url", "", "PostgreSQL server to soak (DATABASE_URL); the soak creates a database of its own there. Unset: a private cluster")
	fs.StringVar(&c.dataDir, "data-dir", filepath.Join(os.TempDir(), "baton-soak"), "data directory of the private PostgreSQL cluster (used when DATABASE_URL is unset)")
	fs.DurationVar(&c.duration, "duration", 30*time.Minute, "how long the load runs")
	fs.DurationVar(&c.sample, "sample", time.Minute, "how often a row is sampled")
	fs.Float64Var(&c.rate, "rate", 200, "operations a second across all clients: five-node starts (half), waits resumed by an event (a quarter), inbound messages on threads (a quarter)")
	fs.IntVar(&c.clients, "clients", 32, "clients sharing the rate (a multiple of 4: each kind gets a quarter)")
	fs.DurationVar(&c.retention, "retention", 2*time.Minute, "how long terminal executions and idempotency keys are kept (retention.executions, .inbound and .idempotency)")
	fs.IntVar(&c.maxConns, "max-conns", 40, "size of the connection pool")
	fs.StringVar(&c.csvPath, "csv", "", "also write every sample to this CSV file")
	fs.BoolVar(&c.keep, "keep", false, "keep the soak database instead of dropping it")
	if err := parseFlags(fs, args, envFlag{"database-url", "DATABASE_URL"}); err != nil {
		return err
	}
	if c.duration <= 0 || c.sample <= 0 || c.rate <= 0 || c.clients < len(soakKinds) || c.retention <= 0 || c.maxConns <= 0 {
		return errors.New("--duration, --sample, --rate, --retention and --max-conns must be positive and --clients at least 4")
	}
	progress := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "soak: "+format+"\n", a...) }
	scratch, err := openScratchDatabase(ctx, "baton_soak", c.databaseURL, c.dataDir, c.maxConns, c.keep, progress)
	if err != nil {
		return err
	}
	defer scratch.Close()

	jc := soakJobsConfig(c, scratch.Pool)
	baton, err := benchkit.StartBaton(ctx, scratch.Pool, jc, soakTenant, benchkit.FiveNodeWorkflow, soakWaitWorkflow(max(c.retention, time.Second)), soakInboundWorkflow)
	if err != nil {
		return err
	}
	defer baton.Stop(context.WithoutCancel(ctx))
	threads, err := createSoakThreads(ctx, baton.Engine, scratch.Pool, c.clients)
	if err != nil {
		return err
	}
	load := &soakLoad{
		baton: baton, pool: scratch.Pool, clients: c.clients, threads: threads,
		interval: time.Duration(float64(c.clients) / c.rate * float64(time.Second)),
		runs:     benchkit.NewExecutionWatch(scratch.Pool), handled: benchkit.NewInboundWatch(scratch.Pool),
	}
	progress("database %s; %d clients, %.0f operations/s, retention %s, %s sampled every %s", scratch.Name, c.clients, c.rate, c.retention, c.duration, c.sample)

	var csv io.Writer = io.Discard
	if c.csvPath != "" {
		f, err := os.Create(c.csvPath)
		if err != nil {
			return err
		}
		defer f.Close()
		csv = f
	}
	samples, err := soak(ctx, c, load, scratch, stdout, csv)
	if err != nil {
		return err
	}
	printSoakVerdict(stdout, samples)
	return nil
}

// soakJobsConfig is Baton's River settings with the soak's short
// retention for everything (executions, replay keys, inbound messages,
// River's completed jobs), swept every tenth of it, and River's reindexer
// run once a retention, as River runs it once a day against its default
// day of completed jobs.
func soakJobsConfig(c soakConfig, pool *pgxpool.Pool) jobs.Config {
	r := c.retention
	sweep := retention.New(pool, retention.Config{
		Default:  retention.Policy{Executions: r, Idempotency: r, Inbound: r},
		Interval: max(r/10, time.Second),
	})
	return jobs.Config{Retention: sweep, CompletedJobRetention: r, ReindexInterval: r}
}

// soak runs the load for c.duration, sampling every c.sample, and returns
// the samples.
func soak(ctx context.Context, c soakConfig, load *soakLoad, scratch *scratchDatabase, table, csv io.Writer) ([]soakSample, error) {
	loadCtx, stop := context.WithCancel(ctx)
	defer stop()
	loadErr := make(chan error, 1)
	go func() { loadErr <- load.run(loadCtx) }()

	began := time.Now()
	tick := time.NewTicker(c.sample)
	defer tick.Stop()
	printSoakHeader(table, csv)
	var samples []soakSample
	last := began
	for time.Since(began) < c.duration {
		select {
		case err := <-loadErr:
			return samples, fmt.Errorf("the load stopped: %w", err)
		case <-ctx.Done():
			return samples, ctx.Err()
		case <-tick.C:
		}
		now := time.Now()
		s, err := takeSample(ctx, scratch.Pool, load.take(), now.Sub(began), now.Sub(last))
		if err != nil {
			return samples, err
		}
		last = now
		samples = append(samples, s)
		printSoakSample(table, csv, s)
	}
	stop()
	if err := <-loadErr; err != nil {
		return samples, fmt.Errorf("the load stopped: %w", err)
	}
	runtime.GC()
	return samples, nil
}
