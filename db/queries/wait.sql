-- name: ExecutionEnterWait :one
-- running → waiting, from the step that reached a wait node, naming the
-- wait's timeout job (enqueued just before, for wait_seq + 1).
UPDATE agent_execution
SET status = 'waiting',
    current_node_id = @current_node_id::text,
    current_step_started_at = now(),
    variables = @variables::jsonb,
    node_path = @node_path::text[],
    steps_completed = @steps_completed::integer,
    total_steps = @total_steps::integer,
    waiting_for = @waiting_for::text,
    waiting_until = @waiting_until::timestamptz,
    waiting_data = @waiting_data::jsonb,
    wait_timeout_job_id = @wait_timeout_job_id::bigint,
    wait_seq = wait_seq + 1,
    step_seq = step_seq + 1,
    updated_at = clock_timestamp()
WHERE id = @id::bigint
  AND status = 'running'
  AND step_seq = @step_seq::bigint
RETURNING *;

-- name: ExecutionLockWaiting :one
-- Takes a waiting execution only while it still waits in the wait wait_seq
-- names.
SELECT *
FROM agent_execution
WHERE id = @id::bigint
  AND status = 'waiting'
  AND wait_seq = @wait_seq::integer
FOR UPDATE;

-- name: ExecutionLockByExecutionID :one
SELECT *
FROM agent_execution
WHERE tenant_id = @tenant_id::text
  AND execution_id = @execution_id::text
FOR UPDATE;

-- name: ExecutionLockWaitingMatches :many
-- Waiting executions of a tenant waiting for one kind of event, optionally on
-- one thread and for one event_id parameter, locked by id.
SELECT sqlc.embed(e), (t.active_execution_id IS NOT DISTINCT FROM e.id)::boolean AS holds_lock
FROM agent_execution e
JOIN thread t ON t.id = e.thread_id
WHERE e.tenant_id = @tenant_id::text
  AND e.status = 'waiting'
  AND e.waiting_for = @waiting_for::text
  AND (sqlc.narg('thread_key')::text IS NULL OR t.thread_id = sqlc.narg('thread_key')::text)
  AND (sqlc.narg('event_key')::text IS NULL OR e.waiting_data ->> 'event_id' = sqlc.narg('event_key')::text)
ORDER BY e.id
LIMIT @max::integer
FOR UPDATE OF e;

