-- name: InboundGetByExternalID :one
SELECT m.*, x.execution_id AS execution_key
FROM thread_message m
LEFT JOIN agent_execution x ON x.id = m.execution_id
WHERE m.thread_id = @thread_id::bigint AND m.direction = 'in' AND m.external_id = @external_id::text;

-- name: InboundInsert :one
INSERT INTO thread_message (tenant_id, thread_id, direction, execution_id, body, status, external_id, channel,
                            queue_mode, backlog, summary, dropped_count, outcome, consumed_at)
VALUES (@tenant_id::text, @thread_id::bigint, 'in', sqlc.narg('execution_id')::bigint, @body::text, @status::text,
        @external_id::text, @channel::text, sqlc.narg('queue_mode')::text, @backlog::boolean, @summary::boolean,
        @dropped_count::integer, @outcome::text,
        CASE WHEN @status::text = 'consumed' THEN now() END)
RETURNING *;

-- name: InboundListReceived :many
-- The session's queue: inbound messages waiting for a later run, the
-- overflow summary first, then in arrival order.
SELECT * FROM thread_message
WHERE thread_id = @thread_id::bigint AND direction = 'in' AND status = 'received'
ORDER BY summary DESC, id;

-- name: InboundCountReceived :one
SELECT count(*)::integer FROM thread_message
WHERE thread_id = @thread_id::bigint AND direction = 'in' AND status = 'received' AND NOT summary;

-- name: InboundDropOldest :one
UPDATE thread_message SET status = 'dropped'
WHERE id = (SELECT id FROM thread_message
            WHERE thread_id = @thread_id::bigint AND direction = 'in' AND status = 'received' AND NOT summary
            ORDER BY id LIMIT 1)
RETURNING *;

-- name: InboundSummaryRow :one
SELECT * FROM thread_message
WHERE thread_id = @thread_id::bigint AND direction = 'in' AND status = 'received' AND summary;

-- name: InboundUpdateSummary :exec
UPDATE thread_message SET body = @body::text, dropped_count = @dropped_count::integer WHERE id = @id::bigint;

-- name: InboundConsume :exec
UPDATE thread_message SET status = 'consumed', execution_id = @execution_id::bigint, consumed_at = now()
WHERE id = ANY(@ids::bigint[]);

-- name: InboundTakeSteered :many
-- Hands the messages steered into an execution to it: plain steers are
-- consumed; steer-backlog ones go back to the session's queue as followups.
UPDATE thread_message
SET status = CASE WHEN backlog THEN 'received' ELSE 'consumed' END,
    queue_mode = CASE WHEN backlog THEN 'followup' ELSE queue_mode END,
    consumed_at = now()
WHERE execution_id = @execution_id::bigint AND direction = 'in' AND status = 'steer'
RETURNING *;

-- name: InboundRevertSteered :execrows
-- Messages steered into a run that ended or stopped before taking them
-- become followups.
UPDATE thread_message
SET status = 'received', queue_mode = 'followup', execution_id = NULL
WHERE execution_id = @execution_id::bigint AND direction = 'in' AND status = 'steer';

-- name: InboundLastReceivedAt :one
-- When the thread's last queued message arrived, and when this transaction
-- began (now(), which a run it starts gets as created_at): a flush compares
-- the two on the database's clock, never a process's.
SELECT coalesce(max(created_at), '-infinity'::timestamptz)::timestamptz AS last_at, now()::timestamptz AS now_at
FROM thread_message
WHERE thread_id = @thread_id::bigint AND direction = 'in' AND status = 'received';

-- name: SessionActiveRun :one
-- The session's active run: pending or running (waiting holds no slot).
SELECT * FROM agent_execution
WHERE tenant_id = @tenant_id::text AND session_key = @session_key::text AND status IN ('pending', 'running')
ORDER BY id LIMIT 1;

-- name: ExecutionAppendHistory :exec
-- Appends to conversation_history and keeps its newest @max_entries
-- entries (limits.historyEntries); older ones are dropped.
UPDATE agent_execution
SET conversation_history = (
        SELECT coalesce(jsonb_agg(h.entry ORDER BY h.n), '[]'::jsonb)
        FROM jsonb_array_elements(conversation_history || @entries::jsonb) WITH ORDINALITY AS h (entry, n)
        WHERE h.n > jsonb_array_length(conversation_history || @entries::jsonb) - @max_entries::int
    ),
    variables = @variables::jsonb,
    updated_at = clock_timestamp()
WHERE id = @id::bigint;

-- name: SessionArmFlush :one
UPDATE lane SET flush_pending = true, flush_at = @flush_at::timestamptz
WHERE tenant_id = @tenant_id::text AND name = @name::text AND NOT flush_pending
RETURNING name;

-- name: SessionDisarmFlush :exec
UPDATE lane SET flush_pending = false, flush_at = NULL
WHERE tenant_id = @tenant_id::text AND name = @name::text;

-- name: SessionListNeedingFlush :many
-- Idle sessions with queued inbound messages and no flush armed (or one
-- armed long ago whose job was lost).
SELECT DISTINCT t.tenant_id, t.thread_id
FROM thread_message m
JOIN thread t ON t.id = m.thread_id
LEFT JOIN lane l ON l.tenant_id = t.tenant_id AND l.name = 'session:' || t.thread_id
WHERE m.direction = 'in' AND m.status = 'received'
  AND m.created_at < now() - interval '2 seconds'
  AND (l.name IS NULL OR NOT l.flush_pending OR l.flush_at < now() - interval '60 seconds')
  AND NOT EXISTS (SELECT 1 FROM agent_execution x WHERE x.tenant_id = t.tenant_id
                  AND x.session_key = 'session:' || t.thread_id AND x.status IN ('pending', 'running'))
LIMIT 100;
