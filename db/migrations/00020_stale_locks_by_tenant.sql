-- +goose Up
-- One rule for stale and orphan locks, whoever asks: clear_stale_locks
-- clears the locks idle for longer than lock_timeout and the locks whose
-- holder has ended, of every tenant (only_tenant NULL: the lock reaper,
-- through cleanup_stale_locks) or of one (POST /monitor/locks/cleanup), and
-- flags their threads for a drain.
-- +goose StatementBegin
CREATE FUNCTION clear_stale_locks(lock_timeout interval, only_tenant text)
RETURNS TABLE (id bigint, tenant_id text, thread_id text)
LANGUAGE sql AS $$
    UPDATE thread t
    SET active_execution_id = NULL,
        execution_locked_at = NULL,
        drain_requested = true,
        updated_at = now()
    WHERE t.active_execution_id IS NOT NULL
      AND (only_tenant IS NULL OR t.tenant_id = only_tenant)
      AND (t.execution_locked_at < now() - lock_timeout
           OR EXISTS (SELECT 1 FROM agent_execution x
                      WHERE x.id = t.active_execution_id
                        AND x.status IN ('completed', 'failed', 'timeout', 'cancelled')))
    RETURNING t.id, t.tenant_id, t.thread_id;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cleanup_stale_locks(lock_timeout interval DEFAULT interval '10 minutes')
RETURNS TABLE (tenant_id text, thread_id text)
LANGUAGE sql AS $$
    SELECT c.tenant_id, c.thread_id FROM clear_stale_locks(lock_timeout, NULL) c;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cleanup_stale_locks(lock_timeout interval DEFAULT interval '10 minutes')
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
DROP FUNCTION clear_stale_locks(interval, text);
