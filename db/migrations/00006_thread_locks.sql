-- +goose Up
-- Thread locks: one execution talks in a thread at a time; the
-- others' messages queue in FIFO order and a drain delivers them when the
-- lock is released.

-- The execution a lock was inherited from, handed the lock back when this
-- execution ends (a chain of these is the stack of a grandchild).
ALTER TABLE agent_execution ADD COLUMN lock_inherited_from bigint REFERENCES agent_execution (id);

ALTER TABLE thread
    -- A thread.drain job is enqueued (set and cleared under the row lock).
    ADD COLUMN drain_pending       boolean NOT NULL DEFAULT false,
    ADD COLUMN drain_pending_since timestamptz,
    -- Set by cleanup_stale_locks() in SQL; the lock reaper turns it into a drain.
    ADD COLUMN drain_requested     boolean NOT NULL DEFAULT false;

-- delivery_seq orders a thread's outbox: it is taken under the thread's row
-- lock when a message becomes pending, so it follows the lock's order rather
-- than the order in which messages were first written.
CREATE SEQUENCE thread_message_delivery_seq;
ALTER TABLE thread_message ADD COLUMN delivery_seq bigint;
UPDATE thread_message SET delivery_seq = nextval('thread_message_delivery_seq') WHERE status = 'pending';

DROP INDEX thread_message_pending_idx;
CREATE INDEX thread_message_outbox_idx ON thread_message (thread_id, delivery_seq) WHERE status = 'pending';
CREATE INDEX thread_message_queued_idx ON thread_message (thread_id, id) WHERE status = 'queued';
CREATE INDEX thread_active_lock_idx ON thread (execution_locked_at) WHERE active_execution_id IS NOT NULL;
CREATE INDEX thread_drain_requested_idx ON thread (id) WHERE drain_requested OR drain_pending;

CREATE VIEW monitor_active_locks AS
SELECT t.tenant_id,
       t.thread_id,
       x.execution_id AS active_execution_id,
       t.execution_locked_at,
       round((extract(epoch FROM now() - t.execution_locked_at) / 60)::numeric, 2)::double precision AS lock_minutes
FROM thread t
JOIN agent_execution x ON x.id = t.active_execution_id
WHERE t.active_execution_id IS NOT NULL;

-- Locks idle for longer than the lock timeout (10 minutes unless Baton is
-- configured otherwise).
CREATE VIEW monitor_stale_locks AS
SELECT *
FROM monitor_active_locks
WHERE execution_locked_at < now() - interval '10 minutes';

-- cleanup_stale_locks clears locks idle for longer than lock_timeout, and
-- orphan locks whose holder has ended, and flags their threads; Baton's lock
-- reaper turns each flag into a drain of the thread's queued messages.
-- +goose StatementBegin
CREATE FUNCTION cleanup_stale_locks(lock_timeout interval DEFAULT interval '10 minutes')
RETURNS TABLE (tenant_id text, thread_id text)
LANGUAGE sql AS $$
    UPDATE thread t
    SET active_execution_id = NULL,
        execution_locked_at = NULL,
        drain_requested = true,
        updated_at = now()
    WHERE t.active_execution_id IS NOT NULL
      AND (t.execution_locked_at < now() - lock_timeout
           OR EXISTS (SELECT 1 FROM agent_execution x
                      WHERE x.id = t.active_execution_id
                        AND x.status IN ('completed', 'failed', 'timeout', 'cancelled')))
    RETURNING t.tenant_id, t.thread_id;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION cleanup_stale_locks(interval);
DROP VIEW monitor_stale_locks;
DROP VIEW monitor_active_locks;
DROP INDEX thread_drain_requested_idx;
DROP INDEX thread_active_lock_idx;
DROP INDEX thread_message_queued_idx;
DROP INDEX thread_message_outbox_idx;
CREATE INDEX thread_message_pending_idx ON thread_message (thread_id, id) WHERE status = 'pending';
ALTER TABLE thread_message DROP COLUMN delivery_seq;
DROP SEQUENCE thread_message_delivery_seq;
ALTER TABLE thread DROP COLUMN drain_requested, DROP COLUMN drain_pending_since, DROP COLUMN drain_pending;
ALTER TABLE agent_execution DROP COLUMN lock_inherited_from;
