-- name: MessageIDNext :one
-- An id for an outbound message, drawn before it is stored so that storing
-- it waits for no answer (MessageInsertOutbound).
SELECT nextval(pg_get_serial_sequence('thread_message', 'id'))::bigint AS id;

-- name: MessageInsertOutbound :exec
-- Stores an outbound message under an id drawn for it (MessageIDNext, or
-- ExecutionReserve's message_id): pending (accepted for delivery, with its
-- place in the outbox) when its execution holds the thread, queued
-- otherwise. Nothing waits for its answer: it goes with the transaction's
-- next statement.
INSERT INTO thread_message (id, tenant_id, thread_id, direction, execution_id, node_id, step_seq, body, status, delivery_seq)
VALUES (
    @id::bigint, @tenant_id::text, @thread_id::bigint, 'out', @execution_id::bigint, @node_id::text, @step_seq::bigint, @body::text,
    CASE WHEN @queued::boolean THEN 'queued' ELSE 'pending' END,
    CASE WHEN @queued::boolean THEN NULL ELSE nextval('thread_message_delivery_seq') END
);

-- name: OutboxNext :many
-- The next pending outbound messages of a thread, in outbox order, for the
-- session that holds its outbox lock (outbox_claim reads the first ones),
-- stamped with the token of its claim (outbox_take, migration 00031).
SELECT * FROM outbox_take(@thread_id::bigint, @max::integer, @epoch::bigint);

-- name: OutboxClaim :many
-- Takes a thread's outbox lock and reads its first pending messages, in one
-- round trip (migrations 00013 and 00031): rows mean the lock is held. The
-- messages carry the claim's fencing token, drawn here (claim_epoch).
SELECT * FROM outbox_claim(@thread_id::bigint, @key::bigint, @max::integer, nextval('outbox_claim_epoch'));

-- name: OutboxHasPending :one
-- Whether a thread has outbound messages waiting for delivery.
SELECT EXISTS (SELECT 1 FROM thread_message
               WHERE thread_id = @thread_id::bigint AND direction = 'out' AND status = 'pending')::boolean AS pending;

-- name: OutboxClaimMany :many
-- OutboxClaim for many threads in one round trip (migration 00027), under
-- one fencing token: the threads that have rows are those whose outbox lock
-- this session now holds.
SELECT * FROM outbox_claim_many(@thread_ids::bigint[], @keys::bigint[], @max::integer, nextval('outbox_claim_epoch'));

-- name: OutboxFinishMany :one
-- Records the last messages of a batch delivered, those that still carry
-- the batch's token @epoch, gives the batch's outbox locks up and returns
-- the threads that still have messages pending (outbox_finish_many,
-- migrations 00027, 00029 and 00031); DeliverThread uses it for one thread.
-- The messages belong to threads of thread_ids.
SELECT outbox_finish_many(@thread_ids::bigint[], @keys::bigint[], @message_ids::bigint[],
                          @thread_keys::text[], @execution_keys::text[], @channels::text[], @epoch::bigint)::bigint[] AS more;

-- name: OutboxReapLock :one
-- Whether this transaction may reap stranded outboxes: one reaper lists
-- and enqueues at a time, so that two reapers never both find a thread
-- without a job and both give it one.
SELECT pg_try_advisory_xact_lock(@key::bigint)::boolean AS won;

-- name: OutboxListStranded :many
-- Threads with a message pending delivery for over @idle_seconds and no
-- live message.deliver job (jobs.DeliverArgs: args {"thread_id": …}): the
-- process that committed the message died before delivering it (prompt
-- delivery inserts no job; engine/deliver_prompt.go). The outbox reaper
-- enqueues their delivery. The pending messages are few and read through
-- the outbox index; the live jobs are read once, through River's index on
-- state, and anti-joined.
SELECT DISTINCT m.thread_id
FROM thread_message m
WHERE m.status = 'pending'
  AND m.created_at < now() - make_interval(secs => @idle_seconds::double precision)
  AND NOT EXISTS (
      SELECT 1 FROM river_job j
      WHERE j.kind = 'message.deliver'
        AND j.state IN ('available', 'pending', 'retryable', 'running', 'scheduled')
        AND (j.args->>'thread_id')::bigint = m.thread_id)
ORDER BY m.thread_id
LIMIT @max::integer;

