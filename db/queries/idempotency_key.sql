-- name: IdempotencyClaim :one
-- Claims a request's message_id. A concurrent claim of the same key waits for
-- this transaction and then finds the row taken.
INSERT INTO idempotency_key (tenant_id, endpoint, message_id)
VALUES (@tenant_id::text, @endpoint::text, @message_id::text)
ON CONFLICT DO NOTHING
RETURNING created_at;

-- name: IdempotencyGet :one
SELECT *
FROM idempotency_key
WHERE tenant_id = @tenant_id::text
  AND endpoint = @endpoint::text
  AND message_id = @message_id::text;

-- name: IdempotencySetResponse :exec
UPDATE idempotency_key
SET status_code = @status_code::integer,
    response = @response::jsonb
WHERE tenant_id = @tenant_id::text
  AND endpoint = @endpoint::text
  AND message_id = @message_id::text;
