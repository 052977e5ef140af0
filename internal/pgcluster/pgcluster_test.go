package pgcluster_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgcluster"
)

// clusterDir returns a fresh directory for a cluster whose parents the
// postgres OS user can search, which it needs when the test runs as root.
func clusterDir(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	// t.TempDir makes its directory and its parent 0700.
	require.NoError(t, os.Chmod(filepath.Dir(tmp), 0o755))
	require.NoError(t, os.Chmod(tmp, 0o755))
	return filepath.Join(tmp, "data")
}

// startCluster starts a cluster in dir, skipping the test when this machine
// has no PostgreSQL binaries, and stops it when the test ends.
func startCluster(t *testing.T, ctx context.Context, dir string) *pgcluster.Cluster {
	t.Helper()
	c, err := pgcluster.Start(ctx, pgcluster.Options{
		Dir:    dir,
		Fast:   true,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Skipf("skipping: no PostgreSQL binaries on this machine: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, c.Stop(context.Background()))
	})
	return c
}

// selectOne connects to url and checks that the server answers a query.
func selectOne(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var one int
	require.NoError(t, conn.QueryRow(ctx, "SELECT 1").Scan(&one))
	require.Equal(t, 1, one)
}

func TestStartStopAndReuse(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := clusterDir(t)

	start := time.Now()
	first := startCluster(t, ctx, dir)
	t.Logf("initdb and start took %v", time.Since(start))
	require.Equal(t, dir, first.Dir())
	require.FileExists(t, filepath.Join(dir, "PG_VERSION"))
	require.Contains(t, first.URL(), "postgres://postgres@127.0.0.1:")
	require.Contains(t, first.URL(), "/postgres?sslmode=disable")
	selectOne(t, ctx, first.URL())

	require.True(t, first.Owner())

	// A second Start while the first owns the directory is refused, or,
	// with Share, reuses the server, port and all, as a guest.
	_, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Fast: true})
	require.ErrorIs(t, err, pgcluster.ErrInUse)
	again, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Fast: true, Share: true})
	require.NoError(t, err)
	require.False(t, again.Owner())
	require.Equal(t, first.Port(), again.Port())
	require.Equal(t, first.URL(), again.URL())

	// A port other than the running server's is refused.
	_, err = pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Port: first.Port() + 1, Fast: true, Share: true})
	require.ErrorContains(t, err, "already running")

	// The guest neither stops the server nor may kill it; the owner stops it.
	require.NoError(t, again.Stop(ctx))
	selectOne(t, ctx, first.URL())
	require.Error(t, again.StopImmediate(ctx))
	selectOne(t, ctx, first.URL())
	require.NoError(t, first.Stop(ctx))
	require.False(t, first.Owner(), "Stop gives the ownership up")
	require.NoError(t, first.Stop(ctx), "stopping a stopped cluster does nothing")
	conn, err := pgx.Connect(ctx, first.URL())
	if err == nil {
		conn.Close(ctx)
	}
	require.Error(t, err, "the server still accepts connections after Stop")

	// Starting again reuses the initialized cluster: its data survives.
	start = time.Now()
	restarted := startCluster(t, ctx, dir)
	t.Logf("restart took %v", time.Since(start))
	selectOne(t, ctx, restarted.URL())
}

func TestStartKeepsData(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := clusterDir(t)

	c := startCluster(t, ctx, dir)
	conn, err := pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('still here')")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	require.NoError(t, c.Stop(ctx))

	c = startCluster(t, ctx, dir)
	conn, err = pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v string
	require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
	require.Equal(t, "still here", v)
}

func TestStartRequiresDir(t *testing.T) {
	t.Parallel()
	_, err := pgcluster.Start(t.Context(), pgcluster.Options{})
	require.ErrorContains(t, err, "Options.Dir is empty")
}

// startStandby starts a streaming standby of primary in dir, and stops it
// when the test ends.
func startStandby(t *testing.T, ctx context.Context, dir string, primary *pgcluster.Cluster, name string) *pgcluster.Cluster {
	t.Helper()
	c, err := pgcluster.Start(ctx, pgcluster.Options{
		Dir:         dir,
		Fast:        true,
		Primary:     primary,
		StandbyName: name,
		Logger:      slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, c.Stop(context.Background()))
	})
	return c
}

