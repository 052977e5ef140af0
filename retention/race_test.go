package retention_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/retention"
)

// loadExpired writes, for each of tenants, n ended executions that expired
// a month ago, each with events and one delivered message, plus protected
// ones past retention too: parents of a waiting child, executions with a
// pending message and lock holders (protected of each kind per tenant).
// Rows are written with SQL, as many as a sweep race needs.
func loadExpired(t testing.TB, pool *pgxpool.Pool, tenants []string, n, events, protected int) {
	t.Helper()
	ctx := context.Background()
	for _, tenant := range tenants {
		_, err := pool.Exec(ctx, `
WITH th AS (
    INSERT INTO thread (tenant_id, thread_id, channel, contact)
    SELECT $1::text, 'th-' || i, 'api', 'c-' || i FROM generate_series(1, $2::int) i
    RETURNING id, thread_id
), x AS (
    INSERT INTO agent_execution (tenant_id, execution_id, workflow_id, version, status, thread_id, completed_at)
    SELECT $1::text, 'old-' || th.thread_id, 'wf', '1', 'completed', th.id, now() - interval '30 days' FROM th
    RETURNING id, thread_id
), ev AS (
    INSERT INTO execution_event (tenant_id, execution_id, action, message)
    SELECT $1::text, x.id, 'workflow.step', 'step ' || k FROM x, generate_series(1, $3::int) k
)
INSERT INTO thread_message (tenant_id, thread_id, direction, execution_id, node_id, step_seq, body, status)
SELECT $1::text, x.thread_id, 'out', x.id, 'say', 1, 'hola', 'delivered' FROM x`, tenant, n, events)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `
WITH th AS (
    INSERT INTO thread (tenant_id, thread_id, channel, contact)
    SELECT $1::text, 'keep-' || i, 'api', 'k-' || i FROM generate_series(1, $2::int) i
    RETURNING id, thread_id
), parent AS (
    INSERT INTO agent_execution (tenant_id, execution_id, workflow_id, version, status, thread_id, completed_at)
    SELECT $1::text, 'parent-' || th.thread_id, 'wf', '1', 'completed', th.id, now() - interval '30 days' FROM th
    RETURNING id, thread_id
), child AS (
    INSERT INTO agent_execution (tenant_id, execution_id, workflow_id, version, status, thread_id, parent_execution_id)
    SELECT $1::text, 'child-' || p.id, 'wf', '1', 'waiting', p.thread_id, p.id FROM parent p
), unsent AS (
    INSERT INTO agent_execution (tenant_id, execution_id, workflow_id, version, status, thread_id, completed_at)
    SELECT $1::text, 'unsent-' || th.thread_id, 'wf', '1', 'failed', th.id, now() - interval '30 days' FROM th
    RETURNING id, thread_id
), pending AS (
    INSERT INTO thread_message (tenant_id, thread_id, direction, execution_id, node_id, step_seq, body, status, delivery_seq)
    SELECT $1::text, u.thread_id, 'out', u.id, 'say', 1, 'hola', 'pending', nextval('thread_message_delivery_seq') FROM unsent u
)
INSERT INTO agent_execution (tenant_id, execution_id, workflow_id, version, status, thread_id, completed_at)
SELECT $1::text, 'holder-' || th.thread_id, 'wf', '1', 'cancelled', th.id, now() - interval '30 days' FROM th`, tenant, protected)
		require.NoError(t, err)
		// A statement does not see the rows its own WITH inserted: the
		// locks are recorded by a second one.
		_, err = pool.Exec(ctx, `UPDATE thread t SET active_execution_id = x.id, execution_locked_at = now()
			FROM agent_execution x WHERE x.tenant_id = $1 AND x.execution_id LIKE 'holder-%' AND t.id = x.thread_id`, tenant)
		require.NoError(t, err)
	}
}

