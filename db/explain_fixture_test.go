package db_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgtest"
)

// The explain fixture: a month of history at about 0.4 executions a second,
// the scale at which a missing index shows as a Seq Scan or a costly plan.
// Most of it is ended work; the live set (what the monitoring views and the
// lane queries read) is the size a busy deployment holds at one time.
const (
	fixtureTenants    = 100
	fixtureExecutions = 1_000_000
	fixtureEvents     = 10 * fixtureExecutions
	fixtureThreads    = 200_000
)

// Each execution's status comes from its bucket of 100 consecutive ids,
// i / 100 % 1000, so that every status holds every tenant (tenant_id is
// 't' || i % 100): per thousand, 975 completed, 1 pending, 2 running, 10
// waiting, 10 failed, 1 timed out and 1 cancelled. That is 1,000 pending,
// 2,000 running and 10,000 waiting executions.
const fixtureStatus = `
CASE WHEN i / 100 % 1000 < 975 THEN 'completed' WHEN i / 100 % 1000 < 976 THEN 'pending'
     WHEN i / 100 % 1000 < 978 THEN 'running' WHEN i / 100 % 1000 < 988 THEN 'waiting'
     WHEN i / 100 % 1000 < 998 THEN 'failed' WHEN i / 100 % 1000 < 999 THEN 'timeout'
     ELSE 'cancelled' END::execution_status`

// fixtureLive is the number of live (pending, running, waiting) executions
// the fixture holds.
const fixtureLive = 13_000

