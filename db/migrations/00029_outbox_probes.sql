-- +goose Up
-- outbox_finish_many looked its messages and threads up with joins that
-- the planner ran as hash joins over the whole outbox index
-- (thread_message_outbox_idx): the index is small when ANALYZE last saw it
-- quiet, but under load it holds every pending message and the entries of
-- every message delivered since the last vacuum, so a batch of 14 threads
-- read thousands of entries to update 14 rows. Each message is now updated
-- by its thread and id, and each thread probed by its id: a batch costs
-- what its own threads hold, whatever the outbox holds.
--
-- p_message_thread_ids[i] is the thread of p_message_ids[i].
-- +goose StatementBegin
CREATE FUNCTION outbox_finish_many(p_thread_ids bigint[], p_keys bigint[], p_message_ids bigint[],
                                   p_message_thread_ids bigint[], p_thread_keys text[],
                                   p_execution_keys text[], p_channels text[])
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    more     bigint[];
    ids      bigint[] := '{}';
    tenants  text[] := '{}';
    execs    bigint[] := '{}';
    nodes    text[] := '{}';
    payloads jsonb[] := '{}';
    sent     record;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_message_ids, 1), 0) LOOP
        UPDATE thread_message t
        SET status = 'delivered', delivered_at = now(), attempts = t.attempts + 1, last_error = NULL
        WHERE t.thread_id = p_message_thread_ids[i] AND t.id = p_message_ids[i] AND t.status = 'pending'
        RETURNING t.id, t.tenant_id, t.execution_id, t.node_id INTO sent;
        IF FOUND AND sent.execution_id IS NOT NULL THEN
            ids := ids || sent.id;
            tenants := tenants || sent.tenant_id;
            execs := execs || sent.execution_id;
            nodes := nodes || sent.node_id;
            payloads := payloads || jsonb_build_object('thread_id', p_thread_keys[i], 'execution_id', p_execution_keys[i],
                                                       'message_id', sent.id::text, 'channel', p_channels[i]);
        END IF;
    END LOOP;
    INSERT INTO execution_event (tenant_id, execution_id, action, level, message, node_id, payload)
    SELECT e.tenant_id, e.execution_id, 'thread.message_delivered', 'info', 'Message ' || e.id || ' delivered', e.node_id, e.payload
    FROM unnest(ids, tenants, execs, nodes, payloads) AS e(id, tenant_id, execution_id, node_id, payload)
    ORDER BY e.id;
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
DROP FUNCTION outbox_finish_many(bigint[], bigint[], bigint[], text[], text[], text[]);

-- +goose Down
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
DROP FUNCTION outbox_finish_many(bigint[], bigint[], bigint[], bigint[], text[], text[], text[]);
