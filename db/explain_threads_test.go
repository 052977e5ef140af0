package db_test

import (
	"github.com/batonrun/baton/db/dbsqlc"
)

func threadCases() []queryCase {
	return []queryCase{
		{"ThreadInsertIfAbsent", write, func(r *recorder) {
			_, _ = q.ThreadInsertIfAbsent(ctx, r, &dbsqlc.ThreadInsertIfAbsentParams{
				TenantID: "t42", ThreadID: "thread-new", Channel: "api", Contact: "thread-new"})
		}},
		{"ThreadInsertNew", write, func(r *recorder) {
			_ = q.ThreadInsertNew(ctx, r, &dbsqlc.ThreadInsertNewParams{
				ID: 2000000, TenantID: "t42", ThreadID: "implicit:exec-new", Channel: "api", Contact: "implicit:exec-new"})
		}},
		{"ThreadLockByThreadID", slice, func(r *recorder) {
			_, _ = q.ThreadLockByThreadID(ctx, r, &dbsqlc.ThreadLockByThreadIDParams{TenantID: "t42", ThreadID: "thread-54342"})
		}},
		{"ThreadGetByID", slice, func(r *recorder) { _, _ = q.ThreadGetByID(ctx, r, 54342) }},
		{"ThreadLock", slice, func(r *recorder) { _, _ = q.ThreadLock(ctx, r, 54342) }},
		{"ThreadTryLock", slice, func(r *recorder) { _, _ = q.ThreadTryLock(ctx, r, 54342) }},
		{"ThreadGetByThreadID", slice, func(r *recorder) {
			_, _ = q.ThreadGetByThreadID(ctx, r, &dbsqlc.ThreadGetByThreadIDParams{TenantID: "t42", ThreadID: "thread-54342"})
		}},
		{"ThreadInsertByContact", write, func(r *recorder) {
			_, _ = q.ThreadInsertByContact(ctx, r, &dbsqlc.ThreadInsertByContactParams{
				TenantID: "t42", ThreadID: "thread-new", Channel: "sms", Contact: "+1555"})
		}},
		{"ThreadUpdateByContact", slice, func(r *recorder) {
			_, _ = q.ThreadUpdateByContact(ctx, r, &dbsqlc.ThreadUpdateByContactParams{
				DefaultWorkflowID: ptr("wf-1"), TenantID: "t42", Channel: "api", Contact: "thread-54342"})
		}},
		{"ThreadSetLock", slice, func(r *recorder) {
			_ = q.ThreadSetLock(ctx, r, &dbsqlc.ThreadSetLockParams{ExecutionID: 97642, ID: 97642})
		}},
		{"ThreadClearLock", slice, func(r *recorder) { _ = q.ThreadClearLock(ctx, r, 97642) }},
		{"ThreadArmDrain", slice, func(r *recorder) { _, _ = q.ThreadArmDrain(ctx, r, 97642) }},
		{"ThreadDisarmDrain", slice, func(r *recorder) { _ = q.ThreadDisarmDrain(ctx, r, 97642) }},
		{"ThreadListNeedingDrain", live, func(r *recorder) {
			_, _ = q.ThreadListNeedingDrain(ctx, r, &dbsqlc.ThreadListNeedingDrainParams{RearmAfterSeconds: 60, Max: 100})
		}},
		{"ThreadForceRearmDrain", slice, func(r *recorder) { _ = q.ThreadForceRearmDrain(ctx, r, 97642) }},
		{"ActiveLockList", slice, func(r *recorder) {
			_, _ = q.ActiveLockList(ctx, r, &dbsqlc.ActiveLockListParams{TenantID: "t42", LockTimeoutSeconds: 600, Max: 50})
		}},
		{"ActiveLockList/stale", slice, func(r *recorder) {
			_, _ = q.ActiveLockList(ctx, r, &dbsqlc.ActiveLockListParams{TenantID: "t42", StaleOnly: true, LockTimeoutSeconds: 600, Max: 50})
		}},
		{"ThreadSetQueueSettings", slice, func(r *recorder) {
			_ = q.ThreadSetQueueSettings(ctx, r, &dbsqlc.ThreadSetQueueSettingsParams{QueueSettings: raw, ID: 97642})
		}},
		{"ThreadViewByThreadID", slice, func(r *recorder) {
			_, _ = q.ThreadViewByThreadID(ctx, r, &dbsqlc.ThreadViewByThreadIDParams{TenantID: "t42", ThreadID: "thread-54342"})
		}},
		{"ThreadTakeFreeLock", slice, func(r *recorder) {
			_, _ = q.ThreadTakeFreeLock(ctx, r, &dbsqlc.ThreadTakeFreeLockParams{ID: 97001, ExecutionID: 97642})
		}},
		{"ThreadReleaseLock", slice, func(r *recorder) { _, _ = q.ThreadReleaseLock(ctx, r, 97001) }},
	}
}