// Sweeps running at once, in several processes' worth of goroutines,
// remove every expired row exactly once (their counts add up to what was
// there) and never a protected one.
func TestConcurrentSweepsRemoveEachRowOnce(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	tenants := []string{"a", "b", "c"}
	const n, events, protected = 600, 5, 40
	loadExpired(t, pool, tenants, n, events, protected)
	protectedRows := count(t, pool, `SELECT count(*) FROM agent_execution WHERE execution_id NOT LIKE 'old-%'`)
	require.Equal(t, len(tenants)*protected*4, protectedRows)

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total = map[string]int64{}
	)
	for range 4 {
		wg.Go(func() {
			s := retention.New(pool, retention.Config{Default: policy, Batch: 37})
			res, err := s.Sweep(context.Background())
			assert.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			for k, v := range res.Removed {
				total[k] += v
			}
		})
	}
	wg.Wait()
	all := int64(len(tenants) * n)
	require.Equal(t, map[string]int64{retention.TableExecutions: all, retention.TableEvents: all * events, retention.TableMessages: all}, total)
	require.Zero(t, count(t, pool, `SELECT count(*) FROM agent_execution WHERE execution_id LIKE 'old-%'`))
	require.Equal(t, protectedRows, count(t, pool, `SELECT count(*) FROM agent_execution`))
	require.Equal(t, len(tenants)*protected, count(t, pool, `SELECT count(*) FROM thread_message WHERE status = 'pending'`))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM execution_event`))
}

// Sweeps that remove every ended execution a millisecond after its end run
// the whole time parents start, trigger children that wait, end and have
// their messages delivered: no sweep fails, no parent of a live child is
// removed, and once the children end everything goes.
func TestSweepsAlongsideLiveFamilies(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, `{"workflow_id": "kid", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "wait"},
	  {"id": "wait", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "go"}, "next": "say"},
	  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "kid"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	b.define(t, `{"workflow_id": "parent", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "say"},
	  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "parent"}, "next": "spawn"},
	  {"id": "spawn", "type": "action", "actionType": "trigger_agent", "parameters": {"workflow_id": "kid", "waitForCompletion": false}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	brief := retention.Policy{Executions: time.Millisecond, Idempotency: time.Millisecond, Inbound: time.Millisecond}
	ctx, stop := context.WithCancel(context.Background())
	var (
		sweeps  sync.WaitGroup
		removed atomic.Int64
		errs    = make(chan error, 16)
	)
	for range 2 {
		sweeps.Go(func() {
			s := retention.New(b.pool, retention.Config{Default: brief, Batch: 5})
			for ctx.Err() == nil {
				res, err := s.Sweep(ctx)
				if err != nil && ctx.Err() == nil {
					errs <- err
					return
				}
				removed.Add(res.Removed[retention.TableExecutions])
				select { // leave the engine room between sweeps
				case <-ctx.Done():
				case <-time.After(2 * time.Millisecond):
				}
			}
		})
	}
	t.Cleanup(func() { stop(); sweeps.Wait() })

	const families = 12
	parents := make([]string, families)
	for i := range parents {
		parents[i] = b.start(t, engine.StartParams{WorkflowID: "parent", ThreadID: fmt.Sprintf("f%d", i)}).ExecutionID
	}
	kids := func() []string {
		rows, err := b.pool.Query(ctx, `SELECT execution_id FROM agent_execution WHERE tenant_id = $1 AND workflow_id = 'kid' AND status = 'waiting'`, b.tenant)
		require.NoError(t, err)
		var out []string
		for rows.Next() {
			var id string
			require.NoError(t, rows.Scan(&id))
			out = append(out, id)
		}
		require.NoError(t, rows.Err())
		return out
	}
	require.Eventually(t, func() bool { return len(kids()) == families }, 30*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return len(b.channel.Messages()) == families }, 30*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		return count(t, b.pool, `SELECT count(*) FROM agent_execution WHERE tenant_id = $1 AND workflow_id = 'parent' AND status = 'completed'`, b.tenant) == families
	}, 30*time.Second, 20*time.Millisecond)
	for _, id := range parents {
		require.True(t, b.exists(t, id), "parent %s of a waiting child was removed", id)
	}

	for i, kid := range kids() {
		_, err := b.engine.PublishEvent(ctx, engine.PublishEventParams{TenantID: b.tenant, EventType: engine.EventTypeEventCompleted,
			EventID: fmt.Sprintf("go-%d", i), ExecutionID: kid, Data: map[string]any{"event_id": "go"}})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		return count(t, b.pool, `SELECT count(*) FROM agent_execution WHERE tenant_id = $1`, b.tenant) == 0
	}, 30*time.Second, 20*time.Millisecond)
	select {
	case err := <-errs:
		t.Fatalf("a sweep failed: %v", err)
	default:
	}
	require.Len(t, b.channel.Messages(), 2*families, "every message was delivered before its sender went")
	// A sweep adds what it removed when it returns, after its last pass,
	// so the tally may trail the rows' going by a moment.
	require.Eventually(t, func() bool { return removed.Load() >= 2*families }, 30*time.Second, 5*time.Millisecond)
	require.EqualValues(t, 2*families, removed.Load())
	require.Zero(t, count(t, b.pool, `SELECT count(*) FROM execution_event`))
	require.Zero(t, count(t, b.pool, `SELECT count(*) FROM thread_message`))
	require.Zero(t, count(t, b.pool, `SELECT count(*) FROM inbound_event`))
}

// A sweep whose budget is spent stops and says more is left; the next one
// goes on.
func TestSweepStopsWhenItsBudgetIsSpent(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	loadExpired(t, pool, []string{"a"}, 10, 1, 0)
	res, err := retention.New(pool, retention.Config{Default: policy, Budget: time.Nanosecond}).Sweep(context.Background())
	require.NoError(t, err)
	require.True(t, res.More)
	require.Zero(t, res.Total())
	res, err = retention.New(pool, retention.Config{Default: policy, Batch: 3}).Sweep(context.Background())
	require.NoError(t, err)
	require.False(t, res.More)
	require.EqualValues(t, 10, res.Removed[retention.TableExecutions])
}
