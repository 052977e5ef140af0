package pgcluster_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgcluster"
)

// startFresh starts a cluster in dir with Options.Fresh, skipping the test
// when this machine has no PostgreSQL binaries, and stops it when the test
// ends if the test has not removed it.
func startFresh(t *testing.T, ctx context.Context, dir string) *pgcluster.Cluster {
	t.Helper()
	c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Fast: true, Fresh: true})
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Skipf("skipping: no PostgreSQL binaries on this machine: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Stop(context.Background())) })
	return c
}

// runSQL runs sql on the cluster's database postgres.
func runSQL(t *testing.T, ctx context.Context, c *pgcluster.Cluster, sql string) error {
	t.Helper()
	conn, err := pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// A fresh start discards what an earlier owner left in the directory, and
// Remove leaves no directory behind and no server running; a guest's
// Remove leaves the owner's cluster alone.
func TestFreshStartAndRemove(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := clusterDir(t)

	first := startFresh(t, ctx, dir)
	require.NoError(t, runSQL(t, ctx, first, "CREATE TABLE left_behind (v text)"))
	require.NoError(t, first.Stop(ctx), "the owner goes, its cluster stays")
	require.FileExists(t, filepath.Join(dir, "PG_VERSION"))

	second := startFresh(t, ctx, dir)
	require.ErrorContains(t, runSQL(t, ctx, second, "SELECT * FROM left_behind"), "does not exist",
		"a fresh start begins from an empty cluster")

	guest, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Share: true})
	require.NoError(t, err)
	require.NoError(t, guest.Remove(ctx))
	require.NoError(t, runSQL(t, ctx, second, "SELECT 1"), "a guest's Remove leaves the server running")
	require.DirExists(t, dir)

	require.NoError(t, second.Remove(ctx))
	require.NoDirExists(t, dir)
	require.False(t, second.Owner())
	conn, err := pgx.Connect(ctx, second.URL())
	if err == nil {
		conn.Close(ctx)
	}
	require.Error(t, err, "the server still accepts connections after Remove")
	require.NoError(t, second.Remove(ctx), "removing a removed cluster does nothing")
}

// Neither a fresh start nor Remove deletes a directory whose cluster this
// package did not initialize, or that holds something else.
func TestFreshAndRemoveSpareForeignDirectories(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	dir := clusterDir(t)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	precious := filepath.Join(dir, "precious.txt")
	require.NoError(t, os.WriteFile(precious, []byte("keep me"), 0o644))
	_, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Fresh: true})
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Skipf("skipping: no PostgreSQL binaries on this machine: %v", err)
	}
	require.ErrorIs(t, err, pgcluster.ErrForeignDir)
	require.FileExists(t, precious)

	// A cluster initialized by someone else: here, one whose marker is gone.
	other := clusterDir(t)
	c := startCluster(t, ctx, other)
	require.NoError(t, os.Remove(filepath.Join(other, "pgcluster.made")))
	require.ErrorIs(t, c.Remove(ctx), pgcluster.ErrForeignDir)
	require.FileExists(t, filepath.Join(other, "PG_VERSION"), "the foreign cluster is kept")
	require.False(t, c.Owner())
	_, err = pgcluster.Start(ctx, pgcluster.Options{Dir: other, Fresh: true})
	require.ErrorIs(t, err, pgcluster.ErrForeignDir)
	require.FileExists(t, filepath.Join(other, "PG_VERSION"), "the foreign cluster is kept")

	_, err = pgcluster.Start(ctx, pgcluster.Options{Dir: other, Fresh: true, Share: true})
	require.ErrorContains(t, err, "cannot both be set")
}

// A start interrupted while initdb writes the cluster (Ctrl-C in the first
// second of baton dev) leaves the directory empty, not a half-made cluster
// without a marker that the next fresh start would refuse as foreign.
func TestInterruptedInitdbLeavesNothing(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	started := make(chan error, 1)
	go func() {
		c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Fast: true, Fresh: true})
		if err == nil {
			err = c.Stop(context.Background())
			if err == nil {
				err = errors.New("the start was not interrupted")
			}
		}
		started <- err
	}()
	// Interrupt once initdb has begun to write.
	var err error
	for err == nil {
		entries, readErr := os.ReadDir(dir)
		if readErr == nil && len(entries) > 0 {
			cancel()
			err = <-started
			break
		}
		select {
		case err = <-started:
		case <-time.After(time.Millisecond):
		}
	}
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Skipf("skipping: no PostgreSQL binaries on this machine: %v", err)
	}
	require.ErrorContains(t, err, "initializing PostgreSQL cluster")
	entries, readErr := os.ReadDir(dir)
	require.NoError(t, readErr)
	require.Empty(t, entries, "nothing of the half-made cluster is left")

	c := startFresh(t, t.Context(), dir)
	require.NoError(t, runSQL(t, t.Context(), c, "SELECT 1"))
}
