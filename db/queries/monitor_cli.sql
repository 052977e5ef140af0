-- Queries of `baton monitor`: the monitoring views across all tenants, or
-- one tenant when tenant_id is given. Each list returns at most @max rows and
-- the total number of matching rows (count(*) OVER () is taken before LIMIT).

-- name: MonitorCLIStatus :many
SELECT tenant_id, status, count, avg_age_seconds
FROM monitor_execution_status
WHERE sqlc.narg(tenant_id)::text IS NULL OR tenant_id = sqlc.narg(tenant_id)::text
ORDER BY tenant_id, status;

-- name: MonitorCLIWaiting :many
SELECT id, tenant_id, execution_id, workflow_id, thread_id, waiting_for, waiting_until, updated_at, waiting_hours,
       count(*) OVER ()::bigint AS total
FROM monitor_waiting_executions
WHERE sqlc.narg(tenant_id)::text IS NULL OR tenant_id = sqlc.narg(tenant_id)::text
ORDER BY waiting_until NULLS LAST, id
LIMIT @max::integer;

-- name: MonitorCLIStuck :many
SELECT id, tenant_id, execution_id, workflow_id, thread_id, waiting_for, waiting_until, updated_at, waiting_hours,
       count(*) OVER ()::bigint AS total
FROM monitor_stuck_executions
WHERE sqlc.narg(tenant_id)::text IS NULL OR tenant_id = sqlc.narg(tenant_id)::text
ORDER BY waiting_until NULLS LAST, id
LIMIT @max::integer;

-- name: MonitorCLIActiveLocks :many
SELECT tenant_id, thread_id, active_execution_id, execution_locked_at, lock_minutes,
       count(*) OVER ()::bigint AS total
FROM monitor_active_locks
WHERE sqlc.narg(tenant_id)::text IS NULL OR tenant_id = sqlc.narg(tenant_id)::text
ORDER BY execution_locked_at, tenant_id, thread_id
LIMIT @max::integer;

-- name: MonitorCLIStaleLocks :many
SELECT tenant_id, thread_id, active_execution_id, execution_locked_at, lock_minutes,
       count(*) OVER ()::bigint AS total
FROM monitor_stale_locks
WHERE sqlc.narg(tenant_id)::text IS NULL OR tenant_id = sqlc.narg(tenant_id)::text
ORDER BY execution_locked_at, tenant_id, thread_id
LIMIT @max::integer;

-- MonitorCLILanesAvailable tells whether this database has the
-- monitor_lanes view (added by the lanes migration).
-- name: MonitorCLILanesAvailable :one
SELECT (to_regclass('monitor_lanes') IS NOT NULL)::boolean AS available;

-- MonitorCLILanes reads monitor_lanes: the global lanes (tenant_id '') and
-- the session lanes with work, of one tenant when tenant is set (the global
-- lanes always show: they are shared by every tenant).
-- name: MonitorCLILanes :many
SELECT tenant_id::text AS tenant_id, lane::text AS lane, max_concurrent::bigint AS max_concurrent,
       running::bigint AS running, pending::bigint AS pending, oldest_pending_age_ms::bigint AS oldest_pending_age_ms
FROM monitor_lanes
WHERE @tenant::text = '' OR tenant_id = @tenant::text OR tenant_id = ''
ORDER BY tenant_id, lane;
