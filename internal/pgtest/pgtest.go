package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/db"
)

// EnvDatabaseURL names the environment variable holding the URL of the server
// to create test databases on. It may be a postgres:// URL or a keyword/value
// connection string, and its user needs the CREATEDB privilege.
const EnvDatabaseURL = "TEST_DATABASE_URL"

// EnvNoLocal names the environment variable that, set to a true value such as
// 1, makes Main skip its probe of a server at 127.0.0.1:5432, so that without
// TEST_DATABASE_URL it starts a private cluster.
const EnvNoLocal = "PGTEST_NO_LOCAL"

// LocalURL is the server Main uses when TEST_DATABASE_URL is unset and it
// answers within localProbeTimeout.
const LocalURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

const (
	// localProbeTimeout bounds the probe of LocalURL.
	localProbeTimeout = 2 * time.Second
	// setupTimeout bounds Main's setup and teardown steps.
	setupTimeout = 2 * time.Minute
	// dbTimeout bounds creating or dropping one test database.
	dbTimeout = time.Minute
	// createAttempts is how many times a CREATE DATABASE whose template is in
	// use is tried before giving up.
	createAttempts = 6
	// poolMaxConns is the size of the pools NewPool returns.
	poolMaxConns = 10
	// tempDirPattern names the directories of private clusters, so that
	// clusters left behind by a killed run can be found and removed.
	tempDirPattern = "baton-pgtest-*"
	// ownerCommentPrefix starts the comment on each template database that
	// names the process that created it.
	ownerCommentPrefix = "pgtest owner"
	// ownerFile, in a private cluster's directory, holds the pid of the test
	// process that started the cluster.
	ownerFile = "owner.pid"
)

// harness is what Main sets up for the tests of one package.
type harness struct {
	serverURL string
	admin     *pgxpool.Pool
	template  string
	prefix    string // of the test databases' names
	logger    *slog.Logger

	seq      atomic.Int64
	createMu sync.Mutex // serializes CREATE DATABASE

	mu      sync.Mutex
	created map[string]struct{} // databases not dropped yet, template aside
}

// active is the harness Main set up, or nil when Main has not run.
var active atomic.Pointer[harness]

// Main runs a test package's tests against a database server of their own,
// and exits with their result; call it from TestMain as pgtest.Main(m).
//
// It uses the server at TEST_DATABASE_URL when that is set, else the one at
// LocalURL when it answers within two seconds (unless PGTEST_NO_LOCAL is set),
// else a private cluster that pgcluster starts in a new directory under
// os.TempDir() and that Main stops and removes at the end. On that server it
// creates a template database named after the test binary with a random
// suffix, such as baton_tpl_engine_0a1b2c3d, migrated with db.Migrate. After
// the tests it drops the template and every database NewDatabase created that
// is still there. Main reports a setup failure on stderr and exits with 1.
func Main(m *testing.M) {
	os.Exit(run(m))
}

// Run is Main without the exit: it returns the exit code, so that a TestMain
// can remove what its tests left behind before it exits with it.
func Run(m *testing.M) int {
	return run(m)
}

// run is Main without the exit, so that its deferred cleanup runs.
func run(m *testing.M) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("pkg", "pgtest")

	h, teardown, err := setUp(logger)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		return 1
	}
	active.Store(h)
	code := m.Run()
	active.Store(nil)
	if err := teardown(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// setUp picks the server, connects to it, and creates the migrated template.
// The teardown it returns drops every database the harness created, then
// stops the private cluster if there is one.
func setUp(logger *slog.Logger) (_ *harness, teardown func() error, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()

	srv, err := pickServer(ctx, logger)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, srv.close())
		}
	}()

	cfg, err := pgxpool.ParseConfig(srv.url)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing server URL: %w", err)
	}
	cfg.MaxConns = 4
	admin, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to %s: %w", srv.source, err)
	}
	if err := admin.Ping(ctx); err != nil {
		admin.Close()
		return nil, nil, fmt.Errorf("connecting to %s: %w", srv.source, err)
	}

	suffix, err := randomSuffix()
	if err != nil {
		admin.Close()
		return nil, nil, err
	}
	pkg := binaryName()
	h := &harness{
		serverURL: srv.url,
		admin:     admin,
		template:  "baton_tpl_" + pkg + "_" + suffix,
		prefix:    "baton_test_" + pkg + "_" + suffix,
		logger:    logger,
		created:   map[string]struct{}{},
	}
	teardown = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		err := h.dropAll(ctx)
		admin.Close()
		return errors.Join(err, srv.close())
	}
	h.dropOrphans(ctx)
	if err := h.createTemplate(ctx); err != nil {
		return nil, nil, errors.Join(err, teardown())
	}
	return h, teardown, nil
}

