-- +goose Up
-- Operator sessions (httpapi/operator.go): River UI's sign-in. A browser
-- that signs in with an operator token gets a cookie holding 32 random
-- bytes; the row is keyed by their HMAC-SHA256 under a key derived from
-- BATON_OPERATOR_SECRET (not the JWT secret that keys console_session), so
-- the table holds nothing a browser could present and a server with
-- another operator secret finds no row. A table apart from
-- console_session: an operator session has no tenant, no scopes and no
-- CSRF token, and no query of one table can return a row of the other.
-- Every River UI request reads its row by primary key, so a sign-out
-- (revoked_at) ends the session for every baton process at once. The
-- retention sweep removes rows once they expire (expires_at is never more
-- than 12 hours after created_at).
CREATE TABLE operator_session (
    id         bytea PRIMARY KEY,
    -- subject is the operator token's subject: who the operator is.
    subject    text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);

CREATE INDEX operator_session_expires_idx ON operator_session (expires_at);

-- +goose Down
DROP TABLE operator_session;