-- name: MessageRecordDelivered :one
-- Marks a message delivered and writes its thread.message_delivered event,
-- in one statement, if it still carries the fencing token @epoch of the
-- claim that took it (migration 00031), and says whether it did: false
-- means another deliverer has claimed the message since, or recorded it.
WITH delivered AS (
    UPDATE thread_message
    SET status = 'delivered',
        delivered_at = now(),
        attempts = attempts + 1,
        last_error = NULL
    WHERE id = @id::bigint
      AND status = 'pending'
      AND claim_epoch = @epoch::bigint
    RETURNING thread_message.id, thread_message.tenant_id, thread_message.execution_id, thread_message.node_id
), events AS (
    INSERT INTO execution_event (tenant_id, execution_id, action, level, message, node_id, payload)
    SELECT d.tenant_id, d.execution_id, 'thread.message_delivered', 'info', 'Message ' || d.id || ' delivered', d.node_id,
           jsonb_build_object('thread_id', @thread_key::text, 'execution_id', @execution_key::text,
                              'message_id', d.id::text, 'channel', @channel::text)
    FROM delivered d
    WHERE d.execution_id IS NOT NULL
)
SELECT EXISTS (SELECT 1 FROM delivered)::boolean AS recorded;

-- name: MessageFirstQueued :one
SELECT *
FROM thread_message
WHERE thread_id = @thread_id::bigint
  AND status = 'queued'
ORDER BY id
LIMIT 1;

-- name: MessageCountQueued :one
SELECT count(*)::integer FROM thread_message WHERE thread_id = @thread_id::bigint AND status = 'queued';

-- name: MessageReleaseQueued :execrows
-- Moves the queued messages of a family of executions (one voice) on a
-- thread into the outbox, behind everything already there, in the order
-- they were written: each draws its delivery_seq, the delivery sequence a
-- receiver sees (migration 00031), in id order.
WITH queued AS MATERIALIZED (
    SELECT m.id FROM thread_message m
    WHERE m.thread_id = @thread_id::bigint
      AND m.execution_id = ANY(@execution_ids::bigint[])
      AND m.status = 'queued'
    ORDER BY m.id
    FOR UPDATE
), numbered AS MATERIALIZED (
    SELECT q.id, nextval('thread_message_delivery_seq') AS value FROM queued q
)
UPDATE thread_message
SET status = 'pending',
    delivery_seq = numbered.value
FROM numbered
WHERE thread_message.id = numbered.id;

-- name: MessageDropQueued :execrows
UPDATE thread_message
SET status = 'dropped'
WHERE execution_id = @execution_id::bigint
  AND status = 'queued';

-- name: MessageRecordFailedAttempt :exec
-- Counts a refused delivery of a message, with its error, if it still
-- carries the fencing token @epoch of the claim that took it.
UPDATE thread_message
SET attempts = attempts + 1,
    last_error = @last_error::text
WHERE id = @id::bigint
  AND claim_epoch = @epoch::bigint;

-- name: MessageListByExecution :many
SELECT * FROM thread_message WHERE execution_id = @execution_id::bigint ORDER BY id;

-- name: MessageListByThread :many
SELECT m.*, x.execution_id AS execution_key
FROM thread_message m
LEFT JOIN agent_execution x ON x.id = m.execution_id
WHERE m.thread_id = @thread_id::bigint
  AND (sqlc.narg('direction')::text IS NULL OR m.direction = sqlc.narg('direction')::text)
  AND (sqlc.narg('status')::text IS NULL OR m.status = sqlc.narg('status')::text)
  AND m.id > @after_id::bigint
ORDER BY m.id
LIMIT @max::integer;

-- name: MessageTimeline :many
-- A thread's outbound messages with their senders and whether (and when)
-- each was queued for the lock.
SELECT m.id, x.workflow_id, x.execution_id, m.body, m.status, m.created_at, m.delivered_at, q.queued_at, q.was_queued
FROM thread_message m
JOIN thread t ON t.id = m.thread_id
JOIN agent_execution x ON x.id = m.execution_id
LEFT JOIN LATERAL (
    SELECT coalesce(max(e.created_at), m.created_at)::timestamptz AS queued_at, (count(*) > 0)::boolean AS was_queued
    FROM execution_event e
    WHERE e.execution_id = m.execution_id
      AND e.action = 'thread.message_queued'
      AND e.payload ->> 'message_id' = m.id::text
) q ON true
WHERE t.tenant_id = @tenant_id::text AND t.thread_id = @thread_id::text AND m.direction = 'out'
ORDER BY m.id;
