package pgtest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.Main(m)
}

func TestDatabasesAreMigratedAndIsolated(t *testing.T) {
	t.Parallel()
	// The two subtests run in parallel, each on a database of its own. Each
	// writes a row, waits until the other has written its row too, and then
	// checks that its database holds only its own.
	var written sync.WaitGroup
	written.Add(2)
	bothWritten := make(chan struct{})
	go func() {
		written.Wait()
		close(bothWritten)
	}()
	var mu sync.Mutex
	var databases []string
	t.Cleanup(func() {
		require.Len(t, databases, 2)
		require.NotEqual(t, databases[0], databases[1])
	})

	for _, tenant := range []string{"tenant_a", "tenant_b"} {
		t.Run(tenant, func(t *testing.T) {
			t.Parallel()
			var once sync.Once
			markWritten := func() { once.Do(written.Done) }
			defer markWritten() // even when the test fails early
			ctx := t.Context()

			start := time.Now()
			pool := pgtest.NewPool(t)
			t.Logf("NewPool took %v", time.Since(start))

			var name string
			require.NoError(t, pool.QueryRow(ctx, "SELECT current_database()").Scan(&name))
			mu.Lock()
			databases = append(databases, name)
			mu.Unlock()

			for _, table := range []string{"river_job", "agent_execution"} {
				var exists bool
				require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists))
				require.True(t, exists, "table %s is missing from %s", table, name)
			}

			insertExecution(t, ctx, pool, tenant)
			markWritten()
			select {
			case <-bothWritten:
			case <-time.After(30 * time.Second):
				t.Fatal("the other subtest did not write its row in time")
			}

			rows, err := pool.Query(ctx, "SELECT tenant_id FROM agent_execution")
			require.NoError(t, err)
			tenants, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			require.Equal(t, []string{tenant}, tenants)
		})
	}
}

func TestServerURL(t *testing.T) {
	t.Parallel()
	require.NotEmpty(t, pgtest.ServerURL())
	conn, err := pgx.Connect(t.Context(), pgtest.ServerURL())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname LIKE 'baton_tpl_%'").Scan(&n))
	require.Positive(t, n, "the template database is missing")
}

// insertExecution writes a thread and an execution on it for tenant.
func insertExecution(t *testing.T, ctx context.Context, pool *pgxpool.Pool, tenant string) {
	t.Helper()
	var threadID int64
	require.NoError(t, pool.QueryRow(ctx,
		`INSERT INTO thread (tenant_id, thread_id, channel, contact) VALUES ($1, 'th-1', 'test', 'someone') RETURNING id`,
		tenant).Scan(&threadID))
	_, err := pool.Exec(ctx,
		`INSERT INTO agent_execution (tenant_id, execution_id, workflow_id, version, thread_id) VALUES ($1, 'ex-1', 'wf', 'v1', $2)`,
		tenant, threadID)
	require.NoError(t, err)
}
