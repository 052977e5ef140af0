-- Operator sessions (httpapi/operator.go): the row an operator session
-- cookie stands for, keyed by the HMAC of the cookie's random value.

-- name: OperatorSessionInsert :exec
-- Opens an operator session (River UI's sign-in).
INSERT INTO operator_session (id, subject, expires_at)
VALUES (@id::bytea, @subject::text, @expires_at::timestamptz);

-- name: OperatorSessionGetLive :one
-- The operator session a request's cookie stands for, unless it was
-- revoked or has expired: one primary-key read per River UI request.
SELECT subject, expires_at
FROM operator_session
WHERE id = @id::bytea
  AND revoked_at IS NULL
  AND expires_at > coalesce(sqlc.narg('now')::timestamptz, now());

-- name: OperatorSessionRevoke :execrows
-- Ends an operator session (sign-out); one already revoked stays as it
-- was.
UPDATE operator_session
SET revoked_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE id = @id::bytea
  AND revoked_at IS NULL;

-- name: OperatorSessionDeleteExpired :execrows
-- Removes up to @batch operator sessions that have expired (revoked or
-- not), oldest first, skipping rows another sweep holds: one batch of the
-- retention sweep.
WITH doomed AS (
    SELECT s.id
    FROM operator_session s
    WHERE s.expires_at < coalesce(sqlc.narg('now')::timestamptz, now())
    ORDER BY s.expires_at
    LIMIT @batch::integer
    FOR UPDATE SKIP LOCKED
)
DELETE FROM operator_session
WHERE id = ANY(ARRAY(SELECT id FROM doomed));
