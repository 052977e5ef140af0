package live_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/live"
)

var tenantSeq atomic.Int64

type testBundle struct {
	pool *pgxpool.Pool
	hub  *live.Hub
	// tenant owns execution, whose row id is executionID.
	tenant, execution string
	executionID       int64
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	b := newBundle(t, pgtest.NewPool(t))
	hub, err := live.NewHub(live.Config{Pool: b.pool})
	require.NoError(t, err)
	hub.Start()
	t.Cleanup(hub.Stop)
	b.hub = hub
	return b
}

// newBundle makes the tenant's execution in pool's database; the caller
// starts the hub.
func newBundle(t *testing.T, pool *pgxpool.Pool) *testBundle {
	t.Helper()
	ctx := context.Background()
	b := &testBundle{pool: pool, tenant: fmt.Sprintf("live-%d", tenantSeq.Add(1)), execution: "exec-live"}
	require.NoError(t, pool.QueryRow(ctx, `
		WITH t AS (
		    INSERT INTO thread (tenant_id, thread_id, channel, contact) VALUES ($1, 'thread-live', 'api', 'contact-live')
		    RETURNING id
		)
		INSERT INTO agent_execution (tenant_id, execution_id, workflow_id, version, thread_id)
		SELECT $1, $2, 'wf-live', '1', t.id FROM t
		RETURNING id`, b.tenant, b.execution).Scan(&b.executionID))
	return b
}

// insertEvent writes one streamed event through db (the numbering trigger
// runs as for the engine's writes) and returns its id.
func (b *testBundle) insertEvent(t *testing.T, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, step string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, db.QueryRow(context.Background(), `
		INSERT INTO execution_event (tenant_id, execution_id, action, message, node_id, payload)
		VALUES ($1, $2, 'workflow.step_update', $3, $3, jsonb_build_object('step_id', $3::text, 'status', 'completed'))
		RETURNING id`, b.tenant, b.executionID, step).Scan(&id))
	return id
}

func (b *testBundle) subscribe(t *testing.T) *live.Subscription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sub, err := b.hub.Subscribe(ctx, live.Filter{TenantID: b.tenant, ExecutionID: b.execution})
	require.NoError(t, err)
	t.Cleanup(sub.Close)
	return sub
}

// idleInTransaction opens a transaction on dbURL that has a transaction id
// and leaves it idle until the test ends; it returns that id.
func idleInTransaction(t *testing.T, dbURL, statement string) int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if statement != "" {
		_, err = tx.Exec(ctx, statement)
		require.NoError(t, err)
	}
	var xid int64
	require.NoError(t, tx.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&xid))
	return xid
}

// serverXmin is the oldest transaction running anywhere on the server.
func serverXmin(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var xmin int64
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint").Scan(&xmin))
	return xmin
}

