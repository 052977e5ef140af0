package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/db"
	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/pgcluster"
)

//go:embed example.json
var exampleWorkflow []byte

// devTenant is the tenant baton dev stores its example under.
const devTenant = "dev"

func cmdDev(ctx context.Context, args []string) error {
	var c serveConfig
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	c.flags(fs)
	dataDir := fs.String("data-dir", filepath.Join(os.TempDir(), "baton-dev"), "data directory of the private PostgreSQL cluster (used when DATABASE_URL is unset)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.logFormat == "json" && os.Getenv("BATON_LOG_FORMAT") == "" {
		c.logFormat = "text"
	}
	logger := newLogger(c.logFormat, c.logLevel)
	if c.databaseURL == "" {
		fmt.Printf("DATABASE_URL is unset: starting a private PostgreSQL cluster in %s\n", *dataDir)
		cluster, err := pgcluster.Start(ctx, pgcluster.Options{Dir: *dataDir, Logger: logger})
		if err != nil {
			return fmt.Errorf("starting the private PostgreSQL cluster: %w", err)
		}
		defer func() {
			if err := cluster.Stop(context.WithoutCancel(ctx)); err != nil {
				logger.Warn("stopping the private PostgreSQL cluster", "error", err)
			}
		}()
		url, err := ensureDatabase(ctx, cluster.URL(), "baton")
		if err != nil {
			return err
		}
		c.databaseURL = url
		fmt.Printf("PostgreSQL is up: %s (data in %s; stopped when baton dev exits)\n", url, cluster.Dir())
	}
	pool, err := pgxpool.New(ctx, c.databaseURL)
	if err != nil {
		return fmt.Errorf("connecting to the database: %w", err)
	}
	defer pool.Close()
	if err := db.Migrate(ctx, pool, logger); err != nil {
		return err
	}
	var def *engine.StoredDefinition
	c.prepare = func(ctx context.Context, eng *engine.Engine) error {
		var err error
		def, _, err = eng.DefineWorkflow(ctx, pool, devTenant, exampleWorkflow)
		if err != nil {
			return fmt.Errorf("storing the example workflow: %w", err)
		}
		return nil
	}
	c.insecure = true
	c.weakSecrets = true
	c.ready = func(addr string) {
		fmt.Printf(`
Baton dev is serving on http://%[1]s WITHOUT authentication (tenant %[2]q).
The example workflow %[3]q is stored. Run it:

  curl -s -X POST http://%[1]s/api/v1/workflow/execute -H 'Content-Type: application/json' -H 'X-Tenant-ID: %[2]s' \
    -d '{"payload":{"workflow_id":"%[3]s","input":{"name":"Ana","visits":2},"execution_options":{"wait_for_completion":true}}}'

Press Ctrl-C to stop.
`, addr, devTenant, def.WorkflowID)
	}
	return serve(ctx, c)
}

// ensureDatabase creates the named database on the server if it is missing
// and returns a URL for it.
func ensureDatabase(ctx context.Context, serverURL, name string) (string, error) {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", fmt.Errorf("connecting to %s: %w", serverURL, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("looking for database %s: %w", name, err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return "", fmt.Errorf("creating database %s: %w", name, err)
		}
	}
	return withDatabase(serverURL, name)
}

// withDatabase returns the URL with its database replaced.
func withDatabase(serverURL, name string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", errors.New("the server URL is not a postgres:// URL")
	}
	u.Path = "/" + name
	return u.String(), nil
}

func splitFields(s string) []string { return strings.Fields(s) }
