-- name: DefinitionInsert :one
INSERT INTO workflow_definition (tenant_id, workflow_id, version, name, lane, definition)
VALUES (@tenant_id::text, @workflow_id::text, @version::text, @name::text, sqlc.narg('lane')::text, @definition::jsonb)
ON CONFLICT (tenant_id, workflow_id, version) DO NOTHING
RETURNING *;

-- name: DefinitionGetByVersion :one
SELECT *
FROM workflow_definition
WHERE tenant_id = @tenant_id::text
  AND workflow_id = @workflow_id::text
  AND version = @version::text;

-- name: DefinitionLatestID :one
-- The row id of a workflow's latest version, read from the index alone: a
-- cached definition is then taken by it (DefinitionGetByID on a miss).
SELECT id
FROM workflow_definition
WHERE tenant_id = @tenant_id::text
  AND workflow_id = @workflow_id::text
ORDER BY id DESC
LIMIT 1;

-- name: DefinitionGetByID :one
SELECT * FROM workflow_definition WHERE id = @id::bigint;

-- name: DefinitionListLatest :many
SELECT DISTINCT ON (workflow_id) *
FROM workflow_definition
WHERE tenant_id = @tenant_id::text
  AND workflow_id > @after_workflow_id::text
ORDER BY workflow_id, id DESC
LIMIT @max::integer;
