-- +goose Up
-- Live events are found by polling the sequence (package live), no longer
-- announced with NOTIFY. A transaction that notifies takes a database-wide
-- lock at commit and keeps it through its WAL flush, so every transaction
-- that wrote events committed one after another: at a few hundred
-- executions a second that lock, not the work, set the pace. The numbering
-- trigger and execution_event_fence stay as they are.
DROP TRIGGER execution_event_announce ON execution_event;
DROP FUNCTION execution_event_announce();

-- +goose Down
-- +goose StatementBegin
CREATE FUNCTION execution_event_announce() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('baton.event_announced', true) IS DISTINCT FROM 'on' THEN
        PERFORM set_config('baton.event_announced', 'on', true);
        PERFORM pg_notify('baton_event', '');
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER execution_event_announce
    AFTER INSERT ON execution_event
    FOR EACH STATEMENT EXECUTE FUNCTION execution_event_announce();