// fixtureSteps build the fixture, one INSERT … SELECT generate_series per
// table; ids are given, so that the cases can name rows. Times spread over
// a month, newest last.
var fixtureSteps = []struct{ name, sql string }{
	{"workflow_definition", `
INSERT INTO workflow_definition (tenant_id, workflow_id, version, name, definition, created_at)
SELECT 't' || (i % 100), 'wf-' || (i / 100 % 50), '1.' || (i / 5000), 'wf', '{}',
       now() - (100000 - i) * interval '26 seconds'
FROM generate_series(0, 99999) i`},
	{"thread", `
INSERT INTO thread (id, tenant_id, thread_id, channel, contact, created_at, updated_at)
SELECT i, 't' || (i % 100), 'thread-' || i, 'api', 'thread-' || i,
       now() - (200000 - i) * interval '13 seconds', now() - (200000 - i) * interval '13 seconds'
FROM generate_series(1, 200000) i`},
	// Every tenth execution (after the first 100) is a child of the one 100
	// ids before, in the subagent lane; every fiftieth restarts one; every
	// fourth runs in its thread's session.
	{"agent_execution", `
INSERT INTO agent_execution (id, tenant_id, execution_id, workflow_id, version, status, lane, session_key, thread_id,
    parent_execution_id, can_inherit_lock, restarted_from, current_node_id, step_seq, waiting_for, waiting_until,
    created_at, updated_at, started_at, completed_at, queued_at)
SELECT i, 't' || (i % 100), 'exec-' || i, 'wf-' || (i / 100 % 50), '1.0', s.status,
       CASE WHEN i % 10 = 0 AND i > 100 THEN 'subagent' ELSE 'main' END,
       CASE WHEN i % 4 = 0 THEN 'session:thread-' || ((i - 1) % 200000 + 1) END,
       (i - 1) % 200000 + 1,
       CASE WHEN i % 10 = 0 AND i > 100 THEN i - 100 END, i % 20 = 0,
       CASE WHEN i % 50 = 1 AND i > 100 THEN i - 100 END,
       'start', i % 7,
       CASE WHEN s.status = 'waiting' THEN (ARRAY['response', 'event', 'agent', 'document', 'delay'])[i % 5 + 1] END,
       CASE WHEN s.status = 'waiting' THEN now() + (i % 97 - 48) * interval '1 hour' END,
       c.at, c.at + (i % 72) * interval '1 minute', c.at,
       CASE WHEN s.status NOT IN ('pending', 'running', 'waiting') THEN c.at + interval '3 seconds' END,
       c.at
FROM generate_series(1, 1000000) i,
     LATERAL (SELECT ` + fixtureStatus + ` AS status) s,
     LATERAL (SELECT now() - (1000000 - i) * interval '2.6 seconds' AS at) c`},
	// Ten events per execution, its ids consecutive, as a step writes them.
	{"execution_event", `
INSERT INTO execution_event (id, tenant_id, execution_id, action, message, node_id, payload, created_at)
SELECT g, 't' || (x % 100), x,
       (ARRAY['workflow.started', 'workflow.admitted', 'thread.lock_acquired', 'workflow.step_update',
              'thread.message_queued', 'thread.message_pending', 'thread.message_delivered', 'workflow.waiting',
              'workflow.resumed', 'workflow.completed'])[g % 10 + 1],
       'event', 'n' || (g % 10),
       CASE WHEN g % 10 = 4 THEN jsonb_build_object('message_id', x::text) ELSE '{}' END,
       now() - (1000000 - x) * interval '2.6 seconds'
FROM generate_series(1, 10000000) g, LATERAL (SELECT (g - 1) / 10 + 1 AS x) e`},
	{"execution_event sequence", `SELECT setval('execution_event_id_seq', 10000000)`},
	// One outbound message per execution: one in a thousand pending in the
	// outbox, one queued for the thread's lock, one dropped.
	{"thread_message out", `
INSERT INTO thread_message (tenant_id, thread_id, direction, execution_id, node_id, step_seq, body, status, delivery_seq,
    attempts, created_at, delivered_at)
SELECT 't' || (i % 100), (i - 1) % 200000 + 1, 'out', i, 'send', 1, 'hola',
       CASE WHEN i % 1000 = 0 THEN 'pending' WHEN i % 1000 = 1 THEN 'queued' WHEN i % 1000 = 2 THEN 'dropped'
            ELSE 'delivered' END,
       CASE WHEN i % 1000 = 0 THEN i END, 1,
       now() - (1000000 - i) * interval '2.6 seconds',
       CASE WHEN i % 1000 > 2 THEN now() - (1000000 - i) * interval '2.6 seconds' END
FROM generate_series(1, 1000000) i`},
	// Half a million inbound messages: consumed, but for 5 in a thousand
	// steered into a run, 5 received (queued for the session) and 5 dropped.
	{"thread_message in", `
INSERT INTO thread_message (tenant_id, thread_id, direction, execution_id, body, status, external_id, channel,
    queue_mode, backlog, created_at, consumed_at)
SELECT 't' || (i % 100), i % 200000 + 1, 'in', CASE WHEN i % 1000 >= 15 OR i % 1000 < 5 THEN i END, 'hi',
       CASE WHEN i % 1000 < 5 THEN 'steer' WHEN i % 1000 < 10 THEN 'received' WHEN i % 1000 < 15 THEN 'dropped'
            ELSE 'consumed' END,
       'm-' || i, 'api', 'followup', i % 1000 < 3,
       now() - (500000 - i) * interval '5.2 seconds',
       CASE WHEN i % 1000 >= 15 THEN now() - (500000 - i) * interval '5.2 seconds' END
FROM generate_series(1, 500000) i`},
	{"thread_message sequence", `SELECT setval('thread_message_delivery_seq', 1000000)`},
	// Inbound events (event_id replays), one in a hundred buffered for an
	// execution, half of those applied.
	{"inbound_event", `
INSERT INTO inbound_event (tenant_id, event_id, event_type, execution_id, thread_id, data, response, created_at,
    buffered_for, applied_at)
SELECT 't' || (i % 100), 'ev-' || i, 'payment.done', 'exec-' || (i * 2), 'thread-' || (i % 200000 + 1), '{}', '{}',
       now() - (500000 - i) * interval '5.2 seconds',
       CASE WHEN i % 100 = 0 THEN i * 2 END, CASE WHEN i % 100 = 0 AND i % 200 <> 0 THEN now() END
FROM generate_series(1, 500000) i`},
	{"idempotency_key", `
INSERT INTO idempotency_key (tenant_id, endpoint, message_id, status_code, response, created_at)
SELECT 't' || (i % 100), 'workflow.execute', 'msg-' || i, 200, '{}', now() - (1000000 - i) * interval '2.6 seconds'
FROM generate_series(1, 1000000) i`},
	// A session lane for every thread that ran a session, and two lanes of
	// their own for each of ten tenants.
	{"lane", `
INSERT INTO lane (tenant_id, name, max_concurrent)
SELECT 't' || (i % 100), 'session:thread-' || i, 1
FROM generate_series(4, 200000, 4) i
UNION ALL
SELECT 't' || i, 'own-' || j, 2 FROM generate_series(0, 9) i, generate_series(1, 2) j`},
	// A third of the threads of running and waiting executions are locked
	// by them.
	{"thread locks", `
UPDATE thread t SET active_execution_id = x.id, execution_locked_at = now() - (x.id % 30) * interval '1 minute'
FROM (SELECT DISTINCT ON (thread_id) id, thread_id FROM agent_execution
      WHERE status IN ('running', 'waiting') AND id % 3 = 0 ORDER BY thread_id, id) x
WHERE x.thread_id = t.id`},
	// River's jobs: the step jobs of the last day, which River's cleaner
	// keeps, one in 500 still waiting to run, running or scheduled.
	{"river_job", `
INSERT INTO river_job (state, attempt, attempted_at, created_at, finalized_at, scheduled_at, args, attempted_by, kind, queue)
SELECT (CASE WHEN i % 500 = 0 THEN 'available' WHEN i % 500 = 1 THEN 'running' WHEN i % 500 = 2 THEN 'scheduled'
             ELSE 'completed' END)::river_job_state,
       1, now(), now() - (200000 - i) * interval '0.4 seconds',
       CASE WHEN i % 500 > 2 THEN now() - (200000 - i) * interval '0.4 seconds' END,
       now() - (200000 - i) * interval '0.4 seconds' + CASE WHEN i % 500 = 2 THEN interval '1 hour' ELSE interval '0' END,
       jsonb_build_object('execution_id', 800000 + i), ARRAY['client-' || (i % 4)], 'execution.step', 'default'
FROM generate_series(1, 200000) i`},
}

