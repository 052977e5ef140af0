-- +goose Up
-- outbox_finish_many looked its messages and threads up with joins that
-- the planner ran as hash joins over the whole outbox index
-- (thread_message_outbox_idx): the index is small when ANALYZE last saw it
-- quiet, but under load it holds every pending message and the entries of
-- every message delivered since the last vacuum, so a batch of 14 threads
-- read thousands of entries to update 14 rows. Now no table is joined:
-- the messages are found by their ids and their threads' ids (= ANY, an
-- index condition whichever index the planner takes), and each thread is
-- probed by its id, so a batch costs what its own threads hold, whatever
-- the outbox holds. The messages of p_message_ids belong to threads of
-- p_thread_ids.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_finish_many(p_thread_ids bigint[], p_keys bigint[], p_message_ids bigint[],
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_finish_many(p_thread_ids bigint[], p_keys bigint[], p_message_ids bigint[],
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
