package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgtest"
)

// baton soak with a short run and a retention of one second samples every
// period into its CSV, and its retention sweep removes the executions that
// ended more than a retention ago: the kept database holds fewer of them
// than the soak finished.
func TestSoakSmoke(t *testing.T) {
	t.Parallel()
	csvPath := filepath.Join(t.TempDir(), "soak.csv")
	cmd := command(t, nil, "soak", "--database-url", pgtest.ServerURL(), "--duration", "8s", "--sample", "2s",
		"--rate", "40", "--clients", "8", "--retention", "1s", "--max-conns", "16", "--csv", csvPath, "--keep")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s\n%s", out, stderr.String())
	require.Contains(t, string(out), "EXEC/S")

	f, err := os.Open(csvPath)
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(rows), 4, "a header and a row per sample")
	require.Equal(t, "executions_per_s", rows[0][1])
	finished := 0.0
	for _, r := range rows[1:] {
		perSecond, err := strconv.ParseFloat(r[1], 64)
		require.NoError(t, err)
		require.Greater(t, perSecond, 0.0, "every sample saw executions end: %v", r)
		finished += perSecond * 2
	}

	name := regexp.MustCompile(`database (baton_soak_\d+)`).FindStringSubmatch(stderr.String())
	require.NotNil(t, name, stderr.String())
	ctx := context.Background()
	server, err := pgx.Connect(ctx, pgtest.ServerURL())
	require.NoError(t, err)
	defer server.Close(ctx)
	t.Cleanup(func() {
		_, _ = server.Exec(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+name[1]+" WITH (FORCE)")
	})

	cfg, err := pgx.ParseConfig(pgtest.ServerURL())
	require.NoError(t, err)
	cfg.Database = name[1]
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var kept, sweeps int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM agent_execution WHERE status = 'completed'`).Scan(&kept))
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'retention.sweep' AND state = 'completed'`).Scan(&sweeps))
	require.Positive(t, sweeps, "the retention sweep ran")
	require.Less(t, float64(kept), finished/2, "the sweep removed what ended more than a second ago (%.0f finished)", finished)
}
