-- +goose Up
-- A thread's outbox is delivered by one session at a time, which holds the
-- advisory lock outboxLockBase | thread id (engine/channel.go). Taking the
-- lock and reading the outbox must be two queries: a single statement reads
-- with a snapshot taken before it locks, and could see a message as pending
-- that the previous holder delivered, committed and unlocked in between.
-- These functions put each pair in one round trip: a VOLATILE PL/pgSQL
-- function takes a new snapshot for every query it runs.

-- outbox_message: pending outbound messages with what a channel needs to
-- address them; a thread's outbox order is (delivery_seq, id).
CREATE VIEW outbox_message AS
SELECT m.id, m.tenant_id, m.execution_id, m.node_id, m.body, m.created_at,
       t.thread_id AS thread_key, t.channel, t.contact, coalesce(x.execution_id, '')::text AS execution_key,
       m.thread_id, m.delivery_seq
FROM thread_message m
JOIN thread t ON t.id = m.thread_id
LEFT JOIN agent_execution x ON x.id = m.execution_id
WHERE m.direction = 'out'
  AND m.status = 'pending';

-- outbox_claim: takes the thread's outbox lock and returns its first
-- pending messages. Rows mean the caller holds the lock and must call
-- outbox_release; no rows mean it does not: another session holds the
-- lock, or the outbox is empty (checked again after unlocking, so that a
-- deliverer that gave up meanwhile is not left without one).
-- +goose StatementBegin
CREATE FUNCTION outbox_claim(p_thread_id bigint, p_key bigint, p_max integer)
RETURNS SETOF outbox_message
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    LOOP
        IF NOT pg_try_advisory_lock(p_key) THEN
            RETURN;
        END IF;
        RETURN QUERY SELECT o.* FROM outbox_message o
                     WHERE o.thread_id = p_thread_id
                     ORDER BY o.delivery_seq, o.id
                     LIMIT p_max;
        IF FOUND THEN
            RETURN;
        END IF;
        PERFORM pg_advisory_unlock(p_key);
        IF NOT EXISTS (SELECT 1 FROM thread_message m
                       WHERE m.thread_id = p_thread_id AND m.direction = 'out' AND m.status = 'pending') THEN
            RETURN;
        END IF;
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- outbox_release: gives the lock up, then says whether pending messages
-- are left (one arrived while the lock was held: its own deliverer gave up).
-- +goose StatementBegin
CREATE FUNCTION outbox_release(p_thread_id bigint, p_key bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    more boolean;
BEGIN
    PERFORM pg_advisory_unlock(p_key);
    SELECT EXISTS (SELECT 1 FROM thread_message m
                   WHERE m.thread_id = p_thread_id AND m.direction = 'out' AND m.status = 'pending')
    INTO more;
    RETURN more;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION outbox_release(bigint, bigint);
DROP FUNCTION outbox_claim(bigint, bigint, integer);
DROP VIEW outbox_message;
