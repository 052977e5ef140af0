-- name: ExecutionReserve :one
-- An id and timestamps for a settling start, and whether it may run without
-- a slot: its global lane has fewer than @lane_limit running and no
-- admissible pending run, and, for a start in a session lane
-- (@session_key not null), the session has no pending or running run; all
-- read without the lane rows' locks (a session start holds its session
-- row). Such a run never holds a slot (engine/lane.go, "Runs that never
-- hold a slot"); ExecutionInsertSettled writes its row. With
-- @draw_message, message_id is an id for its first outbound message
-- (MessageInsertOutbound), drawn here instead of by MessageIDNext, which
-- would cost a round trip; else 0. With @draw_thread, thread_id is an id
-- for the run's implicit thread (ThreadInsertNew); else 0. With
-- @workflow_id, definition_id is the row id of that workflow's latest
-- version (DefinitionLatestID), so that a start which guessed it learns
-- in this round trip whether it guessed right; else, or when the workflow
-- has none, 0.
SELECT nextval(pg_get_serial_sequence('agent_execution', 'id'))::bigint AS id,
       ((SELECT count(*) FROM (SELECT 1 FROM agent_execution
                               WHERE lane = @lane::text AND status = 'running'
                               LIMIT @lane_limit::integer) r) < @lane_limit::integer
        AND NOT EXISTS (SELECT 1 FROM agent_execution
                        WHERE lane = @lane::text AND status = 'pending' AND queued_at <= clock_timestamp())
        AND (sqlc.narg('session_key')::text IS NULL
             OR NOT EXISTS (SELECT 1 FROM agent_execution
                            WHERE tenant_id = @tenant_id::text AND session_key = sqlc.narg('session_key')::text
                              AND status IN ('pending', 'running'))))::boolean AS room,
       now()::timestamptz AS created_at,
       clock_timestamp()::timestamptz AS started_at,
       (CASE WHEN @draw_message::boolean THEN nextval(pg_get_serial_sequence('thread_message', 'id')) ELSE 0 END)::bigint AS message_id,
       (CASE WHEN @draw_thread::boolean THEN nextval(pg_get_serial_sequence('thread', 'id')) ELSE 0 END)::bigint AS thread_id,
       coalesce((SELECT d.id FROM workflow_definition d
                 WHERE d.tenant_id = @tenant_id::text AND d.workflow_id = sqlc.narg('workflow_id')::text
                 ORDER BY d.id DESC LIMIT 1), 0)::bigint AS definition_id;

-- name: ExecutionInsert :one
-- A new execution, pending until its lane admits it.
INSERT INTO agent_execution (
    tenant_id, execution_id, workflow_id, version, status, lane, thread_id,
    parent_execution_id, can_inherit_lock, restarted_from, current_node_id,
    input, context, variables, correlation_id, idempotency_key, callback_url, callback_events,
    priority, total_steps, event_data, session_key
)
VALUES (
    @tenant_id, @execution_id, @workflow_id, @version, 'pending', @lane, @thread_id,
    sqlc.narg('parent_execution_id'), @can_inherit_lock, sqlc.narg('restarted_from'), @current_node_id,
    @input, @context, @variables, @correlation_id,
    sqlc.narg('idempotency_key'), sqlc.narg('callback_url'), sqlc.narg('callback_events')::text[],
    @priority, @total_steps, sqlc.narg('event_data'), sqlc.narg('session_key')
)
RETURNING *;

-- name: ExecutionInsertSettled :exec
-- Writes a settling start's row (ExecutionReserve), once, as its start
-- transaction leaves it: running when the step goes on to something that
-- needs the row, or ended (completed_at set) when the step ends it.
-- @updated_at is the database's clock when the row is written, as the
-- start reads it (engine.reservation.now), and an ended row's
-- completed_at; the other defaults are the table's.
INSERT INTO agent_execution (
    id, tenant_id, execution_id, workflow_id, version, status, lane, thread_id,
    can_inherit_lock, restarted_from, current_node_id,
    input, context, variables, correlation_id, idempotency_key, callback_url, callback_events,
    priority, total_steps, steps_completed, node_path, step_seq,
    result_type, result_summary, result, error_code, error_message, failed_node_id, error_details,
    created_at, started_at, current_step_started_at, completed_at, updated_at, session_key
)
SELECT
    @id, @tenant_id, @execution_id, @workflow_id, @version, @status, @lane, @thread_id,
    @can_inherit_lock, sqlc.narg('restarted_from'), @current_node_id,
    @input, @context, @variables, @correlation_id, sqlc.narg('idempotency_key'), sqlc.narg('callback_url'),
    sqlc.narg('callback_events')::text[],
    @priority, @total_steps, @steps_completed, @node_path::text[], @step_seq,
    sqlc.narg('result_type'), sqlc.narg('result_summary'), sqlc.narg('result'),
    sqlc.narg('error_code'), sqlc.narg('error_message'), sqlc.narg('failed_node_id'), sqlc.narg('error_details'),
    @created_at, @started_at, @started_at,
    sqlc.narg('completed_at')::timestamptz,
    @updated_at::timestamptz,
    sqlc.narg('session_key');

-- name: ExecutionGetByID :one
SELECT * FROM agent_execution WHERE id = @id::bigint;

-- name: ExecutionGetByExecutionID :one
SELECT * FROM agent_execution WHERE tenant_id = @tenant_id::text AND execution_id = @execution_id::text;

-- name: ExecutionViewByExecutionID :one
SELECT sqlc.embed(e), t.thread_id AS thread_key, p.execution_id AS parent_key, r.execution_id AS restarted_from_key
FROM agent_execution e
JOIN thread t ON t.id = e.thread_id
LEFT JOIN agent_execution p ON p.id = e.parent_execution_id
LEFT JOIN agent_execution r ON r.id = e.restarted_from
WHERE e.tenant_id = @tenant_id::text AND e.execution_id = @execution_id::text;

-- name: ExecutionViewList :many
SELECT sqlc.embed(e), t.thread_id AS thread_key, p.execution_id AS parent_key, r.execution_id AS restarted_from_key
FROM agent_execution e
JOIN thread t ON t.id = e.thread_id
LEFT JOIN agent_execution p ON p.id = e.parent_execution_id
LEFT JOIN agent_execution r ON r.id = e.restarted_from
WHERE e.tenant_id = @tenant_id::text
  AND (sqlc.narg('status')::text IS NULL OR e.status = sqlc.narg('status')::text::execution_status)
  AND (sqlc.narg('workflow_id')::text IS NULL OR e.workflow_id = sqlc.narg('workflow_id')::text)
  -- A thread and a parent belong to their execution's tenant; saying so lets
  -- the (tenant_id, thread_id) and (tenant_id, execution_id) keys find them.
  AND (sqlc.narg('thread_key')::text IS NULL OR (t.tenant_id = @tenant_id::text AND t.thread_id = sqlc.narg('thread_key')::text))
  AND (sqlc.narg('parent_key')::text IS NULL OR (p.tenant_id = @tenant_id::text AND p.execution_id = sqlc.narg('parent_key')::text))
  AND (sqlc.narg('before_id')::bigint IS NULL OR e.id < sqlc.narg('before_id')::bigint)
ORDER BY e.id DESC
LIMIT @max::integer;

-- name: ExecutionLockForStep :one
-- Takes the execution for one step: only while it is running and its
-- checkpoint is the one the step job expects.
SELECT *
FROM agent_execution
WHERE id = @id::bigint
  AND status = 'running'
  AND step_seq = @step_seq::bigint
FOR UPDATE;

-- name: ExecutionStart :one
UPDATE agent_execution
SET status = 'running',
    started_at = coalesce(started_at, clock.at),
    current_step_started_at = clock.at,
    step_seq = step_seq + 1,
    updated_at = clock.at
FROM (SELECT clock_timestamp() AS at) clock
WHERE id = @id::bigint
  AND status = 'pending'
RETURNING agent_execution.*;

-- name: ExecutionCheckpoint :one
UPDATE agent_execution
SET current_node_id = @current_node_id::text,
    current_step_started_at = now(),
    variables = @variables::jsonb,
    node_path = @node_path::text[],
    steps_completed = @steps_completed::integer,
    total_steps = @total_steps::integer,
    node_attempt = 0,
    step_seq = step_seq + 1,
    updated_at = clock_timestamp()
WHERE id = @id::bigint
  AND status = 'running'
  AND step_seq = @step_seq::bigint
RETURNING *;

-- name: ExecutionFinishStep :one
-- Ends a running execution from its step: completed or failed.
UPDATE agent_execution
SET status = @status::execution_status,
    current_node_id = @current_node_id::text,
    variables = @variables::jsonb,
    node_path = @node_path::text[],
    steps_completed = @steps_completed::integer,
    total_steps = @total_steps::integer,
    result_type = @result_type::text,
    result_summary = sqlc.narg('result_summary')::text,
    result = sqlc.narg('result')::jsonb,
    error_code = sqlc.narg('error_code')::text,
    error_message = sqlc.narg('error_message')::text,
    failed_node_id = sqlc.narg('failed_node_id')::text,
    error_details = sqlc.narg('error_details')::jsonb,
    node_attempt = 0,
    step_seq = step_seq + 1,
    -- One clock reading, after started_at even in the transaction that set
    -- it, for both.
    completed_at = clock.at,
    updated_at = clock.at
FROM (SELECT clock_timestamp() AS at) clock
WHERE id = @id::bigint
  AND status = 'running'
  AND step_seq = @step_seq::bigint
RETURNING agent_execution.*;

-- name: ExecutionFail :one
-- Fails a live execution from outside its step (a step job that ran out of
-- attempts). A waiting one's timeout job is deleted in the same statement.
WITH timer AS (
    -- The wait's timeout job goes with the wait, unless a worker has taken
    -- it: that one finds the wait over and does nothing.
    DELETE FROM river_job j
    WHERE j.id = (SELECT w.wait_timeout_job_id FROM agent_execution w
                  WHERE w.id = @id::bigint AND w.status = 'waiting'
                    AND (sqlc.narg('step_seq')::bigint IS NULL OR w.step_seq = sqlc.narg('step_seq')::bigint))
      AND j.state IN ('available', 'retryable', 'scheduled')
)
UPDATE agent_execution
SET status = 'failed',
    result_type = 'failure',
    error_code = @error_code::text,
    error_message = @error_message::text,
    failed_node_id = current_node_id,
    waiting_for = NULL,
    wait_timeout_job_id = NULL,
    step_seq = step_seq + 1,
    completed_at = clock.at,
    updated_at = clock.at
FROM (SELECT clock_timestamp() AS at) clock
WHERE id = @id::bigint
  AND status IN ('pending', 'running', 'waiting')
  AND (sqlc.narg('step_seq')::bigint IS NULL OR step_seq = sqlc.narg('step_seq')::bigint)
RETURNING agent_execution.*;

-- name: ExecutionCancel :one
-- Cancels a live execution. A waiting one's timeout job is deleted in the
-- same statement.
WITH timer AS (
    -- The wait's timeout job goes with the wait, unless a worker has taken
    -- it: that one finds the wait over and does nothing.
    DELETE FROM river_job j
    WHERE j.id = (SELECT w.wait_timeout_job_id FROM agent_execution w
                  WHERE w.id = @id::bigint AND w.status = 'waiting')
      AND j.state IN ('available', 'retryable', 'scheduled')
)
UPDATE agent_execution
SET status = 'cancelled',
    result_type = 'cancelled',
    result_summary = @result_summary::text,
    cancelled_by = @cancelled_by::text,
    cancel_reason = sqlc.narg('cancel_reason')::text,
    waiting_for = NULL,
    wait_timeout_job_id = NULL,
    step_seq = step_seq + 1,
    completed_at = clock.at,
    updated_at = clock.at
FROM (SELECT clock_timestamp() AS at) clock
WHERE id = @id::bigint
  AND status IN ('pending', 'running', 'waiting')
RETURNING agent_execution.*;

-- name: ExecutionAncestors :many
-- The execution and its ancestors, nearest first, with whether each lets a
-- lock pass down to it.
WITH RECURSIVE chain AS (
    SELECT e.id, e.parent_execution_id, e.can_inherit_lock, 0 AS depth
    FROM agent_execution e
    WHERE e.id = @id::bigint
    UNION ALL
    SELECT p.id, p.parent_execution_id, p.can_inherit_lock, c.depth + 1
    FROM agent_execution p
    JOIN chain c ON p.id = c.parent_execution_id
    WHERE c.depth < 64
)
SELECT chain.id, chain.can_inherit_lock, chain.depth::integer AS depth
FROM chain
ORDER BY chain.depth;

-- name: ExecutionSetLockInheritedFrom :exec
UPDATE agent_execution
SET lock_inherited_from = @lock_inherited_from::bigint,
    updated_at = clock_timestamp()
WHERE id = @id::bigint;

-- name: ExecutionToolRetry :one
-- Records a failed, retryable tool call of the current task node: bumps the
-- per-node attempt counter while keeping step_seq, so the snoozed step job
-- that retries the call still matches the checkpoint. Only the caller that
-- saw node_attempt at @node_attempt wins.
UPDATE agent_execution
SET node_attempt = node_attempt + 1,
    updated_at = clock_timestamp()
WHERE id = @id::bigint
  AND status = 'running'
  AND step_seq = @step_seq::bigint
  AND node_attempt = @node_attempt::integer
RETURNING *;

-- name: ExecutionLockFamily :many
-- The executions that talk as one voice with @id on a thread: up through its
-- ancestors while each link lets the lock pass down (can_inherit_lock), then
-- down from that root through every inheriting child. Shallowest first.
WITH RECURSIVE up AS (
    SELECT e.id, e.parent_execution_id, e.can_inherit_lock, 0 AS height
    FROM agent_execution e
    WHERE e.id = @id::bigint
    UNION ALL
    SELECT p.id, p.parent_execution_id, p.can_inherit_lock, up.height + 1
    FROM agent_execution p
    JOIN up ON p.id = up.parent_execution_id
    WHERE up.can_inherit_lock AND up.height < 64
),
down AS (
    SELECT e.id, e.parent_execution_id, e.status, 0 AS depth
    FROM agent_execution e
    WHERE e.id = (SELECT up.id FROM up ORDER BY up.height DESC LIMIT 1)
    UNION ALL
    SELECT c.id, c.parent_execution_id, c.status, down.depth + 1
    FROM agent_execution c
    JOIN down ON c.parent_execution_id = down.id
    WHERE c.can_inherit_lock AND down.depth < 64
)
SELECT down.id, down.parent_execution_id, down.status, down.depth::integer AS depth
FROM down
ORDER BY down.depth, down.id;

-- name: ExecutionSetNodeAttempt :exec
-- Carries the per-node attempt counter over a checkpoint at the same node: a
-- task whose answer steered messages discarded runs again with the next
-- attempt number, so its call has a new idempotency key.
UPDATE agent_execution
SET node_attempt = @node_attempt::integer,
    updated_at = clock_timestamp()
WHERE id = @id::bigint;

-- name: ExecutionListStranded :many
-- Running executions whose row has not changed for @idle_seconds and that no
-- live execution.step job (jobs.StepArgs: args {"execution_id": …}) will
-- advance: their step job was lost (deleted, or discarded without failing
-- them). The step reaper enqueues their step again or fails them. Pending
-- and waiting executions need no step job and are not listed. The live
-- jobs are read once, through River's index on state, and anti-joined: a
-- lookup per running execution would cost a GIN probe each.
SELECT e.id, e.thread_id, e.step_seq
FROM agent_execution e
WHERE e.status = 'running'
  AND e.updated_at < now() - make_interval(secs => @idle_seconds::double precision)
  AND NOT EXISTS (
      SELECT 1 FROM river_job j
      WHERE j.kind = 'execution.step'
        AND j.state IN ('available', 'pending', 'retryable', 'running', 'scheduled')
        AND (j.args->>'execution_id')::bigint = e.id)
ORDER BY e.id
LIMIT @max::integer;

-- name: ExecutionHasLiveStep :one
-- Whether an execution.step job of the execution is waiting to run or
-- running. Run it after taking the execution's row, so that it sees every
-- job committed with the row's last change.
SELECT EXISTS (
    SELECT 1 FROM river_job j
    WHERE j.kind = 'execution.step'
      AND j.state IN ('available', 'pending', 'retryable', 'running', 'scheduled')
      AND j.args @> jsonb_build_object('execution_id', @id::bigint))::boolean AS live;

-- name: ExecutionMarkRecovered :one
-- Counts a recovery of a running execution whose step job was lost and
-- bumps its step_seq, so that the step job enqueued with the new value is
-- the only one that may advance it.
UPDATE agent_execution
SET step_recoveries = step_recoveries + 1,
    step_seq = step_seq + 1,
    updated_at = clock_timestamp()
WHERE id = @id::bigint
  AND status = 'running'
  AND step_seq = @step_seq::bigint
RETURNING *;

-- name: ExecutionDepth :one
-- How many ancestors an execution has (0 for one started by the API),
-- counted up its parent chain, and no further than @max: the depth a child
-- it triggers would have, less one.
WITH RECURSIVE chain (parent_execution_id, depth) AS (
    SELECT e.parent_execution_id, 0
    FROM agent_execution e
    WHERE e.id = @id::bigint
    UNION ALL
    SELECT a.parent_execution_id, c.depth + 1
    FROM chain c
    JOIN agent_execution a ON a.id = c.parent_execution_id
    WHERE c.depth < @max::integer
)
SELECT max(depth)::integer AS depth FROM chain;
