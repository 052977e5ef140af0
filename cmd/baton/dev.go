package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"

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
	c.flags(fs, "text")
	dataDir := fs.String("data-dir", filepath.Join(os.TempDir(), "baton-dev"), "data directory of the private PostgreSQL cluster (used when DATABASE_URL is unset): made empty at start, removed at exit")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	// The address and the cluster are taken before anything else, so that
	// a second baton dev stops at once and leaves the first one's alone.
	ln, err := listen(c.addr, "is another `make run` or `baton dev` running? --addr picks another address")
	if err != nil {
		return err
	}
	defer ln.Close()
	c.listener = ln
	logger := newLogger(c.logFormat.value, c.logLevel.value)
	if c.databaseURL == "" {
		remove, err := devCluster(ctx, &c, *dataDir, logger)
		if err != nil {
			return err
		}
		defer remove()
	}
	pool, err := connectPoolURL(ctx, c.databaseURL)
	if err != nil {
		return err
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
	c.devTenant = devTenant
	c.ready = func(addr string) {
		fmt.Printf(`
Baton dev is serving on http://%[1]s WITHOUT authentication (tenant %[2]q).
The console is at http://%[1]s/console/ (signed in as %[2]q).
The example workflow %[3]q is stored. Run it:

  curl -s -X POST http://%[1]s/api/v1/workflow/execute -H 'Content-Type: application/json' -H 'X-Tenant-ID: %[2]s' \
    -d '{"payload":{"workflow_id":"%[3]s","input":{"name":"Ana","visits":2},"execution_options":{"wait_for_completion":true}}}'

Press Ctrl-C to stop.
`, addr, devTenant, def.WorkflowID)
	}
	return serve(ctx, c)
}

// devCluster starts an empty private PostgreSQL cluster in dataDir, which
// this process then owns, and points c at its database baton. The function
// returned stops the cluster and deletes dataDir, so that every baton dev
// starts from nothing and leaves nothing behind; a cluster an earlier baton
// dev left there (one killed before it could remove it) is discarded at
// start. A cluster another live process owns there (another baton dev, or
// baton demo) is an error, and so is a directory that holds anything
// pgcluster did not make: neither is touched.
func devCluster(ctx context.Context, c *serveConfig, dataDir string, logger *slog.Logger) (remove func(), err error) {
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dataDir, Logger: logger, Fresh: true})
	switch {
	case errors.Is(err, pgcluster.ErrInUse):
		return nil, fmt.Errorf("the private PostgreSQL cluster in %s is in use by another process (is another `make run`, `baton dev` or `baton demo` running? --data-dir picks another directory)", dataDir)
	case errors.Is(err, pgcluster.ErrForeignDir):
		return nil, fmt.Errorf("%s holds files baton dev did not make, which it will not delete (a cluster an older baton dev kept there?): remove the directory, or pick another --data-dir", dataDir)
	case err != nil:
		return nil, fmt.Errorf("starting the private PostgreSQL cluster: %w", err)
	}
	remove = func() {
		if err := cluster.Remove(context.WithoutCancel(ctx)); err != nil {
			logger.Warn("removing the private PostgreSQL cluster", "error", err)
		}
	}
	url, err := ensureDatabase(ctx, cluster.URL(), "baton")
	if err != nil {
		remove()
		return nil, err
	}
	c.databaseURL = url
	fmt.Printf("PostgreSQL is up: %s (DATABASE_URL is unset: a private cluster in %s, removed with its data when baton dev exits)\n", url, cluster.Dir())
	return remove, nil
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
