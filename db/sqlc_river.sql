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
