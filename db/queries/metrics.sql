-- name: MetricsActiveExecutions :many
-- Live executions by tenant and status, for the workflow_active_executions
-- gauge: every live status of every known tenant (one that has stored a
-- definition, or has live executions), 0 when it has none, so that the
-- series exist while nothing runs. The tenants with definitions are found
-- with a skip scan (one index probe per tenant), not by reading every
-- definition.
WITH RECURSIVE defined (tenant_id) AS (
    (SELECT d.tenant_id FROM workflow_definition d ORDER BY d.tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT d.tenant_id FROM workflow_definition d WHERE d.tenant_id > t.tenant_id ORDER BY d.tenant_id LIMIT 1)
    FROM defined t
    WHERE t.tenant_id IS NOT NULL
), live AS (
    SELECT tenant_id, status, count(*)::bigint AS executions
    FROM agent_execution
    WHERE status IN ('pending', 'running', 'waiting')
    GROUP BY tenant_id, status
), tenants AS (
    SELECT tenant_id FROM defined WHERE tenant_id IS NOT NULL
    UNION
    SELECT tenant_id FROM live
)
SELECT t.tenant_id, s.status::text AS status, coalesce(l.executions, 0)::bigint AS executions
FROM tenants t
CROSS JOIN unnest('{pending,running,waiting}'::execution_status[]) AS s(status)
LEFT JOIN live l ON l.tenant_id = t.tenant_id AND l.status = s.status
ORDER BY t.tenant_id, s.status;

-- name: MetricsQueueDepth :many
-- River jobs due and not yet taken, by queue, for the workflow_queue_depth
-- gauge. A job made available before it is due (timers a few seconds ahead,
-- River's scheduler one interval ahead) waits for its time, not for a
-- worker, and is not counted until then.
SELECT queue, count(*)::bigint AS jobs
FROM river_job
WHERE state IN ('available', 'scheduled', 'retryable') AND scheduled_at <= now()
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
