package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/bench/peers/internal/batonpeer"
	"github.com/batonrun/baton/bench/peers/internal/dbospeer"
	"github.com/batonrun/baton/bench/peers/internal/report"
	"github.com/batonrun/baton/db"
	"github.com/batonrun/baton/internal/benchkit"
	"github.com/batonrun/baton/jobs"
)

// figure is one measured figure of one system.
type figure struct {
	series report.Series
	run    func(ctx context.Context, round int) (report.Measurement, error)
}

// run sets up the server and the two databases, measures the rounds and
// prints the report.
func run(ctx context.Context, c config, stdout io.Writer, progress func(string, ...any)) error {
	began := time.Now()
	if c.databaseURL == "" {
		progress("DATABASE_URL is unset: starting a private PostgreSQL cluster in %s", c.dataDir)
	}
	server, err := benchkit.StartServer(ctx, c.databaseURL, c.dataDir)
	if err != nil {
		return err
	}
	defer func() {
		if err := server.Stop(context.WithoutCancel(ctx)); err != nil {
			progress("%v", err)
		}
	}()
	stamp := time.Now().UnixNano()
	batonURL, dropBaton, err := scratch(ctx, server, fmt.Sprintf("peers_baton_%d", stamp), c.keep, progress)
	if err != nil {
		return err
	}
	defer dropBaton()
	dbosURL, dropDBOS, err := scratch(ctx, server, fmt.Sprintf("peers_dbos_%d", stamp), c.keep, progress)
	if err != nil {
		return err
	}
	defer dropDBOS()
	pool, err := batonPool(ctx, batonURL, c.maxConns)
	if err != nil {
		return err
	}
	defer pool.Close()
	dbosBench := dbospeer.New(dbospeer.Config{DatabaseURL: dbosURL, MaxConns: c.maxConns, Window: window(c), Clients: c.clients,
		Keys: c.keys, KeyedClients: c.keyedClients, QueuePoll: c.queuePoll, Waiting: c.waiting})
	if err := dbosBench.Prepare(ctx); err != nil {
		return err
	}
	batonBench := batonpeer.New(batonpeer.Config{Pool: pool, Jobs: jobs.Config{}, Window: window(c), Clients: c.clients,
		Keys: c.keys, KeyedClients: c.keyedClients, Chains: c.chains, Waiting: c.waiting})
	book := report.NewBook()
	figures := declare(book, c, batonBench, dbosBench)
	if err := measure(ctx, c.rounds, figures, book, progress); err != nil {
		return err
	}
	meta := map[string]any{"rounds": c.rounds, "duration": c.duration.String(), "warmup": c.warmup.String(), "cpus": runtime.NumCPU(),
		"max_conns": c.maxConns, "private_cluster": server.Private(), "wall_seconds": time.Since(began).Seconds(),
		"river": map[string]string{"fetch_cooldown": jobs.DefaultFetchCooldown.String(), "fetch_poll_interval": jobs.DefaultFetchPollInterval.String()}}
	if c.jsonFile != "" {
		if err := writeJSON(c.jsonFile, book, meta); err != nil {
			return err
		}
	}
	if c.jsonOut {
		return book.JSON(stdout, meta)
	}
	fmt.Fprintf(stdout, "Peer bench: %d rounds, %s warm-up + %s measured per figure, %d CPUs, pools of %d; every round's runs checked. Wall time %s.\n\n",
		c.rounds, c.warmup, c.duration, runtime.NumCPU(), c.maxConns, time.Since(began).Round(time.Second))
	book.Markdown(stdout)
	return nil
}

// measure runs the rounds: round i measures every figure in order.
func measure(ctx context.Context, rounds int, figures []figure, book *report.Book, progress func(string, ...any)) error {
	for round := 1; round <= rounds; round++ {
		for _, f := range figures {
			progress("round %d/%d: %s %s %s", round, rounds, f.series.Figure, f.series.System, f.series.What)
			m, err := f.run(ctx, round)
			if err != nil {
				return fmt.Errorf("round %d, figure %s (%s %s): %w", round, f.series.Figure, f.series.System, f.series.What, err)
			}
			if err := book.Add(f.series.Key, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// scratch creates a database and returns its URL and what drops it (or,
// with keep, leaves it).
func scratch(ctx context.Context, server *benchkit.Server, name string, keep bool, progress func(string, ...any)) (string, func(), error) {
	url, err := server.CreateDatabase(ctx, name)
	if err != nil {
		return "", nil, err
	}
	progress("database %s created", name)
	if keep {
		return url, func() {}, nil
	}
	return url, func() {
		if err := server.DropDatabase(context.WithoutCancel(ctx), name); err != nil {
			progress("%v", err)
		}
	}, nil
}

// batonPool connects to Baton's database and migrates it.
func batonPool(ctx context.Context, url string, maxConns int) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parsing the database URL: %w", err)
	}
	pcfg.MaxConns = int32(maxConns)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to Baton's database: %w", err)
	}
	if err := db.Migrate(ctx, pool, nil); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

func window(c config) benchkit.Window { return benchkit.Window{Warmup: c.warmup, Duration: c.duration} }

// writeJSON writes the report's JSON to the file path.
func writeJSON(path string, book *report.Book, meta map[string]any) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	if err := book.JSON(f, meta); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}
