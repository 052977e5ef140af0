// Package metrics exposes Baton's metrics to Prometheus:
//
//   - workflow_execute_duration_ms (histogram; domain, action, workflow_id):
//     creation to end of each execution that reaches a terminal status.
//   - workflow_step_duration_ms (histogram; domain, action, workflow_id,
//     step_id): each node run, a task's tool call included.
//   - workflow_error_count (counter; domain, action, error_code): executions
//     that failed, by code; domain and action are the code's first two parts
//     (workflow.execute.step_failed → workflow, execute).
//   - workflow_retry_count (counter; domain, action, workflow_id, step_id):
//     steps run again after a failed attempt.
//   - workflow_queue_depth (gauge; domain, action, queue): River jobs due
//     (scheduled_at passed) and not yet taken, read from river_job at scrape
//     time; a timer waiting for its time is not counted, and the queues high,
//     medium and low show even when empty.
//   - workflow_active_executions (gauge; domain, action, tenant_id, status):
//     pending, running and waiting executions, read at scrape time, with a
//     series for each of the three statuses of every tenant that has stored
//     a workflow definition (0 when it has none live), so that dashboards and
//     absent() alerts see zeros rather than no series.
//
// plus baton_thread_locks_held (tenant_id), baton_outbound_pending, the
// lanes' baton_lane_limit, baton_lane_running and baton_lane_pending
// (lane), and baton_retention_removed_total (table): the rows this
// process's retention sweeps removed. The counters and histograms are observed in this process by the
// engine (through engine.Metrics); the gauges come from SQL on every
// scrape, so any process shows the whole database. No label ever carries an
// execution or thread id.
//
// Labels a tenant chooses are bounded, so no tenant can grow a scrape
// without limit: each metric keeps the first 100 (Config.LabelValues)
// workflow_id values, workflow_id/step_id pairs and error codes this
// process sees, and counts later ones as "other" (a new step of a kept
// workflow keeps its workflow_id, with step_id "other"); the lane gauges
// name only the built-in lanes main, subagent and cron, and sum every other
// lane under "other".
//
// metrics imports engine and db/dbsqlc and never imports httpapi or jobs.
package metrics