// A primary waits for its synchronous standby, which pg_basebackup copied
// from it: a row committed on the primary is on the standby, which refuses
// writes. Once the primary is killed and the standby promoted, the standby
// has the row and takes writes without waiting for a standby of its own;
// the multi-host URL finds whichever of the two accepts writes.
func TestStandbyPromote(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := clusterDir(t)

	primary, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Fast: true, SynchronousStandby: "replica_a"})
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Skipf("skipping: no PostgreSQL binaries on this machine: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, primary.Stop(context.Background())) })
	start := time.Now()
	standby := startStandby(t, ctx, filepath.Join(filepath.Dir(dir), "standby"), primary, "replica_a")
	t.Logf("pg_basebackup and start took %v", time.Since(start))
	require.NotEqual(t, primary.Port(), standby.Port())

	conn, err := pgx.Connect(ctx, primary.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	// The standby streams and the primary counts it as its synchronous one.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var name, state string
		require.NoError(c, conn.QueryRow(ctx, "SELECT application_name, sync_state FROM pg_stat_replication").Scan(&name, &state))
		require.Equal(c, "replica_a", name)
		require.Equal(c, "sync", state)
	}, 30*time.Second, 20*time.Millisecond)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before')")
	require.NoError(t, err)

	// With remote_apply the row would be visible at once; synchronous_commit
	// on only waits for the standby's flush, so the replay may lag a little.
	sconn, err := pgx.Connect(ctx, standby.URL())
	require.NoError(t, err)
	defer sconn.Close(ctx)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var v string
		require.NoError(c, sconn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
		require.Equal(c, "before", v)
	}, 10*time.Second, 10*time.Millisecond)
	_, err = sconn.Exec(ctx, "INSERT INTO kept VALUES ('on the standby')")
	require.ErrorContains(t, err, "read-only transaction")

	multi := pgcluster.MultiHostURL("postgres", primary, standby)
	require.Equal(t, fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		primary.Port(), standby.Port()), multi)
	require.Equal(t, primary.Port(), serverPort(t, ctx, multi))

	require.NoError(t, primary.StopImmediate(ctx))
	require.NoError(t, primary.StopImmediate(ctx), "stopping a stopped cluster does nothing")
	_, err = pgx.Connect(ctx, multi)
	require.Error(t, err, "the multi-host URL connected while no server accepts writes")

	start = time.Now()
	require.NoError(t, standby.Promote(ctx))
	t.Logf("promotion took %v", time.Since(start))
	require.ErrorContains(t, standby.Promote(ctx), "not in standby mode")

	// The promoted server has the row, takes writes without waiting for a
	// synchronous standby, and is the one the multi-host URL finds.
	require.Equal(t, standby.Port(), serverPort(t, ctx, multi))
	pconn, err := pgx.Connect(ctx, multi)
	require.NoError(t, err)
	defer pconn.Close(ctx)
	writeCtx, writeCancel := context.WithTimeout(ctx, 10*time.Second)
	defer writeCancel()
	_, err = pconn.Exec(writeCtx, "INSERT INTO kept VALUES ('after')")
	require.NoError(t, err)
	var kept []string
	require.NoError(t, pconn.QueryRow(ctx, "SELECT array_agg(v ORDER BY v) FROM kept").Scan(&kept))
	require.Equal(t, []string{"after", "before"}, kept)
}

// serverPort connects to url and returns the port of the server it reached.
func serverPort(t *testing.T, ctx context.Context, url string) int {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var port int
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_setting('port')::int").Scan(&port))
	return port
}

func TestReplicationOptionsChecked(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	for _, tc := range []struct {
		opts pgcluster.Options
		want string
	}{
		{pgcluster.Options{Dir: dir, SynchronousStandby: "a b"}, "SynchronousStandby"},
		{pgcluster.Options{Dir: dir, StandbyName: "a"}, "needs Options.Primary"},
		{pgcluster.Options{Dir: dir, Primary: &pgcluster.Cluster{}, StandbyName: "x'"}, "StandbyName"},
		{pgcluster.Options{Dir: dir, Primary: &pgcluster.Cluster{}, SynchronousStandby: "a"}, "cannot both be set"},
	} {
		_, err := pgcluster.Start(t.Context(), tc.opts)
		require.ErrorContains(t, err, tc.want)
	}
	require.NoDirExists(t, dir, "a refused start touched its directory")
}

// A commit on a primary whose synchronous standby is down waits for it. A
// client whose connection is lost while it waits has no answer, although the
// row is committed on the primary (PostgreSQL's documented behaviour, and why
// clients retry with idempotency keys). Once the standby is back, commits
// return again and it has both rows.
func TestSynchronousStandbyHoldsCommits(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := clusterDir(t)
	primary, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Fast: true, SynchronousStandby: "replica_b"})
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Skipf("skipping: no PostgreSQL binaries on this machine: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, primary.Stop(context.Background())) })
	standbyDir := filepath.Join(filepath.Dir(dir), "standby")
	standby := startStandby(t, ctx, standbyDir, primary, "replica_b")

	conn, err := pgx.Connect(ctx, primary.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (v text)")
	require.NoError(t, err)
	require.NoError(t, standby.Stop(ctx))

	// The commit waits for the standby: the backend shows the SyncRep wait
	// event and its row is not visible yet. Its connection is then cut.
	pid := conn.PgConn().PID()
	inserted := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, "INSERT INTO kept VALUES ('unanswered')")
		inserted <- err
	}()
	other, err := pgx.Connect(ctx, primary.URL())
	require.NoError(t, err)
	defer other.Close(ctx)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var event string
		require.NoError(c, other.QueryRow(ctx,
			"SELECT coalesce(wait_event, '') FROM pg_stat_activity WHERE pid = $1", pid).Scan(&event))
		require.Equal(c, "SyncRep", event)
	}, 30*time.Second, 10*time.Millisecond)
	var n int
	require.NoError(t, other.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n))
	require.Zero(t, n, "a commit waiting for its synchronous standby is visible")
	_, err = other.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
	require.NoError(t, err)
	require.Error(t, <-inserted, "a commit returned while the synchronous standby was down")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, other.QueryRow(ctx, "SELECT count(*) FROM kept WHERE v = 'unanswered'").Scan(&n))
		require.Equal(c, 1, n, "the unanswered commit is not on the primary")
	}, 10*time.Second, 10*time.Millisecond)

	// Start reuses the standby's directory: it is a standby still.
	standby = startStandby(t, ctx, standbyDir, primary, "replica_b")
	writeCtx, writeCancel := context.WithTimeout(ctx, 30*time.Second)
	defer writeCancel()
	_, err = other.Exec(writeCtx, "INSERT INTO kept VALUES ('answered')")
	require.NoError(t, err)
	sconn, err := pgx.Connect(ctx, standby.URL())
	require.NoError(t, err)
	defer sconn.Close(ctx)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var kept []string
		require.NoError(c, sconn.QueryRow(ctx, "SELECT array_agg(v ORDER BY v) FROM kept").Scan(&kept))
		require.Equal(c, []string{"answered", "unanswered"}, kept)
	}, 10*time.Second, 10*time.Millisecond)
}
