-- +goose Up
-- Lanes shared fairly between tenants (engine/lane.go, "Fair admission").
-- A lane the operator configures is global (tenant_id ''); a lane name a
-- tenant uses that the operator did not configure is that tenant's own
-- (tenant_id = the tenant), so B's "x" is not A's "x". Admission in a global
-- lane picks, slot by slot, the head of the tenant with the fewest running
-- executions in the lane (FIFO within each tenant); per_tenant caps how many
-- one tenant may run at once (0: no cap).
ALTER TABLE lane ADD COLUMN per_tenant integer NOT NULL DEFAULT 0 CHECK (per_tenant >= 0);

-- Admission reads, per lane, the tenants with pending work and, per
-- tenant, its oldest pending runs and its running count. (A running index
-- keyed on (lane, tenant_id) would make the planner count a whole lane
-- through the status index instead; tenant_id is included instead.)
DROP INDEX agent_execution_lane_pending_idx;
CREATE INDEX agent_execution_lane_pending_idx ON agent_execution (lane, tenant_id, admit_first DESC, queued_at, id)
    WHERE status = 'pending';
DROP INDEX agent_execution_lane_running_idx;
CREATE INDEX agent_execution_lane_running_idx ON agent_execution (lane) INCLUDE (tenant_id) WHERE status = 'running';

-- Lane occupancy: global lanes over all tenants (the operator's view), a
-- tenant's own lanes over its runs, and session lanes that have work.
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

-- +goose Down
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
DROP INDEX agent_execution_lane_running_idx;
CREATE INDEX agent_execution_lane_running_idx ON agent_execution (lane) WHERE status = 'running';
DROP INDEX agent_execution_lane_pending_idx;
CREATE INDEX agent_execution_lane_pending_idx ON agent_execution (lane, admit_first DESC, queued_at, id)
    WHERE status = 'pending';
ALTER TABLE lane DROP COLUMN per_tenant;
