package scalefixture

// Each execution's status comes from its bucket of 100 consecutive ids,
// i / 100 % 1000, so that every status holds every tenant (tenant_id is
// 't' || i % tenants, for up to 100 tenants): per thousand, 975 completed,
// 1 pending, 2 running, 10 waiting, 10 failed, 1 timed out and 1
// cancelled. That is 1,000 pending, 2,000 running and 10,000 waiting
// executions. The executions of a thread share a bucket, so a status:
// thread ids repeat every 200,000 executions, buckets every 100,000.
const status = `
CASE WHEN i / 100 % 1000 < 975 THEN 'completed' WHEN i / 100 % 1000 < 976 THEN 'pending'
     WHEN i / 100 % 1000 < 978 THEN 'running' WHEN i / 100 % 1000 < 988 THEN 'waiting'
     WHEN i / 100 % 1000 < 998 THEN 'failed' WHEN i / 100 % 1000 < 999 THEN 'timeout'
     ELSE 'cancelled' END::execution_status`

// step is one statement of the load.
type step struct{ name, sql string }

// steps build the fixture, one INSERT … SELECT generate_series per table,
// in SQL where Build replaces {tenants} and the named rows' ids. Times
// spread over a month, newest last.
var steps = []step{
	// 50 workflows of 20 versions for each tenant. A definition names its
	// workflow and version but has no nodes: rows the size of a stored
	// definition with a few nodes (a few hundred bytes, stored in the row
	// itself) would spread a tenant's versions over as many pages, and
	// DefinitionListLatest, which reads every version of the tenant's
	// workflows, over its cost bound.
	{"workflow_definition", `
INSERT INTO workflow_definition (tenant_id, workflow_id, version, name, definition, created_at)
SELECT 't' || (i % {tenants}), w.id, w.version, 'Workflow ' || w.id,
       jsonb_build_object('workflow_id', w.id, 'name', 'Workflow ' || w.id, 'version', w.version),
       now() - ({tenants} * 1000 - i) * (interval '2600 seconds' / {tenants})
FROM generate_series(0, {tenants} * 1000 - 1) i,
     LATERAL (SELECT 'wf-' || (i / {tenants} % 50) AS id, '1.' || (i / ({tenants} * 50)) AS version) w`},
	{"thread", `
INSERT INTO thread (id, tenant_id, thread_id, channel, contact, created_at, updated_at)
SELECT i, 't' || (i % {tenants}), 'thread-' || i, 'api', 'thread-' || i,
       now() - (200000 - i) * interval '13 seconds', now() - (200000 - i) * interval '13 seconds'
FROM generate_series(1, 200000) i`},
	// Every tenth execution (after the first 100) is a child of the one 100
	// ids before, in the subagent lane; every fiftieth restarts one; every
	// fourth runs in its thread's session.
	{"agent_execution", `
INSERT INTO agent_execution (id, tenant_id, execution_id, workflow_id, version, status, lane, session_key, thread_id,
    parent_execution_id, can_inherit_lock, restarted_from, current_node_id, step_seq, waiting_for, waiting_until,
    created_at, updated_at, started_at, completed_at, queued_at)
SELECT i, 't' || (i % {tenants}), 'exec-' || i, 'wf-' || (i / 100 % 50), '1.0', s.status,
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
     LATERAL (SELECT ` + status + ` AS status) s,
     LATERAL (SELECT now() - (1000000 - i) * interval '2.6 seconds' AS at) c`},
	// Ten events per execution, its ids consecutive, as a step writes them.
	{"execution_event", `
INSERT INTO execution_event (id, tenant_id, execution_id, action, message, node_id, payload, created_at)
SELECT g, 't' || (x % {tenants}), x,
       (ARRAY['workflow.started', 'workflow.admitted', 'thread.lock_acquired', 'workflow.step_update',
              'thread.message_queued', 'thread.message_pending', 'thread.message_delivered', 'workflow.waiting',
              'workflow.resumed', 'workflow.completed'])[g % 10 + 1],
       'event', 'n' || (g % 10),
       CASE WHEN g % 10 = 4 THEN jsonb_build_object('message_id', x::text) ELSE '{}' END,
       now() - (1000000 - x) * interval '2.6 seconds'
FROM generate_series(1, 10000000) g, LATERAL (SELECT (g - 1) / 10 + 1 AS x) e`},
	// One outbound message per execution: one in a thousand pending in the
	// outbox, one queued for the thread's lock, one dropped. Their ids are
	// the executions'.
	{"thread_message out", `
INSERT INTO thread_message (id, tenant_id, thread_id, direction, execution_id, node_id, step_seq, body, status,
    delivery_seq, attempts, created_at, delivered_at)
SELECT i, 't' || (i % {tenants}), (i - 1) % 200000 + 1, 'out', i, 'send', 1, 'hola',
       CASE WHEN i % 1000 = 0 THEN 'pending' WHEN i % 1000 = 1 THEN 'queued' WHEN i % 1000 = 2 THEN 'dropped'
            ELSE 'delivered' END,
       CASE WHEN i % 1000 = 0 THEN i END, 1,
       now() - (1000000 - i) * interval '2.6 seconds',
       CASE WHEN i % 1000 > 2 THEN now() - (1000000 - i) * interval '2.6 seconds' END
FROM generate_series(1, 1000000) i`},
	// Half a million inbound messages, ids 1,000,001 on: consumed, but for
	// 5 in a thousand steered into a run, 5 received (queued for the
	// session) and 5 dropped.
	{"thread_message in", `
INSERT INTO thread_message (id, tenant_id, thread_id, direction, execution_id, body, status, external_id, channel,
    queue_mode, backlog, created_at, consumed_at)
SELECT 1000000 + i, 't' || (i % {tenants}), i % 200000 + 1, 'in', CASE WHEN i % 1000 >= 15 OR i % 1000 < 5 THEN i END, 'hi',
       CASE WHEN i % 1000 < 5 THEN 'steer' WHEN i % 1000 < 10 THEN 'received' WHEN i % 1000 < 15 THEN 'dropped'
            ELSE 'consumed' END,
       'm-' || i, 'api', 'followup', i % 1000 < 3,
       now() - (500000 - i) * interval '5.2 seconds',
       CASE WHEN i % 1000 >= 15 THEN now() - (500000 - i) * interval '5.2 seconds' END
FROM generate_series(1, 500000) i`},
	// The busy thread's conversation: turn k is an inbound message its
	// execution took (resumed by it, or queued for it one time in ten) and
	// the reply, delivered at once or, one time in ten, after waiting for
	// the thread's lock.
	{"busy thread messages", `
INSERT INTO thread_message (id, tenant_id, thread_id, direction, execution_id, node_id, step_seq, body, status,
    external_id, channel, queue_mode, outcome, attempts, created_at, delivered_at, consumed_at)
SELECT {busy_first_message} + 2 * (k - 1) + d, t.tenant_id, t.id, CASE d WHEN 0 THEN 'in' ELSE 'out' END, x.id,
       CASE d WHEN 1 THEN 'reply' END, CASE d WHEN 1 THEN k END,
       CASE d WHEN 0 THEN 'question ' || k ELSE 'answer ' || k END,
       CASE d WHEN 0 THEN 'consumed' ELSE 'delivered' END,
       CASE d WHEN 0 THEN 'busy-' || k END, CASE d WHEN 0 THEN 'api' END, CASE d WHEN 0 THEN 'followup' END,
       CASE WHEN d = 0 AND k % 10 = 5 THEN 'queued' WHEN d = 0 THEN 'resumed' END, d,
       c.at + d * interval '2 seconds',
       CASE WHEN d = 1 AND k % 10 = 0 THEN c.at + interval '40 seconds' WHEN d = 1 THEN c.at + interval '3 seconds' END,
       CASE WHEN d = 0 AND k % 10 = 5 THEN c.at + interval '20 seconds' WHEN d = 0 THEN c.at + interval '1 second' END
FROM thread t, generate_series(1, {busy_turns}) k, generate_series(0, 1) d,
     LATERAL (SELECT t.id + 200000 * ((k - 1) * 5 / {busy_turns}) AS id) x,
     LATERAL (SELECT now() - ({busy_turns} - k) * interval '40 minutes' AS at) c
WHERE t.id = {busy_thread}`},
	{"thread_message sequences", `
SELECT setval(pg_get_serial_sequence('thread_message', 'id'), {busy_first_message} + 2 * {busy_turns}),
       setval('thread_message_delivery_seq', 1000000)`},
	// Five events a turn of the busy thread's conversation, as its
	// execution logged them: resumed, a step, the reply accepted (or
	// queued), delivered, waiting again.
	{"busy thread events", `
INSERT INTO execution_event (id, tenant_id, execution_id, action, message, node_id, payload, created_at)
SELECT 10000000 + 5 * (k - 1) + e, t.tenant_id, t.id + 200000 * ((k - 1) * 5 / {busy_turns}),
       (ARRAY['workflow.resumed', 'workflow.step_update',
              CASE WHEN k % 10 = 0 THEN 'thread.message_queued' ELSE 'thread.message_pending' END,
              'thread.message_delivered', 'workflow.waiting'])[e],
       'event', CASE WHEN e IN (3, 4) THEN 'reply' ELSE 'wait' END,
       CASE WHEN e IN (3, 4) THEN jsonb_build_object('message_id', ({busy_first_message} + 2 * k - 1)::text,
                                                     'thread_id', t.thread_id)
            ELSE '{}' END,
       now() - ({busy_turns} - k) * interval '40 minutes' + e * interval '1 second'
FROM thread t, generate_series(1, {busy_turns}) k, generate_series(1, 5) e
WHERE t.id = {busy_thread}`},
	{"execution_event sequence", `SELECT setval('execution_event_id_seq', 10000000 + 5 * {busy_turns})`},
	// Inbound events (event_id replays), one in a hundred buffered for an
	// execution, half of those applied.
	{"inbound_event", `
INSERT INTO inbound_event (tenant_id, event_id, event_type, execution_id, thread_id, data, response, created_at,
    buffered_for, applied_at)
SELECT 't' || (i % {tenants}), 'ev-' || i, 'payment.done', 'exec-' || (i * 2), 'thread-' || (i % 200000 + 1), '{}', '{}',
       now() - (500000 - i) * interval '5.2 seconds',
       CASE WHEN i % 100 = 0 THEN i * 2 END, CASE WHEN i % 100 = 0 AND i % 200 <> 0 THEN now() END
FROM generate_series(1, 500000) i`},
	{"idempotency_key", `
INSERT INTO idempotency_key (tenant_id, endpoint, message_id, status_code, response, created_at)
SELECT 't' || (i % {tenants}), 'workflow.execute', 'msg-' || i, 200, '{}', now() - (1000000 - i) * interval '2.6 seconds'
FROM generate_series(1, 1000000) i`},
	// A session lane for every thread that ran a session, and two lanes of
	// their own for each of ten tenants.
	{"lane", `
INSERT INTO lane (tenant_id, name, max_concurrent)
SELECT 't' || (i % {tenants}), 'session:thread-' || i, 1
FROM generate_series(4, 200000, 4) i
UNION ALL
SELECT 't' || i, 'own-' || j, 2 FROM generate_series(0, least(9, {tenants} - 1)) i, generate_series(1, 2) j`},
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
	// The jobs execution's own: a step job a turn and, every eighth, the
	// timeout of a wait, over its last 20 hours.
	{"river_job of an execution", `
INSERT INTO river_job (state, attempt, attempted_at, created_at, finalized_at, scheduled_at, args, attempted_by, kind, queue)
SELECT 'completed', 1, c.at, c.at, c.at + interval '1 second', c.at,
       CASE WHEN j % 8 = 0 THEN jsonb_build_object('execution_id', {jobs_execution}, 'wait_seq', j / 8)
            ELSE jsonb_build_object('execution_id', {jobs_execution}, 'step_seq', j) END,
       ARRAY['client-' || (j % 4)], CASE WHEN j % 8 = 0 THEN 'execution.wait_timeout' ELSE 'execution.step' END, 'default'
FROM generate_series(1, 40) j, LATERAL (SELECT now() - (40 - j) * interval '30 minutes' AS at) c`},
	// Console sessions: 100,000 sign-ins over the last day, those of its
	// first half expired, one in ten signed out.
	{"console_session", `
INSERT INTO console_session (id, tenant_id, subject, scopes, csrf, created_at, expires_at, revoked_at)
SELECT sha256(int8send(i)), 't' || (i % {tenants}), 'user-' || (i % 1000), '{workflows:read}', 'csrf-' || i,
       now() - (100000 - i) * interval '0.864 seconds', now() - (100000 - i) * interval '0.864 seconds' + interval '12 hours',
       CASE WHEN i % 10 = 0 THEN now() - (100000 - i) * interval '0.864 seconds' + interval '1 hour' END
FROM generate_series(1, 100000) i`},
	// Operator sessions: 2,000 River UI sign-ins over the last day, those
	// of its first half expired, one in ten signed out.
	{"operator_session", `
INSERT INTO operator_session (id, subject, created_at, expires_at, revoked_at)
SELECT sha256(int8send(i)), 'ops-' || (i % 20),
       now() - (2000 - i) * interval '43.2 seconds', now() - (2000 - i) * interval '43.2 seconds' + interval '12 hours',
       CASE WHEN i % 10 = 0 THEN now() - (2000 - i) * interval '43.2 seconds' + interval '1 hour' END
FROM generate_series(1, 2000) i`},
}
