-- +goose Up
-- The walking skeleton's schema: definitions, executions with their
-- checkpoint, the event log, threads and their messages, and request
-- idempotency. River's own tables are migrated by rivermigrate.

CREATE TYPE execution_status AS ENUM (
    'pending', 'running', 'waiting', 'completed', 'failed', 'timeout', 'cancelled'
);

CREATE TABLE workflow_definition (
    id          bigserial PRIMARY KEY,
    tenant_id   text        NOT NULL,
    workflow_id text        NOT NULL,
    version     text        NOT NULL,
    name        text        NOT NULL DEFAULT '',
    lane        text,
    definition  jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workflow_definition_version_key UNIQUE (tenant_id, workflow_id, version)
);

CREATE INDEX workflow_definition_latest_idx ON workflow_definition (tenant_id, workflow_id, id DESC);

CREATE TABLE thread (
    id                  bigserial PRIMARY KEY,
    tenant_id           text        NOT NULL,
    thread_id           text        NOT NULL,
    channel             text        NOT NULL,
    contact             text        NOT NULL,
    default_workflow_id text,
    active_execution_id bigint,
    execution_locked_at timestamptz,
    queue_settings      jsonb,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT thread_thread_id_key UNIQUE (tenant_id, thread_id),
    CONSTRAINT thread_contact_key UNIQUE (tenant_id, channel, contact)
);

CREATE TABLE agent_execution (
    id                      bigserial PRIMARY KEY,
    tenant_id               text             NOT NULL,
    execution_id            text             NOT NULL,
    workflow_id             text             NOT NULL,
    version                 text             NOT NULL,
    status                  execution_status NOT NULL DEFAULT 'pending',
    lane                    text             NOT NULL DEFAULT 'main',
    session_key             text,
    thread_id               bigint           NOT NULL REFERENCES thread (id),
    parent_execution_id     bigint REFERENCES agent_execution (id),
    can_inherit_lock        boolean          NOT NULL DEFAULT false,
    restarted_from          bigint REFERENCES agent_execution (id),
    current_node_id         text,
    current_step_started_at timestamptz,
    input                   jsonb            NOT NULL DEFAULT '{}',
    context                 jsonb            NOT NULL DEFAULT '{}',
    variables               jsonb            NOT NULL DEFAULT '{}',
    conversation_history    jsonb            NOT NULL DEFAULT '[]',
    node_path               text[]           NOT NULL DEFAULT '{}',
    steps_completed         integer          NOT NULL DEFAULT 0,
    total_steps             integer          NOT NULL DEFAULT 0,
    -- step_seq is the checkpoint's version: every step transaction checks it
    -- and bumps it, and step jobs carry the value they expect.
    step_seq                bigint           NOT NULL DEFAULT 0,
    waiting_for             text,
    waiting_until           timestamptz,
    waiting_data            jsonb,
    wait_seq                integer          NOT NULL DEFAULT 0,
    event_data              jsonb,
    result_type             text,
    result_summary          text,
    result                  jsonb,
    error_code              text,
    error_message           text,
    failed_node_id          text,
    cancelled_by            text,
    cancel_reason           text,
    correlation_id          text             NOT NULL DEFAULT '',
    idempotency_key         text,
    callback_url            text,
    priority                smallint         NOT NULL DEFAULT 5,
    created_at              timestamptz      NOT NULL DEFAULT now(),
    started_at              timestamptz,
    updated_at              timestamptz      NOT NULL DEFAULT now(),
    completed_at            timestamptz,
    CONSTRAINT agent_execution_execution_id_key UNIQUE (tenant_id, execution_id),
    CONSTRAINT agent_execution_result_type_check
        CHECK (result_type IS NULL OR result_type IN ('success', 'failure', 'timeout', 'cancelled'))
);

CREATE INDEX agent_execution_tenant_list_idx ON agent_execution (tenant_id, id DESC);
CREATE INDEX agent_execution_status_idx ON agent_execution (status, created_at)
    WHERE status IN ('pending', 'running', 'waiting');
CREATE INDEX agent_execution_thread_idx ON agent_execution (thread_id, id);
CREATE INDEX agent_execution_parent_idx ON agent_execution (parent_execution_id)
    WHERE parent_execution_id IS NOT NULL;

-- A terminal state never changes: whatever path tries it, the database refuses.
-- +goose StatementBegin
CREATE FUNCTION agent_execution_terminal_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status IN ('completed', 'failed', 'timeout', 'cancelled')
       AND NEW.status IS DISTINCT FROM OLD.status THEN
        RAISE EXCEPTION 'execution % is % and cannot become %', OLD.execution_id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER agent_execution_terminal_guard
    BEFORE UPDATE OF status ON agent_execution
    FOR EACH ROW EXECUTE FUNCTION agent_execution_terminal_guard();

CREATE TABLE thread_message (
    id           bigserial PRIMARY KEY,
    tenant_id    text        NOT NULL,
    thread_id    bigint      NOT NULL REFERENCES thread (id),
    direction    text        NOT NULL CHECK (direction IN ('in', 'out')),
    execution_id bigint REFERENCES agent_execution (id),
    node_id      text,
    body         text        NOT NULL,
    status       text        NOT NULL,
    attempts     integer     NOT NULL DEFAULT 0,
    last_error   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz,
    step_seq     bigint,
    -- One outbound message per node visit: a replayed step cannot send twice.
    CONSTRAINT thread_message_step_key UNIQUE (execution_id, node_id, step_seq)
);

CREATE INDEX thread_message_thread_idx ON thread_message (thread_id, id);
CREATE INDEX thread_message_pending_idx ON thread_message (thread_id, id) WHERE status = 'pending';

CREATE TABLE execution_event (
    id           bigserial PRIMARY KEY,
    tenant_id    text        NOT NULL,
    execution_id bigint      NOT NULL REFERENCES agent_execution (id),
    action       text        NOT NULL,
    level        text        NOT NULL DEFAULT 'info',
    message      text        NOT NULL,
    node_id      text,
    payload      jsonb       NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX execution_event_execution_idx ON execution_event (execution_id, id);

CREATE TABLE idempotency_key (
    tenant_id   text        NOT NULL,
    endpoint    text        NOT NULL,
    message_id  text        NOT NULL,
    status_code integer,
    response    jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, endpoint, message_id)
);

-- +goose Down
DROP TABLE idempotency_key;
DROP TABLE execution_event;
DROP TABLE thread_message;
DROP TRIGGER agent_execution_terminal_guard ON agent_execution;
DROP FUNCTION agent_execution_terminal_guard();
DROP TABLE agent_execution;
DROP TABLE thread;
DROP TABLE workflow_definition;
DROP TYPE execution_status;
