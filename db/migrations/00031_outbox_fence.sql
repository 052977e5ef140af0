-- Fenced delivery.
--
-- A thread's outbox is delivered by the session that holds its advisory
-- lock (engine/channel.go). The lock ends with the session: a failover, a
-- network cut or pg_terminate_backend frees it while the holder's channel
-- call may still be in flight, and another deliverer takes the outbox and
-- sends the same messages. Two things make that harmless.
--
-- Fencing tokens. Each claim draws a token from outbox_claim_epoch and
-- stamps it on every message it takes (claim_epoch). A claim that takes a
-- message over stamps its own, so every write a holder makes about a
-- message after its channel call (recorded delivered, a failed attempt)
-- requires the message still carry the holder's token: a stale holder's
-- late write changes nothing. The token lives on the message, the row the
-- write changes, so the check and the write are one row's update: a claim
-- and a stale write that meet wait for each other on that row, whichever
-- comes second sees what the first did.
--
-- Delivery sequence. delivery_seq, drawn when a message enters the outbox
-- under its thread's row lock, is the thread's outbox order, and every
-- message now has one of its own (a family's queued messages released
-- together used to share one): it rises with every message a thread
-- delivers, so a receiver that keeps the highest it has seen and drops
-- anything at or below it sees each message once, in order. The messages
-- pending now are numbered again so that none shares a number.

-- +goose Up
CREATE SEQUENCE outbox_claim_epoch;
ALTER TABLE thread_message ADD COLUMN claim_epoch bigint;

WITH ordered AS MATERIALIZED (
    SELECT m.id FROM thread_message m
    WHERE m.direction = 'out' AND m.status = 'pending'
    ORDER BY m.delivery_seq, m.id
), numbered AS MATERIALIZED (
    SELECT o.id, nextval('thread_message_delivery_seq') AS seq FROM ordered o
)
UPDATE thread_message m SET delivery_seq = n.seq FROM numbered n WHERE m.id = n.id;

DROP FUNCTION outbox_claim_many(bigint[], bigint[], integer);
DROP FUNCTION outbox_claim(bigint, bigint, integer);
DROP FUNCTION outbox_finish_many(bigint[], bigint[], bigint[], text[], text[], text[]);

CREATE OR REPLACE VIEW outbox_message AS
SELECT m.id, m.tenant_id, m.execution_id, m.node_id, m.body, m.created_at,
       t.thread_id AS thread_key, t.channel, t.contact, coalesce(x.execution_id, '')::text AS execution_key,
       m.thread_id, m.delivery_seq, m.claim_epoch
FROM thread_message m
JOIN thread t ON t.id = m.thread_id
LEFT JOIN agent_execution x ON x.id = m.execution_id
WHERE m.direction = 'out'
  AND m.status = 'pending';

-- +goose StatementBegin
-- outbox_take: the thread's first p_max pending messages, in outbox order,
-- stamped with the token p_epoch, for the session that holds its outbox
-- lock. The messages are locked as they are read: one whose update by the
-- previous holder has not committed yet (it gives the lock up before its
-- transaction commits) is waited for and skipped once delivered.
CREATE FUNCTION outbox_take(p_thread_id bigint, p_max integer, p_epoch bigint)
RETURNS SETOF outbox_message
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN QUERY
    WITH picked AS (
        SELECT m.id FROM thread_message m
        WHERE m.thread_id = p_thread_id AND m.direction = 'out' AND m.status = 'pending'
        ORDER BY m.delivery_seq, m.id
        LIMIT p_max
        FOR UPDATE
    ), taken AS (
        UPDATE thread_message m SET claim_epoch = p_epoch
        FROM picked p
        WHERE m.id = p.id
        RETURNING m.id, m.tenant_id, m.execution_id, m.node_id, m.body, m.created_at,
                  m.thread_id, m.delivery_seq, m.claim_epoch
    )
    SELECT k.id, k.tenant_id, k.execution_id, k.node_id, k.body, k.created_at,
           t.thread_id, t.channel, t.contact, coalesce(x.execution_id, '')::text,
           k.thread_id, k.delivery_seq, k.claim_epoch
    FROM taken k
    JOIN thread t ON t.id = k.thread_id
    LEFT JOIN agent_execution x ON x.id = k.execution_id
    ORDER BY k.delivery_seq, k.id;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- outbox_claim: takes the thread's outbox lock and its first pending
