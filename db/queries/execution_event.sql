-- name: EventInsertMany :exec
-- Inserts a transaction's events in one statement, one row per array
-- element, in array order; an empty node id stores NULL.
INSERT INTO execution_event (tenant_id, execution_id, action, level, message, node_id, payload)
SELECT unnest(@tenant_ids::text[]), unnest(@execution_ids::bigint[]), unnest(@actions::text[]),
       unnest(@levels::text[]), unnest(@messages::text[]), nullif(unnest(@node_ids::text[]), ''),
       unnest(@payloads::jsonb[]);

-- name: EventListByExecution :many
SELECT *
FROM execution_event
WHERE execution_id = @execution_id::bigint
  AND id > @after_id::bigint
ORDER BY id
LIMIT @max::integer;
