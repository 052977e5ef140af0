-- +goose Up
-- A settling start (engine/lane.go, "Runs that never hold a slot") writes
-- its execution row once, in the state its start transaction leaves it in,
-- after its messages: the outbound messages of its first step reference an
-- execution row that the same transaction inserts before it commits. The
-- reference is checked at commit instead of at each insert, which still
-- refuses any message whose execution does not exist.
ALTER TABLE thread_message
    ALTER CONSTRAINT thread_message_execution_id_fkey DEFERRABLE INITIALLY DEFERRED;

-- +goose Down
ALTER TABLE thread_message
    ALTER CONSTRAINT thread_message_execution_id_fkey NOT DEFERRABLE;
