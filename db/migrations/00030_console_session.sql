-- +goose Up
-- Console sessions (httpapi/session.go). A browser that signs in gets a
-- cookie holding 32 random bytes; the row is keyed by their HMAC-SHA256
-- under a key derived from BATON_JWT_SECRET, so the table holds nothing a
-- browser could present, and a server with another secret finds no row.
-- Every request made with the cookie reads its row by primary key, so a
-- sign-out (revoked_at) ends the session for every baton process at once.
-- The retention sweep removes rows once they expire (expires_at is never
-- more than 12 hours after created_at).
CREATE TABLE console_session (
    id         bytea PRIMARY KEY,
    tenant_id  text NOT NULL,
    -- subject is the signing-in token's subject ("insecure" without
    -- authentication).
    subject    text NOT NULL,
    scopes     text[] NOT NULL,
    -- csrf is the token requests that change something send in
    -- X-CSRF-Token.
    csrf       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);

CREATE INDEX console_session_expires_idx ON console_session (expires_at);

-- +goose Down
DROP TABLE console_session;
