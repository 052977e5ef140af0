-- Console sessions (httpapi/session.go): the row a session cookie stands
-- for, keyed by the HMAC of the cookie's random value.

-- name: ConsoleSessionInsert :exec
-- Opens a session (sign-in).
INSERT INTO console_session (id, tenant_id, subject, scopes, csrf, expires_at)
VALUES (@id::bytea, @tenant_id::text, @subject::text, coalesce(@scopes::text[], '{}'), @csrf::text, @expires_at::timestamptz);

-- name: ConsoleSessionGetLive :one
-- The session a request's cookie stands for, unless it was revoked or has
-- expired: one primary-key read per request.
SELECT tenant_id, subject, scopes, csrf, expires_at
FROM console_session
WHERE id = @id::bytea
  AND revoked_at IS NULL
  AND expires_at > coalesce(sqlc.narg('now')::timestamptz, now());

-- name: ConsoleSessionRevoke :execrows
-- Ends a session (sign-out); a session already revoked stays as it was.
UPDATE console_session
SET revoked_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE id = @id::bytea
  AND revoked_at IS NULL;

-- name: ConsoleSessionDeleteExpired :execrows
-- Removes up to @batch sessions that have expired (revoked or not), oldest
-- first, skipping rows another sweep holds: one batch of the retention
-- sweep.
WITH doomed AS (
    SELECT s.id
    FROM console_session s
    WHERE s.expires_at < coalesce(sqlc.narg('now')::timestamptz, now())
    ORDER BY s.expires_at
    LIMIT @batch::integer
    FOR UPDATE SKIP LOCKED
)
DELETE FROM console_session
WHERE id = ANY(ARRAY(SELECT id FROM doomed));