// TestHubIgnoresUnrelatedTransactions: a transaction
// left idle in another database on the same server, and a Baton transaction
// in this database that writes no events, delay no event: for 5 s of events
// committed every 100 ms, each reaches a live subscriber within 1 s of its
// commit, all of them, in order.
func TestHubIgnoresUnrelatedTransactions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	otherDB := idleInTransaction(t, pgtest.NewDatabase(t), "")
	var otherThread int64
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO thread (tenant_id, thread_id, channel, contact)
		VALUES ($1, 'thread-idle', 'api', 'contact-idle') RETURNING id`, b.tenant).Scan(&otherThread))
	noEvents := idleInTransaction(t, b.pool.Config().ConnString(), fmt.Sprintf("UPDATE thread SET updated_at = now() WHERE id = %d", otherThread))
	sub := b.subscribe(t)

	type delivery struct {
		id int64
		at time.Time
	}
	received := make(chan delivery, 100)
	go func() {
		defer close(received)
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				return
			}
			received <- delivery{ev.ID, time.Now()}
		}
	}()

	var ids []int64
	committed := map[int64]time.Time{}
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		id := b.insertEvent(t, tx, fmt.Sprintf("step-%d", len(ids)))
		require.NoError(t, tx.Commit(ctx))
		committed[id] = time.Now()
		ids = append(ids, id)
	}

	var got []int64
	var worst time.Duration
	for len(got) < len(ids) {
		select {
		case d, ok := <-received:
			require.True(t, ok, "the subscription ended after %d of %d events", len(got), len(ids))
			got = append(got, d.id)
			lag := d.at.Sub(committed[d.id])
			worst = max(worst, lag)
			require.Less(t, lag, time.Second, "event %d reached the subscriber %s after its commit", d.id, lag)
		case <-time.After(2 * time.Second):
			t.Fatalf("%d of %d events delivered; the rest waited over 2 s", len(got), len(ids))
		}
	}
	require.Equal(t, ids, got, "every event, in order")
	t.Logf("%d events, worst commit-to-delivery %s", len(ids), worst)

	// The idle transactions were the server's oldest throughout: a fence on
	// the server-wide xmin would have held every event back.
	require.LessOrEqual(t, serverXmin(t, b.pool), min(otherDB, noEvents))
}

// TestHubWaitsForEarlierWriter: while an unrelated transaction is open (so
// the hub must look at the event writers themselves), an event whose id is
// drawn first but whose transaction commits last is still delivered, and
// before the later id. The early writer numbers an event in a savepoint it
// rolls back and then another, to show a rolled-back savepoint does not
// unregister it.
func TestHubWaitsForEarlierWriter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	idleInTransaction(t, pgtest.NewDatabase(t), "")
	sub := b.subscribe(t)

	early, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = early.Rollback(ctx) }()
	savepoint, err := early.Begin(ctx)
	require.NoError(t, err)
	gone := b.insertEvent(t, savepoint, "gone")
	require.NoError(t, savepoint.Rollback(ctx))
	earlyID := b.insertEvent(t, early, "early")
	lateID := b.insertEvent(t, b.pool, "late") // commits at once
	require.Less(t, gone, earlyID)
	require.Less(t, earlyID, lateID)

	waitCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	ev, err := sub.Next(waitCtx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "the later event must wait for the earlier one, got %+v", ev)

	require.NoError(t, early.Commit(ctx))
	var got []int64
	for range 2 {
		waitCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ev, err := sub.Next(waitCtx)
		cancel()
		require.NoError(t, err)
		got = append(got, ev.ID)
	}
	require.Equal(t, []int64{earlyID, lateID}, got)
}

// TestEventWritersXmin: execution_event_writers_xmin (migration 00019) is
// the full transaction id of the oldest running event writer of this
// database, rebuilt from the 32 bits pg_locks shows; with none, an id past
// every transaction that has ended; and the server's xmin without a look at pg_locks when
// that is already recent enough.
func TestEventWritersXmin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	blocker := idleInTransaction(t, pgtest.NewDatabase(t), "")
	writersXmin := func(wanted int64) int64 {
		var v int64
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT execution_event_writers_xmin($1)", wanted).Scan(&v))
		return v
	}
	const anyXid = int64(1) << 62

	// No writer: past every transaction that has ended (such as the
	// hub's fences), however old the idle blocker.
	var ended int64
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&ended))
	idle := writersXmin(anyXid)
	require.Greater(t, idle, ended)
	require.Greater(t, idle, blocker)

	w, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = w.Rollback(ctx) }()
	b.insertEvent(t, w, "w")
	var wXid int64
	require.NoError(t, w.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&wXid))
	later, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = later.Rollback(ctx) }()
	b.insertEvent(t, later, "later")
	require.Equal(t, wXid, writersXmin(anyXid), "the oldest of two writers")

	var laterXid int64
	require.NoError(t, later.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&laterXid))
	require.NoError(t, w.Commit(ctx))
	require.Equal(t, laterXid, writersXmin(anyXid), "the one writer left")
	require.NoError(t, later.Rollback(ctx))
	require.Greater(t, writersXmin(anyXid), laterXid)

	// Wanted already reached by the server's xmin: that xmin, which the
	// idle blocker holds at or below its own id.
	require.LessOrEqual(t, writersXmin(0), blocker)
}
