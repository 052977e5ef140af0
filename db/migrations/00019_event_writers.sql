-- +goose Up
-- Live events fence on event writers only. Until now
-- package live waited until the server-wide oldest running transaction was
-- younger than its fence, so a transaction left open anywhere on the server
-- (in another database, or a Baton transaction that writes no events) held
-- back every event stream for as long as it stayed open.
--
-- Now every statement that inserts events first registers its transaction
-- as an event writer: a transaction advisory lock keyed 1 << 60 | the low
-- 32 bits of its xid (in pg_locks: classid 268435456 = 1 << 28, objid =
-- those 32 bits, objsubid 1). The key is unique among running
-- transactions, so the lock never waits, and it is released only once the
-- transaction's commit (or rollback) is visible to new snapshots. Taking it
-- again in the same transaction is a lookup in the backend's local lock
-- table. A savepoint that took it and rolls back releases it, but takes the
-- rows its statements inserted with it; a later insert takes it again.
--
-- The trigger is a BEFORE STATEMENT trigger, which runs before the
-- statement computes any row, so the xid is assigned and the lock taken
-- before any id is drawn: the id can go back to being a column default,
-- and the per-row trigger of migration 00003 (a PL/pgSQL call per event)
-- goes. The sequence keeps CACHE 1.
--
-- The hub's fence (L, B) is unchanged: a writer that drew an id <= L had
-- its xid and its lock before L was read, so its xid is < B. Once no lock
-- of the range belongs to an xid < B (execution_event_writers_xmin), every
-- id <= L is final.
--
-- Other advisory keys: 1 << 62 | thread id (outboxes), 1 << 61 | process id
-- and (1 << 61) - 1 (process presence), 0x626174_6f6e (migrations).
DROP TRIGGER execution_event_number ON execution_event;
DROP FUNCTION execution_event_number();

-- +goose StatementBegin
CREATE FUNCTION execution_event_register() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(1152921504606846976 | (pg_current_xact_id()::text::bigint & 4294967295));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER execution_event_register
    BEFORE INSERT ON execution_event
    FOR EACH STATEMENT EXECUTE FUNCTION execution_event_register();

ALTER TABLE execution_event ALTER COLUMN id SET DEFAULT nextval('execution_event_id_seq');

-- execution_event_writers_xmin returns a transaction id such that every
-- transaction still running that has inserted an event in this database
-- has an id at least that large: the oldest such writer, else the
-- snapshot's xmax (one past the latest ended transaction, so past every
-- fence the hub has drawn). When even the server-wide oldest running
-- transaction is at least wanted, it returns that without reading pg_locks.
-- As bigint (xid8).
--
-- pg_locks shows only the low 32 bits of a writer's xid; the full id is the
-- one within 2^31 of the snapshot's xmax (a running transaction is never
-- further from it: PostgreSQL stops assigning xids long before), below it
-- or, for a writer that began after the snapshot, above it.
-- +goose StatementBegin
CREATE FUNCTION execution_event_writers_xmin(wanted bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    snap      pg_snapshot := pg_current_snapshot();
    running   bigint := pg_snapshot_xmin(snap)::text::bigint;
    snap_xmax bigint := pg_snapshot_xmax(snap)::text::bigint;
    oldest    bigint;
BEGIN
    IF running >= wanted THEN
        RETURN running;
    END IF;
    SELECT min(snap_xmax + ((((l.objid::bigint - snap_xmax) % 4294967296) + 4294967296 + 2147483648) % 4294967296) - 2147483648)
    INTO oldest
    FROM pg_locks l
    WHERE l.locktype = 'advisory'
      AND l.classid = 268435456
      AND l.objsubid = 1
      AND l.granted
      AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database());
    RETURN coalesce(oldest, snap_xmax);
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION execution_event_writers_xmin(bigint);
ALTER TABLE execution_event ALTER COLUMN id DROP DEFAULT;
DROP TRIGGER execution_event_register ON execution_event;
DROP FUNCTION execution_event_register();

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
