-- Retention (package retention). Each query is one batch of the periodic
-- retention.sweep job, in a statement of its own: it takes up to @batch
-- expired rows with FOR UPDATE SKIP LOCKED (rows another sweep holds are
-- left to it) and removes them, so batches are short transactions and any
-- number of sweeps may run at once. @keep_ms is how long a tenant's rows
-- are kept, in milliseconds, and @keep_ms_by_tenant ({"tenant": ms}) the
-- tenants that keep theirs for another time; 0 keeps them forever. The
-- tenants with candidate rows are found with a skip scan (one index probe
-- per tenant), then each tenant's rows oldest first.

-- name: RetentionSweepExecutions :one
-- Removes ended executions past retention with their event log, their
-- messages (outbound, and the inbound ones they consumed), and the
-- reference of events buffered for them. Never an execution that anything
-- still needs: one that another execution refers to (a child, whatever
-- its state, a restart, or a lock inherited from it: children go first,
-- their parent in a later batch), one holding or recorded as holding a
-- thread lock, one with a message not yet delivered (queued or pending
-- outbound, or inbound still steered to it), or one whose result callback
-- is still being delivered. A live execution is not ended, so its parent
-- chain is kept with it. The implicit thread an execution started without
-- a thread_id got ("implicit:<execution_id>") goes with it when nothing
-- else uses it: no lock, no other execution, no other message.
WITH RECURSIVE tenants (tenant_id) AS (
    (SELECT x.tenant_id FROM agent_execution x
     WHERE x.status IN ('completed', 'failed', 'timeout', 'cancelled')
     ORDER BY x.tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT x.tenant_id FROM agent_execution x
            WHERE x.status IN ('completed', 'failed', 'timeout', 'cancelled') AND x.tenant_id > t.tenant_id
            ORDER BY x.tenant_id LIMIT 1)
    FROM tenants t
    WHERE t.tenant_id IS NOT NULL
),
policy AS (
    SELECT t.tenant_id, coalesce((@keep_ms_by_tenant::jsonb ->> t.tenant_id)::bigint, @keep_ms::bigint) AS keep_ms
    FROM tenants t
    WHERE t.tenant_id IS NOT NULL
),
doomed AS MATERIALIZED (
    SELECT c.id
    FROM policy p
    CROSS JOIN LATERAL (
        SELECT x.id FROM agent_execution x
        WHERE x.tenant_id = p.tenant_id
          AND x.status IN ('completed', 'failed', 'timeout', 'cancelled')
          AND x.completed_at < now() - p.keep_ms * interval '1 millisecond'
          AND NOT EXISTS (SELECT 1 FROM agent_execution c WHERE c.parent_execution_id = x.id)
          AND NOT EXISTS (SELECT 1 FROM agent_execution c WHERE c.restarted_from = x.id)
          AND NOT EXISTS (SELECT 1 FROM agent_execution c WHERE c.lock_inherited_from = x.id)
          AND NOT EXISTS (SELECT 1 FROM thread_message m
                          WHERE m.execution_id = x.id AND m.status IN ('queued', 'pending', 'received', 'steer'))
          AND x.id NOT IN (SELECT t.active_execution_id FROM thread t WHERE t.active_execution_id IS NOT NULL)
          AND x.id NOT IN (SELECT (j.args ->> 'execution_id')::bigint FROM river_job j
                           WHERE j.kind = 'workflow.callback'
                             AND j.state IN ('available', 'pending', 'retryable', 'running', 'scheduled'))
        ORDER BY x.completed_at
        LIMIT @batch::integer
        FOR UPDATE OF x SKIP LOCKED
    ) c
    WHERE p.keep_ms > 0
    LIMIT @batch::integer
),
unbuffered AS (
    UPDATE inbound_event e SET buffered_for = NULL
    WHERE e.buffered_for = ANY(ARRAY(SELECT d.id FROM doomed d))
),
events AS (
    DELETE FROM execution_event e WHERE e.execution_id = ANY(ARRAY(SELECT d.id FROM doomed d))
    RETURNING 1
),
messages AS (
    DELETE FROM thread_message m WHERE m.execution_id = ANY(ARRAY(SELECT d.id FROM doomed d))
    RETURNING 1
),
executions AS (
    DELETE FROM agent_execution x WHERE x.id = ANY(ARRAY(SELECT d.id FROM doomed d))
    RETURNING x.thread_id
),
threads AS (
    DELETE FROM thread t
    WHERE t.id IN (SELECT e.thread_id FROM executions e)
      AND t.thread_id LIKE 'implicit:%'
      AND t.active_execution_id IS NULL
      AND NOT EXISTS (SELECT 1 FROM agent_execution o
                      WHERE o.thread_id = t.id AND o.id <> ALL(ARRAY(SELECT d.id FROM doomed d)))
      AND NOT EXISTS (SELECT 1 FROM thread_message m
                      WHERE m.thread_id = t.id
                        AND (m.execution_id IS NULL OR m.execution_id <> ALL(ARRAY(SELECT d.id FROM doomed d))))
    RETURNING 1
)
SELECT (SELECT count(*) FROM executions)::bigint AS executions,
       (SELECT count(*) FROM events)::bigint AS events,
       (SELECT count(*) FROM messages)::bigint AS messages,
       (SELECT count(*) FROM threads)::bigint AS threads;