func messageCases() []queryCase {
	byThread := func(p dbsqlc.MessageListByThreadParams) func(*recorder) {
		p.ThreadID, p.Max = 54342, 50
		return func(r *recorder) { _, _ = q.MessageListByThread(ctx, r, &p) }
	}
	return []queryCase{
		{"MessageInsertOutbound", write, func(r *recorder) {
			_ = q.MessageInsertOutbound(ctx, r, &dbsqlc.MessageInsertOutboundParams{
				ID: 9_000_000_001, TenantID: "t42", ThreadID: 97642, ExecutionID: 97642, NodeID: "send", StepSeq: 9, Body: "hola"})
		}},
		{"OutboxHasPending", slice, func(r *recorder) { _, _ = q.OutboxHasPending(ctx, r, 97000) }},
		{"OutboxListStranded", live, func(r *recorder) {
			_, _ = q.OutboxListStranded(ctx, r, &dbsqlc.OutboxListStrandedParams{IdleSeconds: 2, Max: 500})
		}},
		{"MessageRecordDelivered", slice, func(r *recorder) {
			_, _ = q.MessageRecordDelivered(ctx, r, &dbsqlc.MessageRecordDeliveredParams{
				ThreadKey: "thread-97000", ExecutionKey: "exec-97000", Channel: "api", ID: 97000, Epoch: 1})
		}},
		{"MessageFirstQueued", slice, func(r *recorder) { _, _ = q.MessageFirstQueued(ctx, r, 97001) }},
		{"MessageCountQueued", slice, func(r *recorder) { _, _ = q.MessageCountQueued(ctx, r, 97001) }},
		{"MessageReleaseQueued", slice, func(r *recorder) {
			_, _ = q.MessageReleaseQueued(ctx, r, &dbsqlc.MessageReleaseQueuedParams{ThreadID: 97001, ExecutionIds: []int64{97001, 97101}})
		}},
		{"MessageDropQueued", slice, func(r *recorder) { _, _ = q.MessageDropQueued(ctx, r, 97001) }},
		{"MessageRecordFailedAttempt", slice, func(r *recorder) {
			_ = q.MessageRecordFailedAttempt(ctx, r, &dbsqlc.MessageRecordFailedAttemptParams{LastError: "x", ID: 97000})
		}},
		{"MessageListByExecution", slice, func(r *recorder) { _, _ = q.MessageListByExecution(ctx, r, 54342) }},
		{"MessageListByThread", slice, byThread(dbsqlc.MessageListByThreadParams{})},
		{"MessageListByThread/direction", slice, byThread(dbsqlc.MessageListByThreadParams{Direction: ptr("in")})},
		{"MessageListByThread/status", slice, byThread(dbsqlc.MessageListByThreadParams{Status: ptr("delivered"), AfterID: 1000})},
		{"MessageTimeline", slice, func(r *recorder) {
			_, _ = q.MessageTimeline(ctx, r, &dbsqlc.MessageTimelineParams{TenantID: "t42", ThreadID: "thread-54342"})
		}},
	}
}

func inboundCases() []queryCase {
	return []queryCase{
		{"InboundGetByExternalID", slice, func(r *recorder) {
			_, _ = q.InboundGetByExternalID(ctx, r, &dbsqlc.InboundGetByExternalIDParams{ThreadID: 97006, ExternalID: "m-97005"})
		}},
		{"InboundInsert", write, func(r *recorder) {
			_, _ = q.InboundInsert(ctx, r, &dbsqlc.InboundInsertParams{
				TenantID: "t42", ThreadID: 97006, Body: "hi", Status: "received", ExternalID: "m-new", Channel: "api", Outcome: "queued"})
		}},
		{"InboundListReceived", slice, func(r *recorder) { _, _ = q.InboundListReceived(ctx, r, 97006) }},
		{"InboundCountReceived", slice, func(r *recorder) { _, _ = q.InboundCountReceived(ctx, r, 97006) }},
		{"InboundDropOldest", slice, func(r *recorder) { _, _ = q.InboundDropOldest(ctx, r, 97006) }},
		{"InboundSummaryRow", slice, func(r *recorder) { _, _ = q.InboundSummaryRow(ctx, r, 97006) }},
		{"InboundUpdateSummary", slice, func(r *recorder) {
			_ = q.InboundUpdateSummary(ctx, r, &dbsqlc.InboundUpdateSummaryParams{Body: "x", DroppedCount: 1, ID: 1_000_005})
		}},
		{"InboundConsume", slice, func(r *recorder) {
			_ = q.InboundConsume(ctx, r, &dbsqlc.InboundConsumeParams{ExecutionID: 97642, Ids: []int64{1_097_005, 1_097_006}})
		}},
		{"InboundTakeSteered", slice, func(r *recorder) { _, _ = q.InboundTakeSteered(ctx, r, 97002) }},
		{"InboundRevertSteered", slice, func(r *recorder) { _, _ = q.InboundRevertSteered(ctx, r, 97002) }},
		{"InboundLastReceivedAt", slice, func(r *recorder) { _, _ = q.InboundLastReceivedAt(ctx, r, 97006) }},
		{"ExecutionAppendHistory", slice, func(r *recorder) {
			_ = q.ExecutionAppendHistory(ctx, r, &dbsqlc.ExecutionAppendHistoryParams{
				Entries: []byte(`[{"role":"user","content":"hi"}]`), MaxEntries: 100, Variables: raw, ID: 97642})
		}},
	}
}

