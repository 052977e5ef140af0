package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgtest"
)

// baton bench with tiny durations measures every figure it can, marks the
// others as not measured, and drops its database.
func TestBenchSmoke(t *testing.T) {
	t.Parallel()
	cmd := command(t, nil, "bench", "--database-url", pgtest.ServerURL(), "--json",
		"--duration", "2s", "--warmup", "300ms", "--chains", "4", "--concurrency", "4,8",
		"--commit-clients", "4", "--max-conns", "16")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", out, stderr.String())
	var report benchReport
	require.NoError(t, json.Unmarshal(out, &report), "%s", out)
	require.Equal(t, "2ms", report.River["fetch_cooldown"])

	byFigure := map[string][]benchRow{}
	for _, r := range report.Rows {
		byFigure[r.Figure] = append(byFigure[r.Figure], r)
	}
	require.Len(t, byFigure["(a)"], 1)
	require.Len(t, byFigure["(b)"], 2)
	require.Len(t, byFigure["(e)"], 2)
	for _, fig := range []string{"(a)", "(b)", "(c)", "(d)", "(e)"} {
		for _, r := range byFigure[fig] {
			require.True(t, r.Measured, "%s %s", fig, r.What)
			require.Greater(t, r.Value, 0.0, "%s %s", fig, r.What)
		}
	}
	for _, r := range byFigure["(b)"] {
		require.Greater(t, r.Ratio, 0.0, r.What)
	}
	require.Greater(t, byFigure["(e)"][1].Ratio, 0.0)
	for _, fig := range []string{"(c)", "(d)"} {
		require.Len(t, byFigure[fig], 1)
	}

	conn, err := pgx.Connect(context.Background(), pgtest.ServerURL())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var exists bool
	require.NoError(t, conn.QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", report.Database).Scan(&exists))
	require.False(t, exists, "the bench database is dropped without --keep")
}
