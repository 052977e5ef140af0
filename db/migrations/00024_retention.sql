-- +goose Up
-- Retention (package retention): the periodic retention.sweep job removes
-- what is past its retention period in bounded batches, tenant by tenant,
-- each tenant with its own period. It finds the tenants that have
-- something to remove with a skip scan of the indexes below (one probe per
-- tenant) and, in each tenant, the oldest rows first.

-- Ended executions by tenant and end time.
CREATE INDEX agent_execution_expiry_idx ON agent_execution (tenant_id, completed_at)
    WHERE status IN ('completed', 'failed', 'timeout', 'cancelled');

-- Removing an execution checks that no row refers to it, and the sweep
-- keeps an execution that a restart or an inherited lock still refers to:
-- without these indexes each check would read the whole table.
CREATE INDEX agent_execution_restarted_from_idx ON agent_execution (restarted_from)
    WHERE restarted_from IS NOT NULL;
CREATE INDEX agent_execution_lock_inherited_from_idx ON agent_execution (lock_inherited_from)
    WHERE lock_inherited_from IS NOT NULL;
CREATE INDEX inbound_event_buffered_for_idx ON inbound_event (buffered_for)
    WHERE buffered_for IS NOT NULL;

-- Request message_ids and event_ids by tenant and age.
CREATE INDEX idempotency_key_expiry_idx ON idempotency_key (tenant_id, created_at);
CREATE INDEX inbound_event_expiry_idx ON inbound_event (tenant_id, created_at);

-- Inbound messages no execution owns that are settled (dropped, or a
-- /queue command), and settled inbound messages whose message_id is still
-- remembered.
CREATE INDEX thread_message_inbound_expiry_idx ON thread_message (tenant_id, created_at)
    WHERE direction = 'in' AND execution_id IS NULL AND status IN ('consumed', 'dropped', 'command');
CREATE INDEX thread_message_inbound_id_expiry_idx ON thread_message (tenant_id, created_at)
    WHERE direction = 'in' AND external_id IS NOT NULL AND status IN ('consumed', 'dropped', 'command');

-- +goose Down
DROP INDEX thread_message_inbound_id_expiry_idx;
DROP INDEX thread_message_inbound_expiry_idx;
DROP INDEX inbound_event_expiry_idx;
DROP INDEX idempotency_key_expiry_idx;
DROP INDEX inbound_event_buffered_for_idx;
DROP INDEX agent_execution_lock_inherited_from_idx;
DROP INDEX agent_execution_restarted_from_idx;
DROP INDEX agent_execution_expiry_idx;
