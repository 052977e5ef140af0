package engine

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgtest"
)

// Share mode, step by step: share holders do not exclude each other and
// exclude exclusive holders both ways, and a waiting exclusive holder is not
// overtaken; one transaction admits one run this way; a run fits exactly
// while the others running plus the transactions the cluster can have in
// flight stay within the limit; a queue (for a freed slot), a per-tenant
// cap or a tenant's own lane send admission back to the exclusive lock.
func TestShareModeAdmission(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	var inFlight int
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_setting('max_connections')::int
		+ current_setting('max_prepared_transactions')::int`).Scan(&inFlight))
	e, err := New(Config{Pool: pool,
		LaneLimits:    map[string]int{"big": inFlight + 2, "capped": 10 * inFlight},
		LanePerTenant: map[string]int{"capped": 5}})
	require.NoError(t, err)
	begin := func() pgx.Tx {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		return tx
	}
	share := func(tx pgx.Tx, lane string, self int64) (sharedRoom, bool) {
		t.Helper()
		room, ok, err := e.shareLane(ctx, tx, "acme", lane, self)
		require.NoError(t, err)
		return room, ok
	}
	// alone runs share in a transaction of its own, rolled back at once.
	alone := func(lane string, self int64) (sharedRoom, bool) {
		t.Helper()
		tx := begin()
		defer func() { require.NoError(t, tx.Rollback(ctx)) }()
		return share(tx, lane, self)
	}
	exclusive := func(tx pgx.Tx, lane string) bool {
		t.Helper()
		_, ok, err := e.lockLane(ctx, tx, "acme", lane, false)
		require.NoError(t, err)
		return ok
	}
	for _, lane := range []string{"big", "capped"} { // the rows, as a first use makes them
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, _, err := e.lockLane(ctx, tx, "acme", lane, true)
			return err
		}))
	}

	a, b, c := begin(), begin(), begin()
	room, ok := share(a, "big", 1)
	require.True(t, ok)
	require.Equal(t, sharedRoom{fits: true}, room)
	_, ok = share(a, "big", 2)
	require.False(t, ok, "a transaction admits one run in share mode")
	room, ok = share(b, "big", 3)
	require.True(t, ok, "share holders do not exclude each other")
	require.True(t, room.fits)
	require.False(t, exclusive(c, "big"), "share holders exclude an exclusive holder")
	require.NoError(t, a.Rollback(ctx))
	require.NoError(t, b.Rollback(ctx))
	require.True(t, exclusive(c, "big"))
	_, ok = alone("big", 4)
	require.False(t, ok, "an exclusive holder excludes share holders")
	require.NoError(t, c.Rollback(ctx))

	// An exclusive holder waiting for share holders is not overtaken by new
	// ones.
	d := begin()
	_, ok = share(d, "big", 5)
	require.True(t, ok)
	waiter := begin()
	locked := make(chan error, 1)
	go func() {
		_, _, err := e.lockLane(ctx, waiter, "acme", "big", true)
		locked <- err
	}()
	require.Eventually(t, func() bool {
		var waiting bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)`).Scan(&waiting))
		return waiting
	}, 10*time.Second, 5*time.Millisecond)
	_, ok = alone("big", 6)
	require.False(t, ok, "a share request does not overtake a waiting exclusive holder")
	require.NoError(t, d.Rollback(ctx))
	require.NoError(t, <-locked)
	require.NoError(t, waiter.Rollback(ctx))

	// The limit is inFlight + 2: a run fits beside two others, not three.
	running := insertRuns(t, pool, "big", "running", 3)
	_, ok = alone("big", 7)
	require.False(t, ok)
	room, ok = alone("big", running[0])
	require.True(t, ok)
	require.True(t, room.fits, "a run is not counted beside itself")
	_, err = pool.Exec(ctx, `DELETE FROM agent_execution WHERE id = $1`, running[1])
	require.NoError(t, err)
	room, ok = alone("big", 8)
	require.True(t, ok)
	require.Equal(t, sharedRoom{fits: true}, room)

	// A freed slot (self 0) goes the exclusive way when a run is queued.
	room, ok = alone("big", 0)
	require.True(t, ok)
	require.Equal(t, sharedRoom{}, room)
	pending := insertRuns(t, pool, "big", "pending", 1)
	_, ok = alone("big", 0)
	require.False(t, ok, "a queue shows: the freed slot is admitted exclusively")
	room, ok = alone("big", 9)
	require.True(t, ok)
	require.True(t, room.queued)
	room, _ = alone("big", pending[0])
	require.False(t, room.queued, "a run does not queue behind itself")

	_, ok = alone("capped", 10)
	require.False(t, ok, "a lane with a per-tenant cap is admitted exclusively")
	_, ok = alone("own", 11)
	require.False(t, ok, "a tenant's own lane is admitted exclusively")
}

// insertRuns writes n executions of tenant acme in lane with status, by
// SQL, and returns their ids.
func insertRuns(t *testing.T, pool *pgxpool.Pool, lane, status string, n int) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
WITH th AS (
    INSERT INTO thread (tenant_id, thread_id, channel, contact)
    SELECT 'acme', $2 || '-' || i || '-' || gen_random_uuid(), 'api', gen_random_uuid()::text FROM generate_series(1, $3::int) i
    RETURNING id
)
INSERT INTO agent_execution (tenant_id, execution_id, workflow_id, version, status, thread_id, lane)
SELECT 'acme', gen_random_uuid()::text, 'wf', '1', $2::execution_status, th.id, $1 FROM th
RETURNING id`, lane, status, n)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return ids
}
