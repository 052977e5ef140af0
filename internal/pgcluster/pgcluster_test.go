package pgcluster_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

	// A second Start while the first server runs reuses it, port and all.
	again := startCluster(t, ctx, dir)
	require.Equal(t, first.Port(), again.Port())
	require.Equal(t, first.URL(), again.URL())

	// A port other than the running server's is refused.
	_, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Port: first.Port() + 1, Fast: true})
	require.ErrorContains(t, err, "already running")

	require.NoError(t, first.Stop(ctx))
	require.NoError(t, again.Stop(ctx), "stopping a stopped cluster does nothing")
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
