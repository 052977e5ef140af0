-- +goose Up
-- Tool retries and structured execution errors.
--
-- node_attempt is Baton's per-node attempt counter: the number of failed,
-- retryable calls of the current task node's tool. It is bumped (without
-- bumping step_seq) when a call fails and will be retried, and reset by every
-- checkpoint that moves on. The tool's idempotency key is
-- execution:node:(node_attempt + 1).
ALTER TABLE agent_execution
    ADD COLUMN node_attempt integer NOT NULL DEFAULT 0,
    -- error_details carries a failed execution's retryable, retry_after_ms
    -- and the tool's diagnosis.
    ADD COLUMN error_details jsonb;

-- +goose Down
ALTER TABLE agent_execution
    DROP COLUMN error_details,
    DROP COLUMN node_attempt;
