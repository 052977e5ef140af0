-- name: ThreadInsertIfAbsent :one
-- Creates the thread named thread_id on first use; no row when it exists.
-- Without a conflict target, two first uses at once wait for each other
-- whichever unique key (thread id, or channel and contact) they meet first,
-- instead of one failing on the key that is not the target.
INSERT INTO thread (tenant_id, thread_id, channel, contact)
VALUES (@tenant_id::text, @thread_id::text, @channel::text, @contact::text)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: ThreadInsertNew :exec
-- Creates a thread no one can have named yet under an id ExecutionReserve
-- drew (@draw_thread); a conflict is an error, not a no-op.
INSERT INTO thread (id, tenant_id, thread_id, channel, contact)
VALUES (@id::bigint, @tenant_id::text, @thread_id::text, @channel::text, @contact::text);

-- name: ThreadLockByThreadID :one
SELECT * FROM thread WHERE tenant_id = @tenant_id::text AND thread_id = @thread_id::text FOR UPDATE;

-- name: ThreadGetByID :one
SELECT * FROM thread WHERE id = @id::bigint;

-- name: ThreadLock :one
SELECT * FROM thread WHERE id = @id::bigint FOR UPDATE;

-- name: ThreadTryLock :one
-- Takes a thread row if no other transaction holds it; no row means it is
-- held. For transactions that already hold an execution row.
SELECT * FROM thread WHERE id = @id::bigint FOR UPDATE SKIP LOCKED;

-- name: ThreadGetByThreadID :one
SELECT * FROM thread WHERE tenant_id = @tenant_id::text AND thread_id = @thread_id::text;

-- name: ThreadInsertByContact :one
-- Creates the thread of a (channel, contact); no row when that contact, or
-- the thread id, already has a thread. Without a conflict target, two
-- creations at once wait for each other whichever unique key they meet
-- first, instead of one failing on the key that is not the target.
INSERT INTO thread (tenant_id, thread_id, channel, contact, default_workflow_id)
VALUES (@tenant_id::text, @thread_id::text, @channel::text, @contact::text, sqlc.narg('default_workflow_id')::text)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: ThreadUpdateByContact :one
-- Updates the default workflow of the thread of a (channel, contact); no row
-- when the contact has no thread, or when @thread_id is given and is not
-- the contact's thread's id.
UPDATE thread
SET default_workflow_id = coalesce(sqlc.narg('default_workflow_id')::text, default_workflow_id),
    updated_at = now()
WHERE tenant_id = @tenant_id::text AND channel = @channel::text AND contact = @contact::text
  AND (sqlc.narg('thread_id')::text IS NULL OR thread_id = sqlc.narg('thread_id')::text)
RETURNING *;

-- name: ThreadIDByContact :one
SELECT thread_id FROM thread
WHERE tenant_id = @tenant_id::text AND channel = @channel::text AND contact = @contact::text;

-- name: ThreadSetLock :exec
UPDATE thread
SET active_execution_id = @execution_id::bigint,
    execution_locked_at = now(),
    updated_at = now()
WHERE id = @id::bigint;

-- name: ThreadClearLock :exec
UPDATE thread
SET active_execution_id = NULL,
    execution_locked_at = NULL,
    updated_at = now()
WHERE id = @id::bigint;

-- name: ThreadArmDrain :one
-- Marks a drain as enqueued; no row means one already is.
UPDATE thread
SET drain_pending = true,
    drain_pending_since = now(),
    drain_requested = false
WHERE id = @id::bigint
  AND NOT drain_pending
RETURNING id;

-- name: ThreadDisarmDrain :exec
UPDATE thread
SET drain_pending = false,
    drain_pending_since = NULL
WHERE id = @id::bigint;

-- name: ThreadListNeedingDrain :many
-- Threads flagged by cleanup_stale_locks(), and threads whose drain job has
-- been pending for too long (its job was lost): the lock reaper drains them.
SELECT id
FROM thread
WHERE drain_requested
   OR (drain_pending AND drain_pending_since < now() - make_interval(secs => @rearm_after_seconds::double precision))
ORDER BY id
LIMIT @max::integer
FOR UPDATE SKIP LOCKED;

-- name: ThreadForceRearmDrain :exec
UPDATE thread
SET drain_pending = true,
    drain_pending_since = now(),
    drain_requested = false
WHERE id = @id::bigint;

-- name: ThreadCleanupStaleLocks :many
SELECT s.tenant_id::text AS tenant_id, s.thread_id::text AS thread_id
FROM cleanup_stale_locks(make_interval(secs => @lock_timeout_seconds::double precision)) s;

-- name: ThreadCleanupStaleLocksByTenant :many
-- clear_stale_locks() for one tenant (POST /monitor/locks/cleanup): its
-- stale and orphan locks are cleared and their threads flagged for a drain;
-- other tenants' locks are left alone.
SELECT c.id::bigint AS id, c.thread_id::text AS thread_id
FROM clear_stale_locks(make_interval(secs => @lock_timeout_seconds::double precision), @tenant_id::text) c;

-- name: ActiveLockList :many
-- A page of the tenant's held locks, oldest first: the key (locked at,
-- thread id) is unique, so a page continues after its last row's key
-- (@after_locked_at NULL: the first page).
SELECT *
FROM monitor_active_locks
WHERE tenant_id = @tenant_id::text
  AND (NOT @stale_only::boolean OR execution_locked_at < now() - make_interval(secs => @lock_timeout_seconds::double precision))
  AND (sqlc.narg('after_locked_at')::timestamptz IS NULL
       OR (execution_locked_at, thread_id) > (sqlc.narg('after_locked_at')::timestamptz, @after_thread_id::text))
ORDER BY execution_locked_at, thread_id
LIMIT @max::integer;

-- name: ThreadSetQueueSettings :exec
UPDATE thread SET queue_settings = @queue_settings::jsonb, updated_at = now() WHERE id = @id::bigint;

-- name: ThreadViewByThreadID :one
SELECT sqlc.embed(t), x.execution_id AS holder_key,
       (SELECT count(*) FROM thread_message m WHERE m.thread_id = t.id AND m.status = 'queued')::integer AS queued_count
FROM thread t
LEFT JOIN agent_execution x ON x.id = t.active_execution_id
WHERE t.tenant_id = @tenant_id::text AND t.thread_id = @thread_id::text;

-- name: ThreadTakeFreeLock :one
-- Makes @execution_id the holder of a free lock when no message waits in
-- the thread's queue (the common case, in one statement); no row means
-- messages are queued and the caller decides the slow way. The caller holds
-- the thread row and has seen the lock free.
UPDATE thread
SET active_execution_id = @execution_id::bigint,
    execution_locked_at = now(),
    updated_at = now()
WHERE id = @id::bigint
  AND active_execution_id IS NULL
  AND NOT EXISTS (SELECT 1 FROM thread_message m WHERE m.thread_id = @id::bigint AND m.status = 'queued')
RETURNING id;

-- name: ThreadReleaseLock :one
-- Frees the lock and says how many messages wait in the thread's queue
-- (for the drain), in one statement.
UPDATE thread
SET active_execution_id = NULL,
    execution_locked_at = NULL,
    updated_at = now()
WHERE id = @id::bigint
RETURNING (SELECT count(*) FROM thread_message m WHERE m.thread_id = @id::bigint AND m.status = 'queued')::integer AS queued;