-- name: RetentionSweepIdempotencyKeys :execrows
-- Forgets request message_ids past the replay window: a request repeated
-- after it is a new request.
WITH RECURSIVE tenants (tenant_id) AS (
    (SELECT k.tenant_id FROM idempotency_key k ORDER BY k.tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT k.tenant_id FROM idempotency_key k WHERE k.tenant_id > t.tenant_id ORDER BY k.tenant_id LIMIT 1)
    FROM tenants t
    WHERE t.tenant_id IS NOT NULL
),
policy AS (
    SELECT t.tenant_id, coalesce((@keep_ms_by_tenant::jsonb ->> t.tenant_id)::bigint, @keep_ms::bigint) AS keep_ms
    FROM tenants t
    WHERE t.tenant_id IS NOT NULL
),
doomed AS MATERIALIZED (
    SELECT c.tenant_id, c.endpoint, c.message_id
    FROM policy p
    CROSS JOIN LATERAL (
        SELECT k.tenant_id, k.endpoint, k.message_id FROM idempotency_key k
        WHERE k.tenant_id = p.tenant_id
          AND k.created_at < now() - p.keep_ms * interval '1 millisecond'
        ORDER BY k.created_at
        LIMIT @batch::integer
        FOR UPDATE SKIP LOCKED
    ) c
    WHERE p.keep_ms > 0
    LIMIT @batch::integer
)
DELETE FROM idempotency_key k USING doomed d
WHERE k.tenant_id = d.tenant_id AND k.endpoint = d.endpoint AND k.message_id = d.message_id;

-- name: RetentionSweepInboundEvents :execrows
-- Forgets event_ids past the replay window, with the event: a row is the
-- record of an event_id (its answer) and, while buffered for a live
-- execution that has not taken it yet, the event itself, which stays.
WITH RECURSIVE tenants (tenant_id) AS (
    (SELECT e.tenant_id FROM inbound_event e ORDER BY e.tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT e.tenant_id FROM inbound_event e WHERE e.tenant_id > t.tenant_id ORDER BY e.tenant_id LIMIT 1)
    FROM tenants t
    WHERE t.tenant_id IS NOT NULL
),
policy AS (
    SELECT t.tenant_id, coalesce((@keep_ms_by_tenant::jsonb ->> t.tenant_id)::bigint, @keep_ms::bigint) AS keep_ms
    FROM tenants t
    WHERE t.tenant_id IS NOT NULL
),
doomed AS MATERIALIZED (
    SELECT c.tenant_id, c.event_id
    FROM policy p
    CROSS JOIN LATERAL (
        SELECT e.tenant_id, e.event_id FROM inbound_event e
        WHERE e.tenant_id = p.tenant_id
          AND e.created_at < now() - p.keep_ms * interval '1 millisecond'
          AND (e.buffered_for IS NULL OR e.applied_at IS NOT NULL
               OR NOT EXISTS (SELECT 1 FROM agent_execution x
                              WHERE x.id = e.buffered_for AND x.status IN ('pending', 'running', 'waiting')))
        ORDER BY e.created_at
        LIMIT @batch::integer
        FOR UPDATE SKIP LOCKED
    ) c
    WHERE p.keep_ms > 0
    LIMIT @batch::integer
)
DELETE FROM inbound_event e USING doomed d
WHERE e.tenant_id = d.tenant_id AND e.event_id = d.event_id;

