-- name: MetricsActiveExecutions :many
-- Live executions by tenant and status, for the workflow_active_executions
-- gauge.
SELECT tenant_id, status::text AS status, count(*)::bigint AS executions
FROM agent_execution
WHERE status IN ('pending', 'running', 'waiting')
GROUP BY tenant_id, status
ORDER BY tenant_id, status;

-- name: MetricsQueueDepth :many
-- River jobs ready to run and not yet taken, by queue, for the
-- workflow_queue_depth gauge.
SELECT queue, count(*)::bigint AS jobs
FROM river_job
WHERE state = 'available'
   OR (state IN ('scheduled', 'retryable') AND scheduled_at <= now())
GROUP BY queue
ORDER BY queue;

-- name: MetricsThreadLocks :many
-- Threads whose lock is held, by tenant.
SELECT tenant_id, count(*)::bigint AS threads
FROM thread
WHERE active_execution_id IS NOT NULL
GROUP BY tenant_id
ORDER BY tenant_id;

-- name: MetricsOutboundPending :one
-- Outbound messages waiting for delivery (the outbox).
SELECT count(*)::bigint AS messages
FROM thread_message
WHERE direction = 'out' AND status = 'pending';

-- name: MetricsLanes :many
-- The global lanes' limits and occupancy (monitor_lanes); session lanes are
-- left out: their names carry thread ids.
SELECT lane::text AS lane, max_concurrent::bigint AS max_concurrent, running::bigint AS running, pending::bigint AS pending
FROM monitor_lanes
WHERE tenant_id = ''
ORDER BY lane;
