-- +goose Up
-- An event addressed to a running execution is kept for it and applied when
-- it next waits for that type.
ALTER TABLE inbound_event
    ADD COLUMN buffered_for bigint REFERENCES agent_execution (id),
    ADD COLUMN applied_at   timestamptz;

CREATE INDEX inbound_event_buffered_idx ON inbound_event (buffered_for, created_at)
    WHERE buffered_for IS NOT NULL AND applied_at IS NULL;

-- +goose Down
DROP INDEX inbound_event_buffered_idx;
ALTER TABLE inbound_event DROP COLUMN applied_at, DROP COLUMN buffered_for;
