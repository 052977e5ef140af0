-- name: EventInsertMany :copyfrom
INSERT INTO execution_event (tenant_id, execution_id, action, level, message, node_id, payload)
VALUES (@tenant_id, @execution_id, @action, @level, @message, @node_id, @payload);

-- name: EventListByExecution :many
SELECT *
FROM execution_event
WHERE execution_id = @execution_id::bigint
  AND id > @after_id::bigint
ORDER BY id
LIMIT @max::integer;
