-- +goose Up
-- execution_event is an append-only log that only the engine writes, in the
-- transaction that writes or holds the execution's row, and no execution is
-- ever deleted. Its foreign key checked that again for every event (about
-- ten per execution) and share-locked the execution's row for each, the
-- row of an ended execution too when one of its messages is delivered:
-- about 8 % of `baton bench` (b)'s throughput (README, Benchmarks). The
-- log's index on (execution_id, id) stays.
ALTER TABLE execution_event DROP CONSTRAINT execution_event_execution_id_fkey;

-- +goose Down
ALTER TABLE execution_event
    ADD CONSTRAINT execution_event_execution_id_fkey FOREIGN KEY (execution_id) REFERENCES agent_execution (id);
