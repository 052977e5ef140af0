-- +goose Up
-- Leftovers of earlier delivery paths and admission work.
--
-- outbox_finish and outbox_release gave up one thread's outbox; every
-- deliverer now goes through outbox_finish_many (migration 00027), for one
-- thread or many, so nothing calls them.
--
-- agent_execution_lane_tenant_pending_idx (migration 00026) has the same
-- definition as agent_execution_lane_pending_idx (migration 00018): every
-- pending row paid for the same entry twice.
DROP FUNCTION outbox_finish(bigint, bigint, bigint, text, text, text);
DROP FUNCTION outbox_release(bigint, bigint);
DROP INDEX agent_execution_lane_tenant_pending_idx;

-- +goose Down
CREATE INDEX agent_execution_lane_tenant_pending_idx ON agent_execution (lane, tenant_id, admit_first DESC, queued_at, id)
    WHERE status = 'pending';
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
