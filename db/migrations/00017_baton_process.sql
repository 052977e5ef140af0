-- +goose Up
-- baton_process lists the running `baton` processes (jobs/presence.go). Each
-- holds the session advisory lock processLockBase | id on a connection of
-- its own for as long as it lives, so PostgreSQL releases the lock the
-- moment the process or its connection dies. The process sweep, run by one
-- process at a time, finds a row whose lock is free, records when it first
-- saw it free (lock_lost_at) and, once it has stayed free past the grace a
-- reconnecting process needs (after a database restart every lock is free
-- for a moment), hands the River jobs that process was running
-- (river_job.attempted_by ends with client_id) to the others and deletes
-- the row.
CREATE TABLE baton_process (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- client_id is the River client ID of the process.
    client_id    text        NOT NULL UNIQUE,
    hostname     text        NOT NULL,
    pid          integer     NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    -- locked_at is when the process last took its lock: at start and after
    -- each reconnect.
    locked_at    timestamptz NOT NULL DEFAULT now(),
    lock_lost_at timestamptz
);

-- +goose Down
DROP TABLE baton_process;
