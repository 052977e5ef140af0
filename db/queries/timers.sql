-- name: TimersPromote :execrows
-- Makes up to @max scheduled jobs of the timer kinds whose time comes within
-- @lookahead_seconds available, their scheduled_at kept: River's producers fetch
-- available jobs once their scheduled_at has passed, so each runs at its
-- time, as River's own scheduler does with the jobs it makes available one
-- interval ahead (jobs/timer.go). The conditions follow River's fetching
-- index (state, queue, priority, scheduled_at, id), so that only the jobs
-- due soon are read, however many timers wait further ahead. Timer jobs
-- have no unique key, so no uniqueness can conflict.
UPDATE river_job SET state = 'available'
WHERE id IN (
    SELECT id FROM river_job
    WHERE state = 'scheduled'
      AND queue = ANY(@queues::text[])
      AND priority = ANY('{1,2,3,4}'::smallint[])
      AND scheduled_at <= now() + make_interval(secs => @lookahead_seconds::float8)
      AND kind = ANY(@kinds::text[])
    ORDER BY scheduled_at
    LIMIT @max::int
    FOR UPDATE SKIP LOCKED
);