-- name: ExecutionResume :one
-- waiting → running at the wait node's next node. room says whether the
-- run may go on without a slot (engine/lane.go, "Runs that never hold a
-- slot"): with @lane_limit above 0, its lane has fewer than @lane_limit
-- running and no admissible pending run, read without the lane row's lock,
-- as ExecutionReserve reads it (in the statement's snapshot, where the run
-- is still waiting); with 0, false and nothing read. With @draw_message,
-- message_id is an id for the first message its next nodes send
-- (MessageInsertOutbound), drawn here instead of by MessageIDNext, which
-- would cost a round trip; else 0. The wait's timeout job is deleted in the
-- same statement.
WITH timer AS (
    -- The wait's timeout job goes with the wait, unless a worker has taken
    -- it: that one finds the wait over and does nothing.
    DELETE FROM river_job j
    WHERE j.id = (SELECT w.wait_timeout_job_id FROM agent_execution w
                  WHERE w.id = @id::bigint AND w.status = 'waiting' AND w.wait_seq = @wait_seq::integer)
      AND j.state IN ('available', 'retryable', 'scheduled')
)
UPDATE agent_execution AS e
SET status = 'running',
    current_node_id = @current_node_id::text,
    current_step_started_at = now(),
    variables = @variables::jsonb,
    total_steps = @total_steps::integer,
    event_data = sqlc.narg('event_data')::jsonb,
    waiting_for = NULL,
    waiting_until = NULL,
    waiting_data = NULL,
    wait_timeout_job_id = NULL,
    step_seq = e.step_seq + 1,
    updated_at = clock_timestamp()
WHERE e.id = @id::bigint
  AND e.status = 'waiting'
  AND e.wait_seq = @wait_seq::integer
RETURNING sqlc.embed(e),
    (CASE WHEN @lane_limit::integer > 0 THEN
        (SELECT count(*) FROM (SELECT 1 FROM agent_execution r
                               WHERE r.lane = e.lane AND r.status = 'running'
                               LIMIT @lane_limit::integer) n) < @lane_limit::integer
        AND NOT EXISTS (SELECT 1 FROM agent_execution p
                        WHERE p.lane = e.lane AND p.status = 'pending' AND p.queued_at <= clock_timestamp())
     ELSE false END)::boolean AS room,
    (CASE WHEN @draw_message::boolean THEN nextval(pg_get_serial_sequence('thread_message', 'id')) ELSE 0 END)::bigint AS message_id;

-- name: ExecutionSetWaitingData :one
-- Records progress inside a wait (a partial document upload).
UPDATE agent_execution
SET waiting_data = @waiting_data::jsonb,
    updated_at = clock_timestamp()
WHERE id = @id::bigint
  AND status = 'waiting'
  AND wait_seq = @wait_seq::integer
RETURNING *;

-- name: ExecutionRewait :one
-- Waits again after a timeout (onTimeout retry): a new wait_seq, so the
-- old wait's timeout job does nothing, and the new wait's timeout job,
-- enqueued just before for wait_seq + 1. The old job is the one running
-- this; were it not, it would be deleted.
WITH timer AS (
    -- The wait's timeout job goes with the wait, unless a worker has taken
    -- it: that one finds the wait over and does nothing.
    DELETE FROM river_job j
    WHERE j.id = (SELECT w.wait_timeout_job_id FROM agent_execution w
                  WHERE w.id = @id::bigint AND w.status = 'waiting' AND w.wait_seq = @wait_seq::integer)
      AND j.state IN ('available', 'retryable', 'scheduled')
)
UPDATE agent_execution
SET waiting_until = @waiting_until::timestamptz,
    waiting_data = @waiting_data::jsonb,
    wait_timeout_job_id = @wait_timeout_job_id::bigint,
    variables = @variables::jsonb,
    wait_seq = wait_seq + 1,
    step_seq = step_seq + 1,
    updated_at = clock_timestamp()
WHERE id = @id::bigint
  AND status = 'waiting'
  AND wait_seq = @wait_seq::integer
RETURNING *;

-- name: ExecutionEndWait :one
-- Ends a waiting execution (timeout): the wait_seq must still be current.
-- The wait's timeout job is the one running this; were it not, it would be
-- deleted.
WITH timer AS (
    -- The wait's timeout job goes with the wait, unless a worker has taken
    -- it: that one finds the wait over and does nothing.
    DELETE FROM river_job j
    WHERE j.id = (SELECT w.wait_timeout_job_id FROM agent_execution w
                  WHERE w.id = @id::bigint AND w.status = 'waiting' AND w.wait_seq = @wait_seq::integer)
      AND j.state IN ('available', 'retryable', 'scheduled')
)
UPDATE agent_execution
SET status = @status::execution_status,
    variables = @variables::jsonb,
    result_type = @result_type::text,
    result_summary = sqlc.narg('result_summary')::text,
    error_code = sqlc.narg('error_code')::text,
    error_message = sqlc.narg('error_message')::text,
    failed_node_id = sqlc.narg('failed_node_id')::text,
    waiting_for = NULL,
    waiting_until = NULL,
    waiting_data = NULL,
    wait_timeout_job_id = NULL,
    step_seq = step_seq + 1,
    completed_at = clock.at,
    updated_at = clock.at
FROM (SELECT clock_timestamp() AS at) clock
WHERE id = @id::bigint
  AND status = 'waiting'
  AND wait_seq = @wait_seq::integer
RETURNING agent_execution.*;

-- name: InboundEventClaim :one
-- Claims an event_id; a concurrent claim waits for this transaction and
-- then finds the row taken.
INSERT INTO inbound_event (tenant_id, event_id, event_type, execution_id, thread_id, data)
VALUES (@tenant_id::text, @event_id::text, @event_type::text, sqlc.narg('execution_id')::text,
        sqlc.narg('thread_id')::text, @data::jsonb)
ON CONFLICT DO NOTHING
RETURNING created_at;

-- name: InboundEventGet :one
SELECT *
FROM inbound_event
WHERE tenant_id = @tenant_id::text
  AND event_id = @event_id::text;

-- name: InboundEventSetResponse :exec
UPDATE inbound_event
SET response = @response::jsonb
WHERE tenant_id = @tenant_id::text
  AND event_id = @event_id::text;

-- name: InboundEventBuffer :exec
-- Keeps an event for a running execution until it waits for its type.
UPDATE inbound_event
SET buffered_for = @execution_id::bigint
WHERE tenant_id = @tenant_id::text
  AND event_id = @event_id::text;

-- name: InboundEventBufferedFor :many
-- The events kept for an execution that a wait of these types can take,
-- oldest first.
SELECT *
FROM inbound_event
WHERE buffered_for = @execution_id::bigint
  AND applied_at IS NULL
  AND event_type = ANY(@event_types::text[])
ORDER BY created_at, event_id
FOR UPDATE;

-- name: InboundEventMarkApplied :exec
UPDATE inbound_event
SET applied_at = now()
WHERE tenant_id = @tenant_id::text
  AND event_id = @event_id::text;
