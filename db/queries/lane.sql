-- name: LaneSetLimit :exec
-- Stores the configured limit of a lane whose row the caller holds.
UPDATE lane SET max_concurrent = @max_concurrent::integer, updated_at = now()
WHERE tenant_id = @tenant_id::text AND name = @name::text;

-- name: LaneEnsure :exec
-- Creates a lane row on first use with its default limit.
INSERT INTO lane (tenant_id, name, max_concurrent)
VALUES (@tenant_id::text, @name::text, @max_concurrent::integer)
ON CONFLICT (tenant_id, name) DO NOTHING;

-- name: LaneLock :one
-- Takes a lane row, waiting for it: only for transactions that hold no
-- thread or execution row yet (DESIGN.md, "Lock order").
SELECT * FROM lane WHERE tenant_id = @tenant_id::text AND name = @name::text FOR UPDATE;

-- name: LaneTryLock :one
-- Takes a lane row if no other transaction holds it; no row means it is
-- held. A transaction that already holds thread rows may only take lane
-- rows this way.
SELECT * FROM lane WHERE tenant_id = @tenant_id::text AND name = @name::text FOR UPDATE SKIP LOCKED;

-- name: LaneCountRunning :one
SELECT count(*)::integer FROM agent_execution WHERE lane = @lane::text AND status = 'running';

-- name: SessionCountRunning :one
SELECT count(*)::integer FROM agent_execution
WHERE tenant_id = @tenant_id::text AND session_key = @session_key::text AND status = 'running';

-- name: LanePendingCandidates :many
-- The lane's admissible pending executions in admission order (resumed ones
-- first, then oldest first; runs paused until later, queued_at in the
-- future, are not admissible yet), each locked unless another transaction
-- holds it: locked is false for those, and admission stops there rather
-- than admit past an earlier run.
WITH ordered AS MATERIALIZED (
    SELECT id, admit_first, queued_at
    FROM agent_execution
    WHERE lane = @lane::text AND status = 'pending' AND queued_at <= clock_timestamp()
    ORDER BY admit_first DESC, queued_at, id
    LIMIT @max::integer
), held AS (
    SELECT x.id, x.tenant_id, x.execution_id, x.session_key, x.queued_at
    FROM agent_execution x
    WHERE x.id IN (SELECT id FROM ordered) AND x.status = 'pending'
    FOR UPDATE SKIP LOCKED
)
SELECT o.id, (h.id IS NOT NULL)::boolean AS locked, h.tenant_id, h.execution_id, h.session_key, h.queued_at
FROM ordered o
LEFT JOIN held h ON h.id = o.id
ORDER BY o.admit_first DESC, o.queued_at, o.id;

-- name: ExecutionAdmit :one
-- pending → running: the lane admitted it.
UPDATE agent_execution
SET status = 'running',
    -- clock_timestamp: admissions of a lane are serialized by its row
    -- lock, so their start times follow admission order.
    started_at = coalesce(started_at, clock_timestamp()),
    current_step_started_at = clock_timestamp(),
    admit_first = false,
    step_seq = step_seq + 1,
    updated_at = now()
WHERE id = @id::bigint
  AND status = 'pending'
RETURNING *;

-- name: ExecutionRequeue :one
-- running → pending with priority: a resumed execution whose lane or
-- session is full waits for admission ahead of new work.
UPDATE agent_execution
SET status = 'pending',
    admit_first = true,
    queued_at = now(),
    updated_at = now()
WHERE id = @id::bigint
  AND status = 'running'
RETURNING *;

-- name: ExecutionPauseForBreaker :one
-- running → pending until a tool's circuit breaker lets a probe through: the
-- run frees its lane slot, and admission takes it again (ahead of new work)
-- from @not_before on, its queued_at.
UPDATE agent_execution
SET status = 'pending',
    admit_first = true,
    queued_at = @not_before::timestamptz,
    updated_at = now()
WHERE id = @id::bigint
  AND status = 'running'
  AND step_seq = @step_seq::bigint
RETURNING *;

-- name: LaneArmDispatch :one
-- Marks a lane.dispatch as enqueued; no row means one already is.
UPDATE lane
SET dispatch_pending = true, dispatch_pending_since = now()
WHERE tenant_id = '' AND name = @name::text AND NOT dispatch_pending
RETURNING name;

-- name: LaneDisarmDispatch :exec
UPDATE lane SET dispatch_pending = false, dispatch_pending_since = NULL
WHERE tenant_id = '' AND name = @name::text;

-- name: LaneListNeedingDispatch :many
-- Global lanes with a free slot and eligible pending work, or whose
-- dispatch has been pending too long (its job was lost).
SELECT l.name
FROM lane l
WHERE l.tenant_id = ''
  AND ((NOT l.dispatch_pending
        AND EXISTS (SELECT 1 FROM agent_execution x WHERE x.lane = l.name AND x.status = 'pending'
                    AND x.queued_at < now() - make_interval(secs => @idle_seconds::double precision))
        AND (SELECT count(*) FROM agent_execution x WHERE x.lane = l.name AND x.status = 'running') < l.max_concurrent)
    OR (l.dispatch_pending AND l.dispatch_pending_since < now() - make_interval(secs => @rearm_after_seconds::double precision)))
ORDER BY l.name;

-- name: MonitorLaneList :many
SELECT lane::text AS lane, max_concurrent::integer AS max_concurrent, running::bigint AS running,
       pending::bigint AS pending, oldest_pending_age_ms::bigint AS oldest_pending_age_ms
FROM monitor_lanes
WHERE tenant_id = '' OR tenant_id = @tenant_id::text
ORDER BY lane;

-- name: ExecutionSetSession :exec
UPDATE agent_execution SET session_key = @session_key::text WHERE id = @id::bigint;