-- messages (outbox_take, token p_epoch). Rows mean the caller holds the
-- lock; none mean another session holds it, or nothing is pending (checked
-- again after unlocking, so that a deliverer that gave up meanwhile is not
-- left without one).
CREATE FUNCTION outbox_claim(p_thread_id bigint, p_key bigint, p_max integer, p_epoch bigint)
RETURNS SETOF outbox_message
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    LOOP
        IF NOT pg_try_advisory_lock(p_key) THEN
            RETURN;
        END IF;
        RETURN QUERY SELECT * FROM outbox_take(p_thread_id, p_max, p_epoch);
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

-- +goose StatementBegin
-- outbox_claim_many: outbox_claim for each thread, p_keys[i] being the
-- outbox lock of p_thread_ids[i], all under the one token p_epoch.
CREATE FUNCTION outbox_claim_many(p_thread_ids bigint[], p_keys bigint[], p_max integer, p_epoch bigint)
RETURNS SETOF outbox_message
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_thread_ids, 1), 0) LOOP
        RETURN QUERY SELECT * FROM outbox_claim(p_thread_ids[i], p_keys[i], p_max, p_epoch);
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- outbox_finish_many: records the messages p_message_ids delivered (with
-- their threads' keys, executions' keys and channels, index for index),
-- each with its thread.message_delivered event, but only those that still
-- carry the token p_epoch of the claim that took them; gives the outbox
-- locks p_keys up; and returns the threads of p_thread_ids on which
-- messages are still pending. The messages of p_message_ids belong to
-- threads of p_thread_ids.
CREATE FUNCTION outbox_finish_many(p_thread_ids bigint[], p_keys bigint[], p_message_ids bigint[],
                                   p_thread_keys text[], p_execution_keys text[], p_channels text[],
                                   p_epoch bigint)
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    more bigint[];
BEGIN
    WITH delivered AS (
        UPDATE thread_message m
        SET status = 'delivered', delivered_at = now(), attempts = m.attempts + 1, last_error = NULL
        WHERE m.id = ANY (p_message_ids) AND m.thread_id = ANY (p_thread_ids) AND m.status = 'pending'
          AND m.claim_epoch = p_epoch
        RETURNING m.id, m.tenant_id, m.execution_id, m.node_id
    )
    INSERT INTO execution_event (tenant_id, execution_id, action, level, message, node_id, payload)
    SELECT d.tenant_id, d.execution_id, 'thread.message_delivered', 'info', 'Message ' || d.id || ' delivered', d.node_id,
           jsonb_build_object('thread_id', f.thread_key, 'execution_id', f.execution_key,
                              'message_id', d.id::text, 'channel', f.channel)
    FROM delivered d
    JOIN unnest(p_message_ids, p_thread_keys, p_execution_keys, p_channels) AS f(message_id, thread_key, execution_key, channel)
      ON f.message_id = d.id
    WHERE d.execution_id IS NOT NULL
    ORDER BY d.id;
    PERFORM pg_advisory_unlock(k) FROM unnest(p_keys) AS k;
    SELECT coalesce(array_agg(t.id), '{}') INTO more
    FROM unnest(p_thread_ids) AS t(id)
    WHERE (SELECT true FROM thread_message m
           WHERE m.thread_id = t.id AND m.direction = 'out' AND m.status = 'pending'
           LIMIT 1);
    RETURN more;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION outbox_finish_many(bigint[], bigint[], bigint[], text[], text[], text[], bigint);