// createTemplate creates and migrates the template database, then closes
// every connection to it and forbids new ones, since PostgreSQL only copies a
// database nobody is connected to.
func (h *harness) createTemplate(ctx context.Context) error {
	start := time.Now()
	if err := h.createDatabase(ctx, h.template, ""); err != nil {
		return err
	}
	created := time.Now()

	pool, err := pgxpool.New(ctx, h.databaseURL(h.template))
	if err != nil {
		return fmt.Errorf("connecting to template database %s: %w", h.template, err)
	}
	// db.Migrate logs every migration it applies; only its warnings matter here.
	migrateLogger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	err = db.Migrate(ctx, pool, migrateLogger)
	pool.Close()
	if err != nil {
		return fmt.Errorf("migrating template database %s: %w", h.template, err)
	}
	migrated := time.Now()

	// The comment names this process, so that a later run on this host can
	// drop the databases of a run that crashed before dropping its own.
	var comment string
	if err := h.admin.QueryRow(ctx, "SELECT format('COMMENT ON DATABASE %I IS %L', $1::text, $2::text)",
		h.template, ownerComment(os.Getpid())).Scan(&comment); err != nil {
		return fmt.Errorf("building comment on template database %s: %w", h.template, err)
	}
	if _, err := h.admin.Exec(ctx, comment); err != nil {
		return fmt.Errorf("commenting on template database %s: %w", h.template, err)
	}
	tpl := pgx.Identifier{h.template}.Sanitize()
	if _, err := h.admin.Exec(ctx, "ALTER DATABASE "+tpl+" WITH ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("closing template database %s to connections: %w", h.template, err)
	}
	if _, err := h.admin.Exec(ctx,
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
		h.template); err != nil {
		return fmt.Errorf("closing connections to template database %s: %w", h.template, err)
	}
	h.logger.InfoContext(ctx, "created template database", "name", h.template,
		"create", created.Sub(start), "migrate", migrated.Sub(created), "took", time.Since(start))
	return nil
}

// ownerComment returns the comment that marks a template database as made
// by process pid on this host.
func ownerComment(pid int) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s host=%s pid=%d", ownerCommentPrefix, host, pid)
}

// dropOrphans drops the templates, and the test databases copied from them,
// that a run on this host left behind when it crashed (a panic in a test
// skips Main's cleanup). It only touches databases whose template's comment
// names a process on this host that no longer exists, and only logs what it
// cannot do.
func (h *harness) dropOrphans(ctx context.Context) {
	rows, err := h.admin.Query(ctx, `
		SELECT datname, shobj_description(oid, 'pg_database')
		FROM pg_database
		WHERE datname LIKE 'baton\_tpl\_%'
		  AND shobj_description(oid, 'pg_database') LIKE $1`, ownerCommentPrefix+" %")
	if err != nil {
		h.logger.WarnContext(ctx, "cannot list databases left by crashed runs", "error", err)
		return
	}
	type orphan struct{ Template, Comment string }
	orphans, err := pgx.CollectRows(rows, pgx.RowToStructByPos[orphan])
	if err != nil {
		h.logger.WarnContext(ctx, "cannot list databases left by crashed runs", "error", err)
		return
	}
	host, _ := os.Hostname()
	for _, o := range orphans {
		var oHost string
		var pid int
		if _, err := fmt.Sscanf(o.Comment, ownerCommentPrefix+" host=%s pid=%d", &oHost, &pid); err != nil {
			continue
		}
		if oHost != host || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		prefix := "baton_test_" + strings.TrimPrefix(o.Template, "baton_tpl_") + "_"
		rows, err := h.admin.Query(ctx, "SELECT datname FROM pg_database WHERE left(datname, length($1)) = $1", prefix)
		if err != nil {
			h.logger.WarnContext(ctx, "cannot list databases left by crashed run", "template", o.Template, "error", err)
			continue
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			h.logger.WarnContext(ctx, "cannot list databases left by crashed run", "template", o.Template, "error", err)
			continue
		}
		for _, name := range append(names, o.Template) {
			if _, err := h.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
				h.logger.WarnContext(ctx, "cannot drop database left by crashed run", "database", name, "error", err)
			}
		}
		h.logger.InfoContext(ctx, "dropped databases left by crashed run", "template", o.Template, "owner", pid, "databases", len(names)+1)
	}
}

