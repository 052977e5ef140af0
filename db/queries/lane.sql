-- name: LaneSetLimit :exec
-- Stores the configured limits of a lane whose row the caller holds.
UPDATE lane SET max_concurrent = @max_concurrent::integer, per_tenant = @per_tenant::integer, updated_at = now()
WHERE tenant_id = @tenant_id::text AND name = @name::text;

-- name: LaneEnsure :exec
-- Creates a global or session lane row on first use with its limits.
INSERT INTO lane (tenant_id, name, max_concurrent, per_tenant)
VALUES (@tenant_id::text, @name::text, @max_concurrent::integer, @per_tenant::integer)
ON CONFLICT (tenant_id, name) DO NOTHING;

-- name: LaneEnsureOwned :one
-- Creates a tenant's own lane row on first use unless the tenant already
-- has @max_lanes lanes of its own (session lanes not counted). exists is
-- false when the row is not there: the tenant is at its bound.
WITH ins AS (
    INSERT INTO lane (tenant_id, name, max_concurrent)
    SELECT @tenant_id::text, @name::text, @max_concurrent::integer
    WHERE (SELECT count(*) FROM lane WHERE tenant_id = @tenant_id::text AND name NOT LIKE 'session:%') < @max_lanes::integer
    ON CONFLICT (tenant_id, name) DO NOTHING
    RETURNING 1
)
SELECT (EXISTS (SELECT 1 FROM ins)
        OR EXISTS (SELECT 1 FROM lane WHERE tenant_id = @tenant_id::text AND name = @name::text))::boolean AS exists;

-- name: LaneLock :one
-- Takes a lane row, waiting for it: only for transactions that hold no
-- thread or execution row yet (lock order: lane, thread, execution rows).
SELECT * FROM lane WHERE tenant_id = @tenant_id::text AND name = @name::text FOR UPDATE;

-- name: LaneTryLock :one
-- Takes a lane row if no other transaction holds it; no row means it is
-- held. A transaction that already holds thread rows may only take lane
-- rows this way.
SELECT * FROM lane WHERE tenant_id = @tenant_id::text AND name = @name::text FOR UPDATE SKIP LOCKED;

-- name: LaneSharedRoom :one
-- What shared admission decides on, for the global lane @lane
-- (engine/lane_shared.go): its stored limits, the running executions other
-- than @self, the most transactions that can be in flight at once in the
-- cluster (every backend and prepared transaction), whether an admissible
-- pending run other than @self is queued, and whether this transaction has
-- admitted a run in share mode already (LaneTryShare marks it).
SELECT l.max_concurrent, l.per_tenant,
       (SELECT count(*) FROM agent_execution
        WHERE lane = @lane::text AND status = 'running' AND id <> @self::bigint)::integer AS others,
       (current_setting('max_connections')::integer
        + current_setting('max_prepared_transactions')::integer)::integer AS in_flight,
       EXISTS (SELECT 1 FROM agent_execution
               WHERE lane = @lane::text AND status = 'pending' AND queued_at <= clock_timestamp()
                 AND id <> @self::bigint)::boolean AS queued,
       (coalesce(current_setting('baton.shared_admission', true), '') = 'taken')::boolean AS admitted
FROM lane l WHERE l.tenant_id = '' AND l.name = @lane::text;

-- name: LaneTryShare :one
-- Takes the admission lock of a global lane in share mode unless an
-- exclusive holder has it or waits for it; for a run to admit (@admit),
-- marks the transaction as having admitted one this way.
SELECT (pg_try_advisory_xact_lock_shared(@lock_class::integer, hashtext(@lane::text))
        AND (NOT @admit::boolean OR set_config('baton.shared_admission', 'taken', true) = 'taken'))::boolean AS locked;

-- name: LaneLockExclusive :exec
-- Takes the admission lock of a global lane exclusively, waiting for its
-- share holders: after the lane row (LaneLock).
SELECT pg_advisory_xact_lock(@lock_class::integer, hashtext(@lane::text));

-- name: LaneTryExclusive :one
-- Takes the admission lock of a global lane exclusively if nobody holds
-- it: after the lane row (LaneTryLock).
SELECT pg_try_advisory_xact_lock(@lock_class::integer, hashtext(@lane::text))::boolean AS locked;

