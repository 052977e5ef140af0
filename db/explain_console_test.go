package db_test

import (
	"math"
	"time"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/internal/scalefixture"
)

// consoleCases are the console's own queries, with the arguments of its
// pages: the newest 201 messages of the busy thread and the page before
// them, the versions of a workflow, the jobs of an execution, a family,
// the workflow ids of the start form.
func consoleCases() []queryCase {
	timeline := func(before int64) func(*recorder) {
		return func(r *recorder) {
			_, _ = q.ConsoleTimeline(ctx, r, &dbsqlc.ConsoleTimelineParams{
				ThreadID: scalefixture.BusyThread, BeforeID: before, Max: 201})
		}
	}
	sessionID := make([]byte, 32)
	return []queryCase{
		{"ConsoleSessionInsert", write, func(r *recorder) {
			_ = q.ConsoleSessionInsert(ctx, r, &dbsqlc.ConsoleSessionInsertParams{ID: sessionID, TenantID: "t42",
				Subject: "ana", Scopes: []string{"workflows:read"}, Csrf: "csrf", ExpiresAt: time.Now().Add(time.Hour)})
		}},
		{"ConsoleSessionGetLive", slice, func(r *recorder) {
			_, _ = q.ConsoleSessionGetLive(ctx, r, &dbsqlc.ConsoleSessionGetLiveParams{ID: sessionID})
		}},
		{"ConsoleSessionRevoke", slice, func(r *recorder) {
			_, _ = q.ConsoleSessionRevoke(ctx, r, &dbsqlc.ConsoleSessionRevokeParams{ID: sessionID})
		}},
		{"OperatorSessionInsert", write, func(r *recorder) {
			_ = q.OperatorSessionInsert(ctx, r, &dbsqlc.OperatorSessionInsertParams{ID: sessionID, Subject: "ops",
				ExpiresAt: time.Now().Add(time.Hour)})
		}},
		{"OperatorSessionGetLive", slice, func(r *recorder) {
			_, _ = q.OperatorSessionGetLive(ctx, r, &dbsqlc.OperatorSessionGetLiveParams{ID: sessionID})
		}},
		{"OperatorSessionRevoke", slice, func(r *recorder) {
			_, _ = q.OperatorSessionRevoke(ctx, r, &dbsqlc.OperatorSessionRevokeParams{ID: sessionID})
		}},
		{"ConsoleTimeline", longPage, timeline(math.MaxInt64)},
		{"ConsoleTimeline/before", longPage, timeline(scalefixture.BusyFirstMessage + scalefixture.BusyTurns)},
		{"ConsoleDefinitionVersions", slice, func(r *recorder) {
			_, _ = q.ConsoleDefinitionVersions(ctx, r, &dbsqlc.ConsoleDefinitionVersionsParams{
				TenantID: "t42", WorkflowID: "wf-2", Max: 50})
		}},
		{"ConsoleExecutionJobs", slice, func(r *recorder) {
			_, _ = q.ConsoleExecutionJobs(ctx, r, &dbsqlc.ConsoleExecutionJobsParams{
				ExecutionID: scalefixture.JobsExecution, Max: 20})
		}},
		// A child deep in a family of children (every tenth execution is
		// the child of the one 100 before): 16 levels up, 16 down.
		{"ConsoleFamily", slice, func(r *recorder) {
			_, _ = q.ConsoleFamily(ctx, r, &dbsqlc.ConsoleFamilyParams{ID: 954340, TenantID: "t40", MaxUp: 16, MaxDepth: 16, Max: 200})
		}},
		// Either of workflow_definition's (tenant_id, workflow_id, …)
		// indexes serves it; the planner picks one or the other.
		{"ConsoleWorkflowIDs", slice, func(r *recorder) {
			_, _ = q.ConsoleWorkflowIDs(ctx, r, &dbsqlc.ConsoleWorkflowIDsParams{TenantID: "t42", Max: 200})
		}},
		// An execution older than River's cleaner keeps jobs for has none:
		// the page must not read the table to find that out.
		{"ConsoleExecutionJobs/none", slice, func(r *recorder) {
			_, _ = q.ConsoleExecutionJobs(ctx, r, &dbsqlc.ConsoleExecutionJobsParams{ExecutionID: 54342, Max: 20})
		}},
	}
}

// wantIndexes names, for the cases where not any index will do, the
// indexes the plan must read: the jobs of an execution are found through
// River's GIN index on args, not by walking river_job's primary key
// backwards and testing each job's args; whether a message of the timeline
// was queued, by its message id, not by reading every event of its
// execution.
var wantIndexes = map[string][]string{
	"ConsoleExecutionJobs":      {"river_job_args_index"},
	"ConsoleExecutionJobs/none": {"river_job_args_index"},
	"ConsoleTimeline":           {"thread_message_thread_idx", "execution_event_queued_message_idx"},
	"ConsoleTimeline/before":    {"thread_message_thread_idx", "execution_event_queued_message_idx"},
	"ConsoleDefinitionVersions": {"workflow_definition_latest_idx"},
	"ConsoleFamily":             {"agent_execution_pkey", "agent_execution_parent_idx"},
}
