-- +goose Up
-- A waiting execution names its wait's execution.wait_timeout job, so that
-- the statement that ends the wait (a resume, a cancel, a failure) deletes
-- the job through River's primary key in the same transaction, instead of
-- leaving it scheduled until its time to find the wait over. NULL when the
-- execution does not wait.
ALTER TABLE agent_execution ADD COLUMN wait_timeout_job_id bigint;

-- The waits of an earlier build: a live wait gets its job's id, and the
-- timers of waits that are already over go.
UPDATE agent_execution e
SET wait_timeout_job_id = j.id
FROM river_job j
WHERE e.status = 'waiting'
  AND j.kind = 'execution.wait_timeout'
  AND j.state IN ('available', 'retryable', 'scheduled')
  AND (j.args ->> 'execution_id')::bigint = e.id
  AND (j.args ->> 'wait_seq')::integer = e.wait_seq;

DELETE FROM river_job j
WHERE j.kind = 'execution.wait_timeout'
  AND j.state IN ('available', 'retryable', 'scheduled')
  AND NOT EXISTS (SELECT 1 FROM agent_execution e
                  WHERE e.id = (j.args ->> 'execution_id')::bigint
                    AND e.status = 'waiting'
                    AND e.wait_seq = (j.args ->> 'wait_seq')::integer);

-- +goose Down
ALTER TABLE agent_execution DROP COLUMN wait_timeout_job_id;
