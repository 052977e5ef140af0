-- +goose Up
-- Lanes and the inbound message router. A lane row is the lock
-- that admission takes; its running count is computed from agent_execution
-- under that lock, so it can never drift. Session lanes
-- ("session:<thread key>", limit 1) get a row of their own per tenant on
-- first use, which also carries the session's inbound flush state.

CREATE TABLE lane (
    tenant_id              text        NOT NULL DEFAULT '',
    name                   text        NOT NULL,
    max_concurrent         integer     NOT NULL CHECK (max_concurrent >= 1),
    -- A lane.dispatch job is enqueued (set and cleared under the row lock).
    dispatch_pending       boolean     NOT NULL DEFAULT false,
    dispatch_pending_since timestamptz,
    -- Session lanes: a session.flush job is enqueued for flush_at.
    flush_pending          boolean     NOT NULL DEFAULT false,
    flush_at               timestamptz,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);

-- The built-in lanes; Baton stores each process's configured limit when it
-- first takes the row.
INSERT INTO lane (tenant_id, name, max_concurrent) VALUES ('', 'main', 4), ('', 'subagent', 8), ('', 'cron', 2);

-- queued_at: when the execution last became pending (admission order and
-- the "queued for Nms" notice); admit_first: a resumed execution waiting
-- for a slot goes ahead of new work.
ALTER TABLE agent_execution
    ADD COLUMN queued_at   timestamptz DEFAULT now(),
    ADD COLUMN admit_first boolean NOT NULL DEFAULT false;

UPDATE agent_execution SET queued_at = created_at WHERE status = 'pending';

CREATE INDEX agent_execution_lane_pending_idx ON agent_execution (lane, admit_first DESC, queued_at, id)
    WHERE status = 'pending';
CREATE INDEX agent_execution_lane_running_idx ON agent_execution (lane) WHERE status = 'running';
CREATE INDEX agent_execution_session_idx ON agent_execution (tenant_id, session_key)
    WHERE session_key IS NOT NULL AND status IN ('pending', 'running');

-- Inbound messages: the sender's message id (dedupe), the channel, the
-- queue mode that decided their fate and, for steer-backlog, that a copy is
-- kept for a later run; summary marks the synthetic overflow summary.
ALTER TABLE thread_message
    ADD COLUMN external_id text,
    ADD COLUMN channel     text,
    ADD COLUMN queue_mode  text,
    ADD COLUMN backlog     boolean NOT NULL DEFAULT false,
    ADD COLUMN summary     boolean NOT NULL DEFAULT false,
    ADD COLUMN dropped_count integer NOT NULL DEFAULT 0,
    ADD COLUMN consumed_at timestamptz,
    -- The router's answer (outcome), replayed for a repeated message id.
    ADD COLUMN outcome     text;

CREATE UNIQUE INDEX thread_message_inbound_key ON thread_message (thread_id, external_id)
    WHERE direction = 'in' AND external_id IS NOT NULL;
CREATE INDEX thread_message_inbox_idx ON thread_message (thread_id, id)
    WHERE direction = 'in' AND status IN ('received', 'steer');

-- Lane occupancy: the global lanes (tenant_id ''), and session
-- lanes (tenant_id of their thread) that have work. oldest_pending_age_ms is
-- 0 when nothing is pending.
CREATE VIEW monitor_lanes AS
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

-- +goose Down
DROP VIEW monitor_lanes;
DROP INDEX thread_message_inbox_idx;
DROP INDEX thread_message_inbound_key;
ALTER TABLE thread_message DROP COLUMN external_id, DROP COLUMN channel, DROP COLUMN queue_mode,
    DROP COLUMN backlog, DROP COLUMN summary, DROP COLUMN dropped_count, DROP COLUMN consumed_at, DROP COLUMN outcome;
DROP INDEX agent_execution_session_idx;
DROP INDEX agent_execution_lane_running_idx;
DROP INDEX agent_execution_lane_pending_idx;
ALTER TABLE agent_execution DROP COLUMN admit_first, DROP COLUMN queued_at;
DROP TABLE lane;
