-- name: EventFence :one
-- The sequence's last value and, when it is over known, a transaction id
-- drawn after reading it (see migration 00003).
SELECT f.last_id::bigint AS last_id, f.bound AS bound
FROM execution_event_fence(@known::bigint) AS f;

-- name: EventWritersXmin :one
-- A transaction id no running event writer of this database is older than
-- (see migration 00019); it reads pg_locks only when some transaction on the
-- server is older than wanted.
SELECT execution_event_writers_xmin(@wanted::bigint)::bigint AS writers_xmin;

-- name: EventStreamRange :many
-- Stream events with ids in (after_id, up_to], oldest first, with what the
-- WebSocket message needs. Null filters do not filter.
SELECT e.id, e.tenant_id, e.action, e.node_id, e.payload, e.created_at,
       x.execution_id AS execution_key, x.workflow_id, x.correlation_id,
       t.thread_id AS thread_key
FROM execution_event e
JOIN agent_execution x ON x.id = e.execution_id
JOIN thread t ON t.id = x.thread_id
WHERE e.id > @after_id::bigint
  AND e.id <= @up_to::bigint
  AND e.action = ANY(@actions::text[])
  AND (sqlc.narg(tenant_id)::text IS NULL OR e.tenant_id = sqlc.narg(tenant_id)::text)
  AND (sqlc.narg(execution_key)::text IS NULL OR x.execution_id = sqlc.narg(execution_key)::text)
  AND (sqlc.narg(workflow_id)::text IS NULL OR x.workflow_id = sqlc.narg(workflow_id)::text)
  AND (sqlc.narg(thread_key)::text IS NULL OR t.thread_id = sqlc.narg(thread_key)::text)
ORDER BY e.id
LIMIT @max::integer;

-- name: EventSequenceLast :one
-- The event id sequence's last value, 0 before any id was drawn.
SELECT coalesce(pg_sequence_last_value('execution_event_id_seq'::regclass), 0)::bigint AS last_id;

-- name: EventSequenceRaise :exec
-- Moves the event id sequence up to known when it is behind, never down: the
-- next id drawn is then over known. The caller keeps event inserts out while
-- it runs (setval is not atomic with the check).
SELECT setval('execution_event_id_seq'::regclass, @known::bigint)
WHERE coalesce(pg_sequence_last_value('execution_event_id_seq'::regclass), 0) < @known::bigint;
