package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := parseFlags(os.Args[1:])
	if err == nil {
		err = run(ctx, cfg, os.Stdout, progressTo(os.Stderr))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

// progressTo writes progress lines to w.
func progressTo(w io.Writer) func(string, ...any) {
	return func(format string, a ...any) { fmt.Fprintf(w, "peers: "+format+"\n", a...) }
}

// config is what the flags set.
type config struct {
	databaseURL  string
	dataDir      string
	rounds       int
	duration     time.Duration
	warmup       time.Duration
	clients      int
	keys         int
	keyedClients int
	chains       int
	waiting      int
	queuePoll    time.Duration
	maxConns     int
	jsonOut      bool
	jsonFile     string
	keep         bool
	// only, when not empty, names the series to measure (keys such as
	// "3/baton-inbound").
	only []string
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.StringVar(&c.databaseURL, "database-url", os.Getenv("DATABASE_URL"), "PostgreSQL server to measure on (DATABASE_URL); the bench creates two databases there. Unset: a private cluster")
	fs.StringVar(&c.dataDir, "data-dir", filepath.Join(os.TempDir(), "baton-peers"), "data directory of the private PostgreSQL cluster (used when DATABASE_URL is unset)")
	fs.IntVar(&c.rounds, "rounds", 5, "rounds; each measures every Baton figure, then every DBOS figure")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long each figure is measured")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "how long each figure runs before it is measured")
	fs.IntVar(&c.clients, "clients", 16, "closed-loop clients of the five-node figure (1)")
	fs.IntVar(&c.keys, "keys", 40, "conversations (thread keys, partition keys) of figure 3")
	fs.IntVar(&c.keyedClients, "keyed-clients", 80, "closed-loop clients of figure 3, client i on key i mod --keys")
	fs.IntVar(&c.chains, "chains", 16, "chains of the River floor (4)")
	fs.IntVar(&c.waiting, "waiting", 200, "runs waiting to be resumed in figure 2")
	fs.DurationVar(&c.queuePoll, "queue-poll", 10*time.Millisecond, "base polling interval of DBOS's partitioned queue (3)")
	fs.IntVar(&c.maxConns, "max-conns", 40, "pool size of each system (Baton's pool; each DBOS figure's pool)")
	fs.BoolVar(&c.jsonOut, "json", false, "print JSON (every round, medians, ratios) instead of markdown")
	fs.StringVar(&c.jsonFile, "json-file", "", "also write the JSON to this file")
	fs.BoolVar(&c.keep, "keep", false, "keep the two databases instead of dropping them")
	only := fs.String("only", "", "comma-separated figures to measure, by key (1/baton, 2/baton, 3/baton-inbound, 3/baton-keyed, 4/floor, 1/dbos-steps, 1/dbos-tx, 2/dbos, 3/dbos-steps, 3/dbos-tx); empty: all")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if *only != "" {
		c.only = strings.Split(*only, ",")
	}
	if c.rounds <= 0 || c.duration <= 0 || c.warmup < 0 || c.clients <= 0 || c.keys <= 0 || c.keyedClients <= 0 ||
		c.chains <= 0 || c.waiting <= 0 || c.queuePoll <= 0 || c.maxConns <= 0 {
		return c, fmt.Errorf("every count and duration must be positive (--warmup may be 0)")
	}
	return c, nil
}