func monitorCases() []queryCase {
	return []queryCase{
		{"MonitorExecutionStatus", slice, func(r *recorder) { _, _ = q.MonitorExecutionStatus(ctx, r, "t42") }},
		{"MonitorWaiting", slice, func(r *recorder) {
			_, _ = q.MonitorWaiting(ctx, r, &dbsqlc.MonitorWaitingParams{TenantID: "t42", Max: 50})
		}},
		{"MonitorStuck", slice, func(r *recorder) {
			_, _ = q.MonitorStuck(ctx, r, &dbsqlc.MonitorStuckParams{TenantID: "t42", Max: 50})
		}},
		{"MonitorCLIStatus", live, func(r *recorder) { _, _ = q.MonitorCLIStatus(ctx, r, nil) }},
		{"MonitorCLIStatus/tenant", slice, func(r *recorder) { _, _ = q.MonitorCLIStatus(ctx, r, ptr("t42")) }},
		{"MonitorCLIWaiting", live, func(r *recorder) {
			_, _ = q.MonitorCLIWaiting(ctx, r, &dbsqlc.MonitorCLIWaitingParams{Max: 50})
		}},
		{"MonitorCLIWaiting/tenant", slice, func(r *recorder) {
			_, _ = q.MonitorCLIWaiting(ctx, r, &dbsqlc.MonitorCLIWaitingParams{TenantID: ptr("t42"), Max: 50})
		}},
		{"MonitorCLIStuck", live, func(r *recorder) {
			_, _ = q.MonitorCLIStuck(ctx, r, &dbsqlc.MonitorCLIStuckParams{Max: 50})
		}},
		{"MonitorCLIStuck/tenant", slice, func(r *recorder) {
			_, _ = q.MonitorCLIStuck(ctx, r, &dbsqlc.MonitorCLIStuckParams{TenantID: ptr("t42"), Max: 50})
		}},
		{"MonitorCLIActiveLocks", live, func(r *recorder) {
			_, _ = q.MonitorCLIActiveLocks(ctx, r, &dbsqlc.MonitorCLIActiveLocksParams{Max: 50})
		}},
		{"MonitorCLIActiveLocks/tenant", slice, func(r *recorder) {
			_, _ = q.MonitorCLIActiveLocks(ctx, r, &dbsqlc.MonitorCLIActiveLocksParams{TenantID: ptr("t42"), Max: 50})
		}},
		{"MonitorCLIStaleLocks", live, func(r *recorder) {
			_, _ = q.MonitorCLIStaleLocks(ctx, r, &dbsqlc.MonitorCLIStaleLocksParams{Max: 50})
		}},
		{"MonitorCLIStaleLocks/tenant", slice, func(r *recorder) {
			_, _ = q.MonitorCLIStaleLocks(ctx, r, &dbsqlc.MonitorCLIStaleLocksParams{TenantID: ptr("t42"), Max: 50})
		}},
		{"MonitorCLILanes", live, func(r *recorder) { _, _ = q.MonitorCLILanes(ctx, r, "") }},
		{"MonitorCLILanes/tenant", live, func(r *recorder) { _, _ = q.MonitorCLILanes(ctx, r, "t42") }},
		{"MetricsActiveExecutions", live, func(r *recorder) { _, _ = q.MetricsActiveExecutions(ctx, r) }},
		{"MetricsQueueDepth", live, func(r *recorder) { _, _ = q.MetricsQueueDepth(ctx, r) }},
		{"MetricsThreadLocks", live, func(r *recorder) { _, _ = q.MetricsThreadLocks(ctx, r) }},
		{"MetricsOutboundPending", live, func(r *recorder) { _, _ = q.MetricsOutboundPending(ctx, r) }},
		{"MetricsLanes", live, func(r *recorder) { _, _ = q.MetricsLanes(ctx, r) }},
	}
}
