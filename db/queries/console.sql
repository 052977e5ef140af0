-- name: ConsoleTimeline :many
-- The newest messages of a thread, both directions, with the execution
-- that said (or took) each and, for an outbound message, whether it was
-- queued for the thread's lock (its thread.message_queued event, found
-- through execution_event_queued_message_idx): the console's thread page.
SELECT m.id, m.direction, m.body, m.status, m.created_at, m.delivered_at, m.consumed_at,
       m.external_id, m.outcome, m.queue_mode, m.node_id,
       x.execution_id AS execution_key, x.workflow_id AS workflow_key,
       (m.direction = 'out' AND EXISTS (
           SELECT 1 FROM execution_event e
           WHERE e.execution_id = m.execution_id
             AND e.action = 'thread.message_queued'
             AND e.payload ->> 'message_id' = m.id::text))::boolean AS was_queued
FROM thread_message m
LEFT JOIN agent_execution x ON x.id = m.execution_id
WHERE m.thread_id = @thread_id::bigint AND m.id < @before_id::bigint
ORDER BY m.id DESC
LIMIT @max::integer;

-- name: ConsoleDefinitionVersions :many
-- The stored versions of one workflow, newest first: the console's
-- definition page.
SELECT version, name, created_at
FROM workflow_definition
WHERE tenant_id = @tenant_id::text AND workflow_id = @workflow_id::text
ORDER BY id DESC
LIMIT @max::integer;

-- name: ConsoleExecutionJobs :many
-- The River jobs whose args name an execution (its steps, wait timeouts
-- and callbacks), newest first, through River's GIN index on args: the
-- console's link from an execution to its jobs in River UI.
SELECT id, kind, state, attempt, scheduled_at, finalized_at
FROM river_job
WHERE args @> jsonb_build_object('execution_id', @execution_id::bigint)
ORDER BY id DESC
LIMIT @max::integer;

-- name: ConsoleFamily :many
-- An execution's family for the console's execution page: its root (up to
-- @max_up ancestors above it) and the root's descendants, at most
-- @max_depth levels down, depth first (each level oldest first), at most
-- @max rows. One statement instead of a query per member.
WITH RECURSIVE up AS (
    SELECT a.id, a.parent_execution_id, 0 AS n
    FROM agent_execution a
    WHERE a.id = @id::bigint AND a.tenant_id = @tenant_id::text
  UNION ALL
    SELECT p.id, p.parent_execution_id, up.n + 1
    FROM up JOIN agent_execution p ON p.id = up.parent_execution_id
    WHERE up.n < @max_up::integer
), root AS (
    SELECT id FROM up ORDER BY n DESC LIMIT 1
), down AS (
    SELECT x.id, 0 AS depth, ARRAY[x.id] AS path
    FROM agent_execution x JOIN root ON x.id = root.id
  UNION ALL
    SELECT c.id, down.depth + 1, down.path || c.id
    FROM down JOIN agent_execution c ON c.parent_execution_id = down.id
    WHERE down.depth < @max_depth::integer
)
SELECT x.execution_id, x.workflow_id, x.status, x.lane, down.depth::integer AS depth
FROM down JOIN agent_execution x ON x.id = down.id
WHERE x.tenant_id = @tenant_id::text
ORDER BY down.path
LIMIT @max::integer;

-- name: ConsoleWorkflowIDs :many
-- The ids of a tenant's workflows, for the console's start form, without
-- reading their definitions.
SELECT DISTINCT workflow_id
FROM workflow_definition
WHERE tenant_id = @tenant_id::text
ORDER BY workflow_id
LIMIT @max::integer;