-- name: RetentionForgetInboundMessageIDs :execrows
-- Forgets the message_id of settled inbound messages (handed to a run,
-- dropped, or a /queue command) past the replay window: the message stays
-- as long as its execution or the inbound retention keeps it, and the same
-- message_id sent again is a new message. A message still queued keeps its
-- message_id until a run takes it.
WITH RECURSIVE tenants (tenant_id) AS (
    (SELECT m.tenant_id FROM thread_message m
     WHERE m.direction = 'in' AND m.external_id IS NOT NULL AND m.status IN ('consumed', 'dropped', 'command')
     ORDER BY m.tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT m.tenant_id FROM thread_message m
            WHERE m.direction = 'in' AND m.external_id IS NOT NULL AND m.status IN ('consumed', 'dropped', 'command')
              AND m.tenant_id > t.tenant_id
            ORDER BY m.tenant_id LIMIT 1)
    FROM tenants t
    WHERE t.tenant_id IS NOT NULL
),
policy AS (
    SELECT t.tenant_id, coalesce((@keep_ms_by_tenant::jsonb ->> t.tenant_id)::bigint, @keep_ms::bigint) AS keep_ms
    FROM tenants t
    WHERE t.tenant_id IS NOT NULL
),
doomed AS MATERIALIZED (
    SELECT c.id
    FROM policy p
    CROSS JOIN LATERAL (
        SELECT m.id FROM thread_message m
        WHERE m.tenant_id = p.tenant_id
          AND m.direction = 'in' AND m.external_id IS NOT NULL AND m.status IN ('consumed', 'dropped', 'command')
          AND m.created_at < now() - p.keep_ms * interval '1 millisecond'
        ORDER BY m.created_at
        LIMIT @batch::integer
        FOR UPDATE SKIP LOCKED
    ) c
    WHERE p.keep_ms > 0
    LIMIT @batch::integer
)
UPDATE thread_message m SET external_id = NULL
WHERE m.id = ANY(ARRAY(SELECT d.id FROM doomed d));

-- name: RetentionSweepInboundMessages :execrows
-- Removes settled inbound messages that no execution owns (dropped, or a
-- /queue command) past retention. Messages still queued for a run, and
-- the ones an execution consumed (removed with it), are not touched.
WITH RECURSIVE tenants (tenant_id) AS (
    (SELECT m.tenant_id FROM thread_message m
     WHERE m.direction = 'in' AND m.execution_id IS NULL AND m.status IN ('consumed', 'dropped', 'command')
     ORDER BY m.tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT m.tenant_id FROM thread_message m
            WHERE m.direction = 'in' AND m.execution_id IS NULL AND m.status IN ('consumed', 'dropped', 'command')
              AND m.tenant_id > t.tenant_id
            ORDER BY m.tenant_id LIMIT 1)
    FROM tenants t
    WHERE t.tenant_id IS NOT NULL
),
policy AS (
    SELECT t.tenant_id, coalesce((@keep_ms_by_tenant::jsonb ->> t.tenant_id)::bigint, @keep_ms::bigint) AS keep_ms
    FROM tenants t
    WHERE t.tenant_id IS NOT NULL
),
doomed AS MATERIALIZED (
    SELECT c.id
    FROM policy p
    CROSS JOIN LATERAL (
        SELECT m.id FROM thread_message m
        WHERE m.tenant_id = p.tenant_id
          AND m.direction = 'in' AND m.execution_id IS NULL AND m.status IN ('consumed', 'dropped', 'command')
          AND m.created_at < now() - p.keep_ms * interval '1 millisecond'
        ORDER BY m.created_at
        LIMIT @batch::integer
        FOR UPDATE SKIP LOCKED
    ) c
    WHERE p.keep_ms > 0
    LIMIT @batch::integer
)
DELETE FROM thread_message m
WHERE m.id = ANY(ARRAY(SELECT d.id FROM doomed d));
