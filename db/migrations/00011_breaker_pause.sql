-- +goose Up
-- A run whose tool's circuit breaker is open goes back to pending until the
-- breaker lets a probe through, freeing its
-- lane slot: its queued_at is then that moment, in the future, and
-- admission skips it until then. monitor_lanes counts it as pending; the
-- oldest pending age never goes below 0.
CREATE OR REPLACE VIEW monitor_lanes AS
SELECT l.tenant_id,
       l.name AS lane,
       l.max_concurrent,
       (SELECT count(*) FROM agent_execution x WHERE x.lane = l.name AND x.status = 'running')::bigint AS running,
       (SELECT count(*) FROM agent_execution x WHERE x.lane = l.name AND x.status = 'pending')::bigint AS pending,
       greatest(coalesce((SELECT (extract(epoch FROM now() - min(x.queued_at)) * 1000)::bigint
                          FROM agent_execution x WHERE x.lane = l.name AND x.status = 'pending'), 0), 0)::bigint AS oldest_pending_age_ms
FROM lane l
WHERE l.tenant_id = ''
UNION ALL
SELECT l.tenant_id,
       l.name,
       l.max_concurrent,
       count(*) FILTER (WHERE x.status = 'running')::bigint,
       count(*) FILTER (WHERE x.status = 'pending')::bigint,
       greatest(coalesce((extract(epoch FROM now() - min(x.queued_at) FILTER (WHERE x.status = 'pending')) * 1000)::bigint, 0), 0)::bigint
FROM lane l
JOIN agent_execution x ON x.tenant_id = l.tenant_id AND x.session_key = l.name AND x.status IN ('pending', 'running')
WHERE l.tenant_id <> ''
GROUP BY l.tenant_id, l.name, l.max_concurrent;

-- +goose Down
CREATE OR REPLACE VIEW monitor_lanes AS
SELECT l.tenant_id,
       l.name AS lane,
       l.max_concurrent,
       (SELECT count(*) FROM agent_execution x WHERE x.lane = l.name AND x.status = 'running')::bigint AS running,
       (SELECT count(*) FROM agent_execution x WHERE x.lane = l.name AND x.status = 'pending')::bigint AS pending,
       coalesce((SELECT (extract(epoch FROM now() - min(x.queued_at)) * 1000)::bigint
                 FROM agent_execution x WHERE x.lane = l.name AND x.status = 'pending'), 0)::bigint AS oldest_pending_age_ms
FROM lane l
WHERE l.tenant_id = ''
UNION ALL
SELECT l.tenant_id,
       l.name,
       l.max_concurrent,
       count(*) FILTER (WHERE x.status = 'running')::bigint,
       count(*) FILTER (WHERE x.status = 'pending')::bigint,
       coalesce((extract(epoch FROM now() - min(x.queued_at) FILTER (WHERE x.status = 'pending')) * 1000)::bigint, 0)::bigint
FROM lane l
JOIN agent_execution x ON x.tenant_id = l.tenant_id AND x.session_key = l.name AND x.status IN ('pending', 'running')
WHERE l.tenant_id <> ''
GROUP BY l.tenant_id, l.name, l.max_concurrent;
