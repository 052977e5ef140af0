-- name: MonitorExecutionStatus :many
SELECT status, count, avg_age_seconds
FROM monitor_execution_status
WHERE tenant_id = @tenant_id::text
ORDER BY status;

-- name: MonitorWaiting :many
SELECT *
FROM monitor_waiting_executions
WHERE tenant_id = @tenant_id::text
ORDER BY waiting_until NULLS LAST, id
LIMIT @max::integer OFFSET @skip::integer;

-- name: MonitorStuck :many
SELECT *
FROM monitor_stuck_executions
WHERE tenant_id = @tenant_id::text
ORDER BY waiting_until NULLS LAST, id
LIMIT @max::integer OFFSET @skip::integer;