// NewDatabase creates a database of the test's own, a copy of the package's
// migrated template, and returns its URL. The database is dropped when the
// test and its subtests finish. Main must have been called from TestMain.
func NewDatabase(t testing.TB) string {
	t.Helper()
	h := active.Load()
	if h == nil {
		t.Fatal("pgtest: NewDatabase needs pgtest.Main to be called from the package's TestMain")
	}
	name := fmt.Sprintf("%s_%d", h.prefix, h.seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
	defer cancel()
	if err := h.createDatabase(ctx, name, h.template); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
		defer cancel()
		if err := h.dropDatabase(ctx, name); err != nil {
			// Main tries again once the tests are done.
			t.Logf("pgtest: %v", err)
		}
	})
	return h.databaseURL(name)
}

// NewPool creates a database as NewDatabase does and returns a pool of up to
// 10 connections to it. The pool is closed when the test and its subtests
// finish, before the database is dropped.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dbURL := NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("pgtest: parsing database URL: %v", err)
	}
	cfg.MaxConns = poolMaxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: creating pool: %v", err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("pgtest: connecting to test database: %v", err)
	}
	return pool
}

// ServerURL returns the URL of the server Main chose, connected to its
// maintenance database, for tests that create databases of their own; such
// tests must drop them too. It returns "" when Main has not been called.
func ServerURL() string {
	h := active.Load()
	if h == nil {
		return ""
	}
	return h.serverURL
}

// createDatabase creates database name as a copy of template, or of the
// server's default template when template is "". It retries while the
// template is in use, which PostgreSQL refuses, and creates one database at a
// time.
func (h *harness) createDatabase(ctx context.Context, name, template string) error {
	h.mu.Lock()
	if name != h.template {
		h.created[name] = struct{}{}
	}
	h.mu.Unlock()

	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		sql += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	h.createMu.Lock()
	defer h.createMu.Unlock()
	for attempt := 1; ; attempt++ {
		_, err := h.admin.Exec(ctx, sql)
		if err == nil {
			return nil
		}
		var pgErr *pgconn.PgError
		if attempt < createAttempts && errors.As(err, &pgErr) && pgErr.Code == "55006" { // object_in_use
			h.logger.InfoContext(ctx, "template in use, retrying", "database", name, "error", err)
			select {
			case <-ctx.Done():
				return fmt.Errorf("creating database %s: %w", name, err)
			case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
			}
			continue
		}
		return fmt.Errorf("creating database %s: %w", name, err)
	}
}

// dropDatabase drops database name, disconnecting whoever is still
// connected to it.
func (h *harness) dropDatabase(ctx context.Context, name string) error {
	if _, err := h.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping database %s: %w", name, err)
	}
	h.mu.Lock()
	delete(h.created, name)
	h.mu.Unlock()
	return nil
}

// dropAll drops the test databases that are still there, then the template.
func (h *harness) dropAll(ctx context.Context) error {
	h.mu.Lock()
	names := make([]string, 0, len(h.created))
	for name := range h.created {
		names = append(names, name)
	}
	h.mu.Unlock()
	var errs []error
	for _, name := range append(names, h.template) {
		errs = append(errs, h.dropDatabase(ctx, name))
	}
	return errors.Join(errs...)
}

// databaseURL returns the server URL with its database replaced by name.
func (h *harness) databaseURL(name string) string {
	return withDatabase(h.serverURL, name)
}

// withDatabase returns connString, a postgres:// URL or a keyword/value
// string, with its database replaced by name, which must be a plain
// identifier.
func withDatabase(connString, name string) string {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		if err == nil {
			u.Path = "/" + name
			u.RawPath = ""
			return u.String()
		}
	}
	// In a keyword/value string the last setting of a keyword wins.
	return connString + " dbname=" + name
}

// binaryName returns the test binary's name ("engine" for engine.test) made
// into a short lowercase identifier.
func binaryName() string {
	base := filepath.Base(os.Args[0])
	base = strings.TrimSuffix(base, ".exe")
	base = strings.TrimSuffix(base, ".test")
	var b strings.Builder
	for _, r := range strings.ToLower(base) {
		if b.Len() >= 24 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "pkg"
	}
	return b.String()
}

// randomSuffix returns eight random hex digits, which keep the names of
// concurrent runs and of databases left by crashed runs apart.
func randomSuffix() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating database name: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
