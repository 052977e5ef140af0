-- +goose Up
-- Live events: execution_event rows are numbered so that a reader
-- can tell when every id up to a bound is final, and every transaction that
-- writes events announces them with one NOTIFY.
--
-- The stream (package live) must never skip an event whose transaction
-- commits after a later id was read. Ids come from a sequence, so they can
-- commit out of order. The reader keeps "fences": (L, B) where L is the
-- sequence's last value and B a transaction id drawn after reading L. Every
-- id <= L was drawn by a transaction that already had its xid, so that xid
-- is < B; once the oldest running transaction is >= B, all of them have
-- ended and ids <= L are final. That needs the writer's xid to be assigned
-- BEFORE its event id is drawn, which the BEFORE INSERT trigger below
-- guarantees (a column default would draw the id first, and nextval does not
-- always assign an xid). The sequence must keep CACHE 1: a cached, not yet
-- used value would look final.

ALTER TABLE execution_event ALTER COLUMN id DROP DEFAULT;
ALTER SEQUENCE execution_event_id_seq CACHE 1;

-- +goose StatementBegin
CREATE FUNCTION execution_event_number() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_current_xact_id(); -- assigns this transaction's xid first
    NEW.id := nextval('execution_event_id_seq');
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER execution_event_number
    BEFORE INSERT ON execution_event
    FOR EACH ROW EXECUTE FUNCTION execution_event_number();

-- At most one NOTIFY per transaction, with an empty payload: commits queue on
-- the database-wide lock NOTIFY takes, and listeners re-read the table from
-- their cursor anyway. A transaction-local setting remembers that this
-- transaction has already announced.
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

-- execution_event_fence returns the sequence's last value and, when it is
-- over known, a fresh transaction id drawn after reading it (NULL when
-- nothing new was numbered, so an idle poll assigns no xid). Both as bigint.
-- +goose StatementBegin
CREATE FUNCTION execution_event_fence(known bigint, OUT last_id bigint, OUT bound bigint)
LANGUAGE plpgsql AS $$
BEGIN
    last_id := coalesce(pg_sequence_last_value('execution_event_id_seq'::regclass), 0);
    IF last_id > known THEN
        bound := pg_current_xact_id()::text::bigint;
    END IF;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION execution_event_fence(bigint);
DROP TRIGGER execution_event_announce ON execution_event;
DROP FUNCTION execution_event_announce();
DROP TRIGGER execution_event_number ON execution_event;
DROP FUNCTION execution_event_number();
ALTER TABLE execution_event ALTER COLUMN id SET DEFAULT nextval('execution_event_id_seq');
