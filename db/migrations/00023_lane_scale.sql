-- +goose Up
-- The lane table holds a row per session (session:<thread>) besides the
-- operator's and the tenants' own lanes, so it grows with threads. The
-- queries that read every lane that is not a session lane (the dispatch
-- reaper, monitor_lanes) read them through an index of their own, and
-- monitor_lanes finds the session lanes with work from their live
-- executions, one lane row each, instead of reading every session lane.
CREATE INDEX lane_shared_idx ON lane (tenant_id, name) WHERE name NOT LIKE 'session:%';

CREATE OR REPLACE VIEW monitor_lanes AS
SELECT l.tenant_id,
       l.name AS lane,
       l.max_concurrent,
       (SELECT count(*) FROM agent_execution x WHERE x.lane = l.name AND (l.tenant_id = '' OR x.tenant_id = l.tenant_id)
                                                AND x.status = 'running')::bigint AS running,
       (SELECT count(*) FROM agent_execution x WHERE x.lane = l.name AND (l.tenant_id = '' OR x.tenant_id = l.tenant_id)
                                                AND x.status = 'pending')::bigint AS pending,
       greatest(coalesce((SELECT (extract(epoch FROM now() - min(x.queued_at)) * 1000)::bigint
                          FROM agent_execution x WHERE x.lane = l.name AND (l.tenant_id = '' OR x.tenant_id = l.tenant_id)
                                                   AND x.status = 'pending'), 0), 0)::bigint AS oldest_pending_age_ms
FROM lane l
WHERE l.name NOT LIKE 'session:%'
UNION ALL
-- LIMIT keeps the lane lookup a probe of its key per session with work.
SELECT s.tenant_id,
       s.session_key,
       l.max_concurrent,
       s.running,
       s.pending,
       s.oldest_pending_age_ms
FROM (SELECT x.tenant_id,
             x.session_key,
             count(*) FILTER (WHERE x.status = 'running')::bigint AS running,
             count(*) FILTER (WHERE x.status = 'pending')::bigint AS pending,
             greatest(coalesce((extract(epoch FROM now() - min(x.queued_at) FILTER (WHERE x.status = 'pending')) * 1000)::bigint, 0), 0)::bigint
                 AS oldest_pending_age_ms
      FROM agent_execution x
      WHERE x.session_key LIKE 'session:%' AND x.tenant_id <> '' AND x.status IN ('pending', 'running')
      GROUP BY x.tenant_id, x.session_key) s
CROSS JOIN LATERAL (SELECT l.max_concurrent FROM lane l
                    WHERE l.tenant_id = s.tenant_id AND l.name = s.session_key
                    LIMIT 1) l;

-- +goose Down
CREATE OR REPLACE VIEW monitor_lanes AS
SELECT l.tenant_id,
       l.name AS lane,
       l.max_concurrent,
       (SELECT count(*) FROM agent_execution x WHERE x.lane = l.name AND (l.tenant_id = '' OR x.tenant_id = l.tenant_id)
                                                AND x.status = 'running')::bigint AS running,
       (SELECT count(*) FROM agent_execution x WHERE x.lane = l.name AND (l.tenant_id = '' OR x.tenant_id = l.tenant_id)
                                                AND x.status = 'pending')::bigint AS pending,
       greatest(coalesce((SELECT (extract(epoch FROM now() - min(x.queued_at)) * 1000)::bigint
                          FROM agent_execution x WHERE x.lane = l.name AND (l.tenant_id = '' OR x.tenant_id = l.tenant_id)
                                                   AND x.status = 'pending'), 0), 0)::bigint AS oldest_pending_age_ms
FROM lane l
WHERE l.name NOT LIKE 'session:%'
UNION ALL
SELECT l.tenant_id,
       l.name,
       l.max_concurrent,
       count(*) FILTER (WHERE x.status = 'running')::bigint,
       count(*) FILTER (WHERE x.status = 'pending')::bigint,
       greatest(coalesce((extract(epoch FROM now() - min(x.queued_at) FILTER (WHERE x.status = 'pending')) * 1000)::bigint, 0), 0)::bigint
FROM lane l
JOIN agent_execution x ON x.tenant_id = l.tenant_id AND x.session_key = l.name AND x.status IN ('pending', 'running')
WHERE l.tenant_id <> '' AND l.name LIKE 'session:%'
GROUP BY l.tenant_id, l.name, l.max_concurrent;

DROP INDEX lane_shared_idx;
