-- name: ProcessRegister :one
-- Records the process (or finds its row again after a reconnect) and takes
-- its session advisory lock @lock_base | id in the same statement, so that
-- no sweep ever sees the row without its lock held. The lock waits while a
-- sweep holds it (a sweep that found it free while this process was away).
WITH p AS (
    INSERT INTO baton_process (client_id, hostname, pid)
    VALUES (@client_id::text, @hostname::text, @pid::integer)
    ON CONFLICT (client_id) DO UPDATE SET locked_at = now(), lock_lost_at = NULL
    RETURNING id
)
SELECT p.id FROM p, LATERAL (SELECT pg_advisory_lock(@lock_base::bigint | p.id)) AS l;

-- name: ProcessUnregister :exec
-- Removes a process that stops cleanly; closing its connection releases its
-- lock.
DELETE FROM baton_process WHERE id = @id::bigint;

-- name: ProcessSweepLock :one
-- Whether this transaction may sweep: one sweep runs at a time across all
-- processes.
SELECT pg_try_advisory_xact_lock(@key::bigint)::boolean AS won;

-- name: ProcessCheck :many
-- Every process, with whether its lock is free (pg_try_advisory_xact_lock
-- gets it: nobody holds it, so the process or its connection is gone; the
-- lock is then kept until this transaction ends, so the process cannot
-- take it back meanwhile) and whether it was already seen free more than
-- @grace_seconds ago.
SELECT id, client_id,
       (lock_lost_at IS NOT NULL)::boolean AS lost,
       coalesce(lock_lost_at < now() - make_interval(secs => @grace_seconds::double precision), false)::boolean AS lost_past_grace,
       pg_try_advisory_xact_lock(@lock_base::bigint | id)::boolean AS lock_free
FROM baton_process
ORDER BY id;

-- name: ProcessMarkLost :exec
-- Records when the sweep found these processes' locks free: the time of
-- this statement, after the check that found them free (ProcessCheck), not
-- the sweep transaction's start, which may come before the lock was freed.
-- A process is declared dead Grace after it, so never sooner than Grace
-- after its lock was freed (jobs/fence.go counts on it).
UPDATE baton_process SET lock_lost_at = clock_timestamp()
WHERE id = ANY(@ids::bigint[]) AND lock_lost_at IS NULL;

-- name: ProcessMarkFound :exec
UPDATE baton_process SET lock_lost_at = NULL
WHERE id = ANY(@ids::bigint[]) AND lock_lost_at IS NOT NULL;

-- name: ProcessDelete :exec
DELETE FROM baton_process WHERE id = ANY(@ids::bigint[]);

-- name: JobHandBack :many
-- Hands back the River jobs that the given clients were running when they
-- died, as River's rescuer does for a stuck job, but at once: a job whose
-- cancellation was asked for is cancelled, one with no attempt left is
-- discarded, any other is available again now. The error appended says why,
-- for River UI.
UPDATE river_job j
SET state = (CASE
        WHEN j.metadata ? 'cancel_attempted_at' THEN 'cancelled'
        WHEN j.attempt >= j.max_attempts THEN 'discarded'
        ELSE 'available'
    END)::river_job_state,
    finalized_at = CASE WHEN j.metadata ? 'cancel_attempted_at' OR j.attempt >= j.max_attempts THEN now() END,
    scheduled_at = CASE WHEN j.metadata ? 'cancel_attempted_at' OR j.attempt >= j.max_attempts THEN j.scheduled_at ELSE now() END,
    errors = array_append(j.errors, jsonb_build_object(
        'at', now(), 'attempt', j.attempt, 'error', @message::text, 'trace', ''))
WHERE j.state = 'running'
  AND j.attempted_by[array_length(j.attempted_by, 1)] = ANY(@client_ids::text[])
RETURNING j.id, j.kind, j.state;

-- name: LeaderResignGone :execrows
-- Deletes River's leader row when its leader is one of the dead clients and
-- announces the resignation the way River's own does, so that a live
-- process is elected within milliseconds instead of after the row expires.
WITH gone AS (
    DELETE FROM river_leader WHERE leader_id = ANY(@client_ids::text[]) RETURNING leader_id
)
SELECT pg_notify(current_schema() || '.river_leadership',
                 json_build_object('leader_id', leader_id, 'action', 'resigned')::text)
FROM gone;