-- name: LaneExists :one
SELECT EXISTS (SELECT 1 FROM lane WHERE tenant_id = @tenant_id::text AND name = @name::text)::boolean;

-- name: LaneCountRunning :one
-- The running executions of a global lane, all tenants'.
SELECT count(*)::integer FROM agent_execution WHERE lane = @lane::text AND status = 'running';

-- name: LaneTenantRunning :one
-- One tenant's running executions in a lane: all of a tenant's own lane's.
SELECT count(*)::integer FROM agent_execution
WHERE lane = @lane::text AND tenant_id = @tenant_id::text AND status = 'running';

-- name: SessionCountRunning :one
SELECT count(*)::integer FROM agent_execution
WHERE tenant_id = @tenant_id::text AND session_key = @session_key::text AND status = 'running';

-- name: LaneFairCandidates :many
-- The admissible pending executions of a lane (a global lane: @owner '';
-- a tenant's own lane: @owner that tenant), as up to @per_tenant heads of
-- each of up to @max_tenants tenants with pending work, in each tenant's
-- admission order (resumed ones first, then oldest first; runs paused until
-- later, queued_at in the future, are not admissible yet), with the
-- tenant's running count in the lane. Each head is locked unless another
-- transaction holds it: locked is false for those, and admission takes no
-- later run of that tenant rather than admit past an earlier one. Runs
-- whose session has a run running are not heads: they cannot be admitted,
-- and would hold the heads' places from runs that can. The
-- tenants are found by a skip scan of the pending index, one probe each,
-- and the running counts by one pass over the lane's running index.
WITH RECURSIVE tenants AS (
    (SELECT x.tenant_id FROM agent_execution x
     WHERE x.lane = @lane::text AND x.status = 'pending'
     ORDER BY x.tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT x.tenant_id FROM agent_execution x
            WHERE x.lane = @lane::text AND x.status = 'pending' AND x.tenant_id > t.tenant_id
            ORDER BY x.tenant_id LIMIT 1)
    FROM tenants t WHERE t.tenant_id IS NOT NULL
), running AS MATERIALIZED (
    SELECT x.tenant_id, count(*)::integer AS running FROM agent_execution x
    WHERE x.lane = @lane::text AND x.status = 'running'
    GROUP BY x.tenant_id
), heads AS MATERIALIZED (
    SELECT h.id, h.tenant_id, h.admit_first, h.queued_at, coalesce(r.running, 0)::integer AS running
    FROM (SELECT tenant_id FROM tenants
          WHERE tenant_id IS NOT NULL AND (@owner::text = '' OR tenant_id = @owner::text)
          LIMIT @max_tenants::integer) t
    LEFT JOIN running r ON r.tenant_id = t.tenant_id
    CROSS JOIN LATERAL (
        SELECT x.id, x.tenant_id, x.admit_first, x.queued_at FROM agent_execution x
        WHERE x.lane = @lane::text AND x.tenant_id = t.tenant_id AND x.status = 'pending' AND x.queued_at <= clock_timestamp()
          AND (x.session_key IS NULL
               OR NOT EXISTS (SELECT 1 FROM agent_execution r
                              WHERE r.tenant_id = x.tenant_id AND r.session_key = x.session_key
                                AND r.status = 'running' AND r.session_key IS NOT NULL))
        ORDER BY x.admit_first DESC, x.queued_at, x.id
        LIMIT @per_tenant::integer) h
), held AS (
    SELECT x.id, x.execution_id, x.session_key
    FROM agent_execution x
    WHERE x.id IN (SELECT id FROM heads) AND x.status = 'pending'
    FOR UPDATE SKIP LOCKED
)
SELECT h.id, h.tenant_id, h.admit_first, h.queued_at, h.running,
       (held.id IS NOT NULL)::boolean AS locked, held.execution_id, held.session_key
FROM heads h
LEFT JOIN held ON held.id = h.id
ORDER BY h.tenant_id, h.admit_first DESC, h.queued_at, h.id;

-- name: ExecutionAdmit :one
-- pending → running: the lane admitted it.
UPDATE agent_execution
SET status = 'running',
    -- clock_timestamp: admissions of a lane are serialized by its row
    -- lock, so their start times follow admission order (shared admission
    -- admits a start only when nothing is queued).
    started_at = coalesce(started_at, clock.at),
    current_step_started_at = clock.at,
    admit_first = false,
    step_seq = step_seq + 1,
    updated_at = clock.at
FROM (SELECT clock_timestamp() AS at) clock
WHERE id = @id::bigint
  AND status = 'pending'
RETURNING agent_execution.*;

-- name: ExecutionRequeue :one
-- running → pending with priority: a resumed execution whose lane or
-- session is full waits for admission ahead of new work.
UPDATE agent_execution
SET status = 'pending',
    admit_first = true,
    queued_at = now(),
    updated_at = clock_timestamp()
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
    updated_at = clock_timestamp()
WHERE id = @id::bigint
  AND status = 'running'
  AND step_seq = @step_seq::bigint
RETURNING *;

-- name: LaneArmDispatch :one
-- Marks a lane.dispatch as enqueued; no row means one already is.
UPDATE lane
SET dispatch_pending = true, dispatch_pending_since = now()
WHERE tenant_id = @owner::text AND name = @name::text AND NOT dispatch_pending
RETURNING name;

-- name: LaneDisarmDispatch :exec
UPDATE lane SET dispatch_pending = false, dispatch_pending_since = NULL
WHERE tenant_id = @owner::text AND name = @name::text;

-- name: LaneListNeedingDispatch :many
-- Global and tenant lanes with a free slot and eligible pending work, or
-- whose dispatch has been pending too long (its job was lost).
SELECT l.tenant_id AS owner, l.name
FROM lane l
WHERE l.name NOT LIKE 'session:%'
  AND ((NOT l.dispatch_pending
        AND EXISTS (SELECT 1 FROM agent_execution x WHERE x.lane = l.name AND x.status = 'pending'
                    AND (l.tenant_id = '' OR x.tenant_id = l.tenant_id)
                    AND x.queued_at < now() - make_interval(secs => @idle_seconds::double precision))
        AND (SELECT count(*) FROM agent_execution x WHERE x.lane = l.name AND x.status = 'running'
             AND (l.tenant_id = '' OR x.tenant_id = l.tenant_id)) < l.max_concurrent)
    OR (l.dispatch_pending AND l.dispatch_pending_since < now() - make_interval(secs => @rearm_after_seconds::double precision)))
ORDER BY l.tenant_id, l.name;

-- name: MonitorLaneList :many
-- A page of a tenant's view of the lanes: the global lanes with its own
-- running and pending executions in them (never other tenants'), its own
-- lanes and its session lanes with work. Ordered by (lane, tenant_lane),
-- which is unique, a page continues after its last row's key
-- (@after_lane NULL: the first page).
SELECT v.lane, v.max_concurrent, v.per_tenant, v.running, v.pending, v.oldest_pending_age_ms, v.tenant_lane
FROM (
    SELECT l.name::text AS lane, l.max_concurrent::integer AS max_concurrent, l.per_tenant::integer AS per_tenant,
           (SELECT count(*) FROM agent_execution x WHERE x.lane = l.name AND x.tenant_id = @tenant_id::text AND x.status = 'running')::bigint AS running,
           (SELECT count(*) FROM agent_execution x WHERE x.lane = l.name AND x.tenant_id = @tenant_id::text AND x.status = 'pending')::bigint AS pending,
           greatest(coalesce((SELECT (extract(epoch FROM now() - min(x.queued_at)) * 1000)::bigint FROM agent_execution x
                              WHERE x.lane = l.name AND x.tenant_id = @tenant_id::text AND x.status = 'pending'), 0), 0)::bigint AS oldest_pending_age_ms,
           false AS tenant_lane
    FROM lane l
    WHERE l.tenant_id = ''
    UNION ALL
    SELECT m.lane::text, m.max_concurrent::integer, 0, m.running::bigint, m.pending::bigint, m.oldest_pending_age_ms::bigint, true
    FROM monitor_lanes m
    WHERE m.tenant_id = @tenant_id::text
) v
WHERE sqlc.narg('after_lane')::text IS NULL
   OR (v.lane, v.tenant_lane) > (sqlc.narg('after_lane')::text, @after_tenant_lane::boolean)
ORDER BY v.lane, v.tenant_lane
LIMIT @max::integer;
