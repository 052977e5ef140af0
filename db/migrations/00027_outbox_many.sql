-- Prompt delivery in batches: one statement claims the outboxes of many
-- threads, one statement records their last messages delivered and gives
-- the outboxes up. A batch's round trips and its one WAL flush are shared
-- by every thread in it, where a thread delivered alone pays two round trips
-- and a flush (engine/deliver_prompt.go).

-- +goose Up
-- +goose StatementBegin
-- outbox_claim_many: outbox_claim for each thread, p_keys[i] being the
-- outbox lock of p_thread_ids[i]. The threads that return rows are the ones
-- whose outbox the caller now holds.
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
-- outbox_finish_many: outbox_finish for many threads at once. The messages
-- p_message_ids (with their threads' keys, executions' keys and channels,
-- index for index) are recorded delivered, each with its
-- thread.message_delivered event; the outbox locks p_keys, held by the
-- caller, are given up; and the threads of p_thread_ids on which messages
-- are still pending are returned.
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
        FROM unnest(p_message_ids, p_thread_keys, p_execution_keys, p_channels) AS f(message_id, thread_key, execution_key, channel)
        WHERE m.id = f.message_id AND m.status = 'pending'
        RETURNING m.id, m.tenant_id, m.execution_id, m.node_id, f.thread_key, f.execution_key, f.channel
    )
    INSERT INTO execution_event (tenant_id, execution_id, action, level, message, node_id, payload)
    SELECT d.tenant_id, d.execution_id, 'thread.message_delivered', 'info', 'Message ' || d.id || ' delivered', d.node_id,
           jsonb_build_object('thread_id', d.thread_key, 'execution_id', d.execution_key,
                              'message_id', d.id::text, 'channel', d.channel)
    FROM delivered d
    WHERE d.execution_id IS NOT NULL
    ORDER BY d.id;
    PERFORM pg_advisory_unlock(k) FROM unnest(p_keys) AS k;
    SELECT coalesce(array_agg(t.id), '{}') INTO more
    FROM unnest(p_thread_ids) AS t(id)
    WHERE EXISTS (SELECT 1 FROM thread_message m
                  WHERE m.thread_id = t.id AND m.direction = 'out' AND m.status = 'pending');
    RETURN more;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION outbox_finish_many(bigint[], bigint[], bigint[], text[], text[], text[]);
DROP FUNCTION outbox_claim_many(bigint[], bigint[], integer);