DROP FUNCTION outbox_claim_many(bigint[], bigint[], integer, bigint);
DROP FUNCTION outbox_claim(bigint, bigint, integer, bigint);
DROP FUNCTION outbox_take(bigint, integer, bigint);
DROP VIEW outbox_message;
ALTER TABLE thread_message DROP COLUMN claim_epoch;
DROP SEQUENCE outbox_claim_epoch;

CREATE VIEW outbox_message AS
SELECT m.id, m.tenant_id, m.execution_id, m.node_id, m.body, m.created_at,
       t.thread_id AS thread_key, t.channel, t.contact, coalesce(x.execution_id, '')::text AS execution_key,
       m.thread_id, m.delivery_seq
FROM thread_message m
JOIN thread t ON t.id = m.thread_id
LEFT JOIN agent_execution x ON x.id = m.execution_id
WHERE m.direction = 'out'
  AND m.status = 'pending';

-- +goose StatementBegin
CREATE FUNCTION outbox_claim(p_thread_id bigint, p_key bigint, p_max integer)
RETURNS SETOF outbox_message
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    LOOP
        IF NOT pg_try_advisory_lock(p_key) THEN
            RETURN;
        END IF;
        RETURN QUERY SELECT m.id, m.tenant_id, m.execution_id, m.node_id, m.body, m.created_at,
                            t.thread_id, t.channel, t.contact, coalesce(x.execution_id, '')::text,
                            m.thread_id, m.delivery_seq
                     FROM thread_message m
                     JOIN thread t ON t.id = m.thread_id
                     LEFT JOIN agent_execution x ON x.id = m.execution_id
                     WHERE m.thread_id = p_thread_id AND m.direction = 'out' AND m.status = 'pending'
                     ORDER BY m.delivery_seq, m.id
                     LIMIT p_max
                     FOR UPDATE OF m;
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

-- +goose StatementBegin
CREATE FUNCTION outbox_claim_many(p_thread_ids bigint[], p_keys bigint[], p_max integer)
RETURNS SETOF outbox_message
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_thread_ids, 1), 0) LOOP
        RETURN QUERY SELECT * FROM outbox_claim(p_thread_ids[i], p_keys[i], p_max);
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION outbox_finish_many(p_thread_ids bigint[], p_keys bigint[], p_message_ids bigint[],
                                   p_thread_keys text[], p_execution_keys text[], p_channels text[])
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    more bigint[];
BEGIN
    WITH delivered AS (
        UPDATE thread_message m
        SET status = 'delivered', delivered_at = now(), attempts = m.attempts + 1, last_error = NULL
        WHERE m.id = ANY (p_message_ids) AND m.thread_id = ANY (p_thread_ids) AND m.status = 'pending'
        RETURNING m.id, m.tenant_id, m.execution_id, m.node_id
    )
    INSERT INTO execution_event (tenant_id, execution_id, action, level, message, node_id, payload)
    SELECT d.tenant_id, d.execution_id, 'thread.message_delivered', 'info', 'Message ' || d.id || ' delivered', d.node_id,
           jsonb_build_object('thread_id', f.thread_key, 'execution_id', f.execution_key,
                              'message_id', d.id::text, 'channel', f.channel)
    FROM delivered d
    JOIN unnest(p_message_ids, p_thread_keys, p_execution_keys, p_channels) AS f(message_id, thread_key, execution_key, channel)
      ON f.message_id = d.id
    WHERE d.execution_id IS NOT NULL
    ORDER BY d.id;
    PERFORM pg_advisory_unlock(k) FROM unnest(p_keys) AS k;
    SELECT coalesce(array_agg(t.id), '{}') INTO more
    FROM unnest(p_thread_ids) AS t(id)
    WHERE (SELECT true FROM thread_message m
           WHERE m.thread_id = t.id AND m.direction = 'out' AND m.status = 'pending'
           LIMIT 1);
    RETURN more;
END;
$$;
-- +goose StatementEnd
