-- +goose Up
-- Waits: resume events received, and the monitoring views of active,
-- waiting and stuck executions.

-- inbound_event records each resume event by its event_id, with the answer
-- given, so a repeated event_id replays that answer and resumes nothing.
CREATE TABLE inbound_event (
    tenant_id    text        NOT NULL,
    event_id     text        NOT NULL,
    event_type   text        NOT NULL,
    execution_id text,
    thread_id    text,
    data         jsonb       NOT NULL DEFAULT '{}',
    response     jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, event_id)
);

CREATE INDEX agent_execution_waiting_idx ON agent_execution (tenant_id, waiting_for, id)
    WHERE status = 'waiting';

-- Active executions by status, per tenant (sum over tenants for a global
-- figure).
CREATE VIEW monitor_execution_status AS
SELECT tenant_id,
       status,
       count(*)::bigint                                               AS count,
       avg(extract(epoch FROM now() - created_at))::double precision  AS avg_age_seconds
FROM agent_execution
WHERE status IN ('pending', 'running', 'waiting')
GROUP BY tenant_id, status;

-- Waiting executions; agent_id is another name of workflow_id.
CREATE VIEW monitor_waiting_executions AS
SELECT e.id,
       e.tenant_id,
       e.execution_id,
       e.workflow_id,
       e.workflow_id                                                       AS agent_id,
       t.thread_id,
       e.waiting_for,
       e.waiting_until,
       e.waiting_data,
       e.updated_at,
       (extract(epoch FROM now() - e.updated_at) / 3600)::double precision AS waiting_hours
FROM agent_execution e
JOIN thread t ON t.id = e.thread_id
WHERE e.status = 'waiting';

-- Stuck executions: the timeout has passed but was not processed,
-- and nothing touched the execution for an hour.
CREATE VIEW monitor_stuck_executions AS
SELECT *
FROM monitor_waiting_executions
WHERE waiting_until < now()
  AND updated_at < now() - interval '1 hour';

-- +goose Down
DROP VIEW monitor_stuck_executions;
DROP VIEW monitor_waiting_executions;
DROP VIEW monitor_execution_status;
DROP INDEX agent_execution_waiting_idx;
DROP TABLE inbound_event;
