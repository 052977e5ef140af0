-- +goose Up
-- outbox_finish: records a thread's last pending message delivered (with
-- its thread.message_delivered event, as MessageRecordDelivered does), gives
-- the outbox lock up, then says whether pending messages are left, in one
-- round trip and one transaction: the deliverer of a thread whose outbox it
-- empties commits once after the channel took the message instead of twice
-- (engine/channel.go). Each query runs with a new snapshot, so the check
-- after the unlock sees a message committed before it, as outbox_release's
-- does.
--
-- Because outbox_finish gives the lock up before its transaction commits,
-- the next holder could read the message it recorded as still pending.
-- outbox_claim therefore locks the messages it reads (FOR UPDATE OF the
-- message rows, released when the claim's statement ends): a read meets
-- such a message's uncommitted update, waits for its commit and skips it.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_claim(p_thread_id bigint, p_key bigint, p_max integer)
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
CREATE FUNCTION outbox_finish(p_thread_id bigint, p_key bigint, p_message_id bigint,
                              p_thread_key text, p_execution_key text, p_channel text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    more boolean;
BEGIN
    WITH delivered AS (
        UPDATE thread_message
        SET status = 'delivered', delivered_at = now(), attempts = attempts + 1, last_error = NULL
        WHERE id = p_message_id AND status = 'pending'
        RETURNING thread_message.id, thread_message.tenant_id, thread_message.execution_id, thread_message.node_id
    )
    INSERT INTO execution_event (tenant_id, execution_id, action, level, message, node_id, payload)
    SELECT d.tenant_id, d.execution_id, 'thread.message_delivered', 'info', 'Message ' || d.id || ' delivered', d.node_id,
           jsonb_build_object('thread_id', p_thread_key, 'execution_id', p_execution_key,
                              'message_id', d.id::text, 'channel', p_channel)
    FROM delivered d
    WHERE d.execution_id IS NOT NULL;
    PERFORM pg_advisory_unlock(p_key);
    SELECT EXISTS (SELECT 1 FROM thread_message m
                   WHERE m.thread_id = p_thread_id AND m.direction = 'out' AND m.status = 'pending')
    INTO more;
    RETURN more;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION outbox_finish(bigint, bigint, bigint, text, text, text);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_claim(p_thread_id bigint, p_key bigint, p_max integer)
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