// buildFixture creates a database and loads the fixture into it, then
// vacuums and analyzes it, as autovacuum would have by then. It logs how
// long each step took.
func buildFixture(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	start := time.Now()
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := setLoadSettings(ctx, tx); err != nil {
			return err
		}
		for _, s := range fixtureSteps {
			began := time.Now()
			if _, err := tx.Exec(ctx, s.sql); err != nil {
				return fmt.Errorf("loading %s: %w", s.name, err)
			}
			t.Logf("loaded %-24s in %s", s.name, time.Since(began).Round(time.Millisecond))
		}
		return nil
	}))
	loaded := time.Now()
	_, err := pool.Exec(ctx, "VACUUM (ANALYZE)")
	require.NoError(t, err)
	t.Logf("fixture loaded in %s, vacuumed and analyzed in %s",
		loaded.Sub(start).Round(time.Millisecond), time.Since(loaded).Round(time.Millisecond))
	return pool
}

// setLoadSettings makes the load transaction cheap: it does not wait for
// its commit to be flushed and, for a superuser, skips the foreign key
// checks and triggers, which take most of the load's time; the rows are
// consistent by construction.
func setLoadSettings(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
		return err
	}
	super, err := isSuperuser(ctx, tx)
	if err != nil || !super {
		return err
	}
	_, err = tx.Exec(ctx, "SET LOCAL session_replication_role = replica")
	return err
}

// querier is what isSuperuser needs of a connection or transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func isSuperuser(ctx context.Context, q querier) (bool, error) {
	var super bool
	err := q.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super)
	return super, err
}
