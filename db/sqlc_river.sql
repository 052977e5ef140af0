-- River's job table, as far as Baton's queries read it. sqlc type-checks
-- against this file only; River's migrations (rivermigrate) create the real
-- table, which has more columns.
CREATE TYPE river_job_state AS ENUM (
    'available', 'cancelled', 'completed', 'discarded', 'pending', 'retryable', 'running', 'scheduled'
);

CREATE TABLE river_job (
    id           bigserial PRIMARY KEY,
    kind         text            NOT NULL,
    args         jsonb           NOT NULL,
    state        river_job_state NOT NULL,
    queue        text            NOT NULL,
    scheduled_at timestamptz     NOT NULL
);

-- The jobs a dead worker process was running are handed back by
-- JobHandBack (db/queries/baton_process.sql).
ALTER TABLE river_job
    ADD COLUMN attempt      smallint NOT NULL DEFAULT 0,
    ADD COLUMN max_attempts smallint NOT NULL,
    ADD COLUMN attempted_by text[],
    ADD COLUMN errors       jsonb[],
    ADD COLUMN finalized_at timestamptz,
    ADD COLUMN metadata     jsonb NOT NULL DEFAULT '{}';

-- River's leader; a dead leader's row is deleted so that another process
-- is elected at once (JobHandBack's caller, jobs/presence.go).
CREATE UNLOGGED TABLE river_leader (
    elected_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    leader_id  text        NOT NULL,
    name       text        PRIMARY KEY DEFAULT 'default'
);

-- Timer jobs due soon are made available by TimersPromote
-- (db/queries/timers.sql), which reads them through River's fetching index
-- (state, queue, priority, scheduled_at, id).
ALTER TABLE river_job
    ADD COLUMN priority smallint NOT NULL DEFAULT 1;
