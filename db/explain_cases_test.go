package db_test

import (
	"context"
	"encoding/json"
	"time"

	"github.com/batonrun/baton/db/dbsqlc"
)

// queryCase is a query of db/queries with representative parameters. The
// fixture's rows these name: tenant t42; execution 54342 (completed, on
// thread 54342), 97542 (pending), 97642 (running), 97650 (running, a child
// of 97550), 97842 (waiting for an agent); thread 97000 has a message in
// its outbox, 97001 one queued for its lock, 97006 one received for its
// session; execution 97002 has a steered message. scalefixture names the
// rows with more than their share: thread 154342 (BusyThread) holds a
// conversation of 2,000 messages, execution 954342 (JobsExecution) has 41
// River jobs.
type queryCase struct {
	name  string
	reach reach
	call  func(*recorder)
}

var (
	ctx = context.Background()
	q   = dbsqlc.New()
	raw = json.RawMessage(`{}`)
)

// queryCases returns the cases EXPLAIN checks directly.
func queryCases() []queryCase {
	var cases []queryCase
	for _, group := range [][]queryCase{
		executionCases(), waitCases(), laneCases(), threadCases(), messageCases(), inboundCases(),
		monitorCases(), consoleCases(), otherCases(),
	} {
		cases = append(cases, group...)
	}
	return cases
}

func executionCases() []queryCase {
	list := func(p dbsqlc.ExecutionViewListParams) func(*recorder) {
		p.TenantID, p.Max = "t42", 50
		return func(r *recorder) { _, _ = q.ExecutionViewList(ctx, r, &p) }
	}
	return []queryCase{
		{"ExecutionReserve", slice, func(r *recorder) {
			_, _ = q.ExecutionReserve(ctx, r, &dbsqlc.ExecutionReserveParams{Lane: "main", LaneLimit: 4, TenantID: "t42"})
		}},
		{"ExecutionReserve/session", slice, func(r *recorder) {
			_, _ = q.ExecutionReserve(ctx, r, &dbsqlc.ExecutionReserveParams{
				Lane: "main", LaneLimit: 4, TenantID: "t42", SessionKey: ptr("session:thread-97642"), DrawMessage: true})
		}},
		{"ExecutionInsert", write, func(r *recorder) {
			_, _ = q.ExecutionInsert(ctx, r, &dbsqlc.ExecutionInsertParams{
				TenantID: "t42", ExecutionID: "exec-new", WorkflowID: "wf-1", Version: "1.0", Lane: "main", ThreadID: 54342,
				Input: raw, Context: raw, Variables: raw})
		}},
		{"ExecutionInsertSettled", write, func(r *recorder) {
			_ = q.ExecutionInsertSettled(ctx, r, &dbsqlc.ExecutionInsertSettledParams{
				ID: 2000000, TenantID: "t42", ExecutionID: "exec-new", WorkflowID: "wf-1", Version: "1.0",
				Status: dbsqlc.ExecutionStatusRunning, Lane: "main", ThreadID: 54342, Input: raw, Context: raw,
				Variables: raw, NodePath: []string{"start"}, CreatedAt: time.Now(), StartedAt: ptr(time.Now()), UpdatedAt: time.Now()})
		}},
		{"ExecutionGetByID", slice, func(r *recorder) { _, _ = q.ExecutionGetByID(ctx, r, 54342) }},
		{"ExecutionGetByExecutionID", slice, func(r *recorder) {
			_, _ = q.ExecutionGetByExecutionID(ctx, r, &dbsqlc.ExecutionGetByExecutionIDParams{TenantID: "t42", ExecutionID: "exec-54342"})
		}},
		{"ExecutionViewByExecutionID", slice, func(r *recorder) {
			_, _ = q.ExecutionViewByExecutionID(ctx, r, &dbsqlc.ExecutionViewByExecutionIDParams{TenantID: "t42", ExecutionID: "exec-54342"})
		}},
		{"ExecutionViewList", slice, list(dbsqlc.ExecutionViewListParams{})},
		{"ExecutionViewList/status", slice, list(dbsqlc.ExecutionViewListParams{Status: ptr("running")})},
		{"ExecutionViewList/completed", slice, list(dbsqlc.ExecutionViewListParams{Status: ptr("completed")})},
		{"ExecutionViewList/workflow", slice, list(dbsqlc.ExecutionViewListParams{WorkflowID: ptr("wf-2")})},
		{"ExecutionViewList/thread", slice, list(dbsqlc.ExecutionViewListParams{ThreadKey: ptr("thread-54342")})},
		{"ExecutionViewList/parent", slice, list(dbsqlc.ExecutionViewListParams{ParentKey: ptr("exec-54242")})},
		{"ExecutionViewList/before", slice, list(dbsqlc.ExecutionViewListParams{BeforeID: ptr(int64(50042))})},
		{"ExecutionLockForStep", slice, func(r *recorder) {
			_, _ = q.ExecutionLockForStep(ctx, r, &dbsqlc.ExecutionLockForStepParams{ID: 97642, StepSeq: 3})
		}},
		{"ExecutionStart", slice, func(r *recorder) { _, _ = q.ExecutionStart(ctx, r, 97542) }},
		{"ExecutionCheckpoint", slice, func(r *recorder) {
			_, _ = q.ExecutionCheckpoint(ctx, r, &dbsqlc.ExecutionCheckpointParams{
				CurrentNodeID: "n", Variables: raw, NodePath: []string{"start"}, ID: 97642, StepSeq: 3})
		}},
		{"ExecutionFinishStep", slice, func(r *recorder) {
			_, _ = q.ExecutionFinishStep(ctx, r, &dbsqlc.ExecutionFinishStepParams{
				Status: "completed", CurrentNodeID: "end", Variables: raw, NodePath: []string{"start"},
				ResultType: "success", ID: 97642, StepSeq: 3})
		}},
		{"ExecutionFail", slice, func(r *recorder) {
			_, _ = q.ExecutionFail(ctx, r, &dbsqlc.ExecutionFailParams{ErrorCode: "x", ErrorMessage: "x", ID: 97642})
		}},
		{"ExecutionCancel", slice, func(r *recorder) {
			_, _ = q.ExecutionCancel(ctx, r, &dbsqlc.ExecutionCancelParams{ResultSummary: "x", CancelledBy: "x", ID: 97642})
		}},
		{"ExecutionAncestors", slice, func(r *recorder) { _, _ = q.ExecutionAncestors(ctx, r, 97650) }},
		{"ExecutionSetLockInheritedFrom", slice, func(r *recorder) {
			_ = q.ExecutionSetLockInheritedFrom(ctx, r, &dbsqlc.ExecutionSetLockInheritedFromParams{LockInheritedFrom: 97550, ID: 97650})
		}},
		{"ExecutionToolRetry", slice, func(r *recorder) {
			_, _ = q.ExecutionToolRetry(ctx, r, &dbsqlc.ExecutionToolRetryParams{ID: 97642, StepSeq: 3, NodeAttempt: 0})
		}},
		{"ExecutionLockFamily", slice, func(r *recorder) { _, _ = q.ExecutionLockFamily(ctx, r, 97650) }},
		{"ExecutionSetNodeAttempt", slice, func(r *recorder) {
			_ = q.ExecutionSetNodeAttempt(ctx, r, &dbsqlc.ExecutionSetNodeAttemptParams{NodeAttempt: 1, ID: 97642})
		}},
		{"ExecutionListStranded", live, func(r *recorder) {
			_, _ = q.ExecutionListStranded(ctx, r, &dbsqlc.ExecutionListStrandedParams{IdleSeconds: 60, Max: 100})
		}},
		{"ExecutionHasLiveStep", slice, func(r *recorder) { _, _ = q.ExecutionHasLiveStep(ctx, r, 97642) }},
		{"ExecutionMarkRecovered", slice, func(r *recorder) {
			_, _ = q.ExecutionMarkRecovered(ctx, r, &dbsqlc.ExecutionMarkRecoveredParams{ID: 97642, StepSeq: 3})
		}},
		{"ExecutionDepth", slice, func(r *recorder) {
			_, _ = q.ExecutionDepth(ctx, r, &dbsqlc.ExecutionDepthParams{ID: 97650, Max: 16})
		}},
		{"EventInsertMany", write, func(r *recorder) {
			_ = q.EventInsertMany(ctx, r, &dbsqlc.EventInsertManyParams{
				TenantIds: []string{"t42"}, ExecutionIds: []int64{97642}, Actions: []string{"workflow.step_update"},
				Levels: []string{"info"}, Messages: []string{"x"}, NodeIds: []string{"n"}, Payloads: []json.RawMessage{raw}})
		}},
		{"EventListByExecution", slice, func(r *recorder) {
			_, _ = q.EventListByExecution(ctx, r, &dbsqlc.EventListByExecutionParams{ExecutionID: 54342, AfterID: 0, Max: 100})
		}},
		// The live tail reads the events between its cursor and the fence, a
		// page at most.
		{"EventStreamRange", slice, func(r *recorder) {
			_, _ = q.EventStreamRange(ctx, r, &dbsqlc.EventStreamRangeParams{
				AfterID: 9_999_500, UpTo: 10_000_000, Actions: []string{"workflow.started", "workflow.completed"}, Max: 500})
		}},
		{"EventStreamRange/tenant", slice, func(r *recorder) {
			_, _ = q.EventStreamRange(ctx, r, &dbsqlc.EventStreamRangeParams{
				AfterID: 9_999_500, UpTo: 10_000_000, Actions: []string{"workflow.started"}, TenantID: ptr("t42"),
				ExecutionKey: ptr("exec-999942"), Max: 500})
		}},
	}
}

func waitCases() []queryCase {
	return []queryCase{
		{"ExecutionEnterWait", slice, func(r *recorder) {
			_, _ = q.ExecutionEnterWait(ctx, r, &dbsqlc.ExecutionEnterWaitParams{
				CurrentNodeID: "w", Variables: raw, NodePath: []string{"start"}, WaitingFor: "response",
				WaitingUntil: time.Now(), WaitingData: raw, ID: 97642, StepSeq: 3})
		}},
		{"ExecutionLockWaiting", slice, func(r *recorder) {
			_, _ = q.ExecutionLockWaiting(ctx, r, &dbsqlc.ExecutionLockWaitingParams{ID: 97842, WaitSeq: 0})
		}},
		{"ExecutionLockByExecutionID", slice, func(r *recorder) {
			_, _ = q.ExecutionLockByExecutionID(ctx, r, &dbsqlc.ExecutionLockByExecutionIDParams{TenantID: "t42", ExecutionID: "exec-97842"})
		}},
		{"ExecutionLockWaitingMatches", slice, func(r *recorder) {
			_, _ = q.ExecutionLockWaitingMatches(ctx, r, &dbsqlc.ExecutionLockWaitingMatchesParams{
				TenantID: "t42", WaitingFor: "agent", Max: 1000})
		}},
		{"ExecutionLockWaitingMatches/thread", slice, func(r *recorder) {
			_, _ = q.ExecutionLockWaitingMatches(ctx, r, &dbsqlc.ExecutionLockWaitingMatchesParams{
				TenantID: "t42", WaitingFor: "response", ThreadKey: ptr("thread-97842"), Max: 100})
		}},
		{"ExecutionLockWaitingMatches/event", slice, func(r *recorder) {
			_, _ = q.ExecutionLockWaitingMatches(ctx, r, &dbsqlc.ExecutionLockWaitingMatchesParams{
				TenantID: "t42", WaitingFor: "event", EventKey: ptr("ev-1"), Max: 1000})
		}},
		{"ExecutionResume", slice, func(r *recorder) {
			_, _ = q.ExecutionResume(ctx, r, &dbsqlc.ExecutionResumeParams{CurrentNodeID: "n", Variables: raw, ID: 97842, WaitSeq: 1})
		}},
		{"ExecutionSetWaitingData", slice, func(r *recorder) {
			_, _ = q.ExecutionSetWaitingData(ctx, r, &dbsqlc.ExecutionSetWaitingDataParams{WaitingData: raw, ID: 97842, WaitSeq: 1})
		}},
		{"ExecutionRewait", slice, func(r *recorder) {
			_, _ = q.ExecutionRewait(ctx, r, &dbsqlc.ExecutionRewaitParams{
				WaitingUntil: time.Now(), WaitingData: raw, Variables: raw, ID: 97842, WaitSeq: 1})
		}},
		{"ExecutionEndWait", slice, func(r *recorder) {
			_, _ = q.ExecutionEndWait(ctx, r, &dbsqlc.ExecutionEndWaitParams{
				Status: dbsqlc.ExecutionStatusTimeout, Variables: raw, ResultType: "timeout", ID: 97842, WaitSeq: 1})
		}},
		{"InboundEventClaim", write, func(r *recorder) {
			_, _ = q.InboundEventClaim(ctx, r, &dbsqlc.InboundEventClaimParams{TenantID: "t42", EventID: "ev-new", EventType: "x", Data: raw})
		}},
		{"InboundEventGet", slice, func(r *recorder) {
			_, _ = q.InboundEventGet(ctx, r, &dbsqlc.InboundEventGetParams{TenantID: "t42", EventID: "ev-54342"})
		}},
		{"InboundEventSetResponse", slice, func(r *recorder) {
			_ = q.InboundEventSetResponse(ctx, r, &dbsqlc.InboundEventSetResponseParams{Response: raw, TenantID: "t42", EventID: "ev-54342"})
		}},
		{"InboundEventBuffer", slice, func(r *recorder) {
			_ = q.InboundEventBuffer(ctx, r, &dbsqlc.InboundEventBufferParams{ExecutionID: 97642, TenantID: "t42", EventID: "ev-54342"})
		}},
		{"InboundEventBufferedFor", slice, func(r *recorder) {
			_, _ = q.InboundEventBufferedFor(ctx, r, &dbsqlc.InboundEventBufferedForParams{ExecutionID: 194000, EventTypes: []string{"payment.done"}})
		}},
		{"InboundEventMarkApplied", slice, func(r *recorder) {
			_ = q.InboundEventMarkApplied(ctx, r, &dbsqlc.InboundEventMarkAppliedParams{TenantID: "t0", EventID: "ev-97000"})
		}},
	}
}

func laneCases() []queryCase {
	return []queryCase{
		{"LaneSetLimit", slice, func(r *recorder) {
			_ = q.LaneSetLimit(ctx, r, &dbsqlc.LaneSetLimitParams{MaxConcurrent: 4, TenantID: "", Name: "main"})
		}},
		{"LaneEnsure", write, func(r *recorder) {
			_ = q.LaneEnsure(ctx, r, &dbsqlc.LaneEnsureParams{TenantID: "t42", Name: "session:thread-97642", MaxConcurrent: 1})
		}},
		{"LaneEnsureOwned", slice, func(r *recorder) {
			_, _ = q.LaneEnsureOwned(ctx, r, &dbsqlc.LaneEnsureOwnedParams{TenantID: "t2", Name: "own-3", MaxConcurrent: 2, MaxLanes: 16})
		}},
		{"LaneLock", slice, func(r *recorder) {
			_, _ = q.LaneLock(ctx, r, &dbsqlc.LaneLockParams{TenantID: "", Name: "main"})
		}},
		{"LaneTryLock", slice, func(r *recorder) {
			_, _ = q.LaneTryLock(ctx, r, &dbsqlc.LaneTryLockParams{TenantID: "t42", Name: "session:thread-97642"})
		}},
		{"LaneCountRunning", slice, func(r *recorder) { _, _ = q.LaneCountRunning(ctx, r, "main") }},
		{"LaneTenantRunning", slice, func(r *recorder) {
			_, _ = q.LaneTenantRunning(ctx, r, &dbsqlc.LaneTenantRunningParams{Lane: "main", TenantID: "t42"})
		}},
		{"SessionCountRunning", slice, func(r *recorder) {
			_, _ = q.SessionCountRunning(ctx, r, &dbsqlc.SessionCountRunningParams{TenantID: "t42", SessionKey: "session:thread-97642"})
		}},
		// Admission reads every running run of the lane (the running CTE)
		// and, for each tenant with pending work, its heads, each with a
		// probe for a running run of its session: its cost follows the
		// live set.
		{"LaneFairCandidates", live, func(r *recorder) {
			_, _ = q.LaneFairCandidates(ctx, r, &dbsqlc.LaneFairCandidatesParams{Lane: "main", PerTenant: 4, MaxTenants: 1000})
		}},
		{"LaneFairCandidates/owned", tenants, func(r *recorder) {
			_, _ = q.LaneFairCandidates(ctx, r, &dbsqlc.LaneFairCandidatesParams{Lane: "own-1", Owner: "t2", PerTenant: 4, MaxTenants: 1000})
		}},
		{"LaneSharedRoom", live, func(r *recorder) {
			_, _ = q.LaneSharedRoom(ctx, r, &dbsqlc.LaneSharedRoomParams{Lane: "main", Self: 97642})
		}},
		{"LaneExists", slice, func(r *recorder) {
			_, _ = q.LaneExists(ctx, r, &dbsqlc.LaneExistsParams{TenantID: "", Name: "main"})
		}},
		{"ExecutionAdmit", slice, func(r *recorder) { _, _ = q.ExecutionAdmit(ctx, r, 97542) }},
		{"ExecutionRequeue", slice, func(r *recorder) { _, _ = q.ExecutionRequeue(ctx, r, 97642) }},
		{"ExecutionPauseForBreaker", slice, func(r *recorder) {
			_, _ = q.ExecutionPauseForBreaker(ctx, r, &dbsqlc.ExecutionPauseForBreakerParams{NotBefore: time.Now(), ID: 97642, StepSeq: 3})
		}},
		{"LaneArmDispatch", slice, func(r *recorder) {
			_, _ = q.LaneArmDispatch(ctx, r, &dbsqlc.LaneArmDispatchParams{Owner: "", Name: "main"})
		}},
		{"LaneDisarmDispatch", slice, func(r *recorder) {
			_ = q.LaneDisarmDispatch(ctx, r, &dbsqlc.LaneDisarmDispatchParams{Owner: "", Name: "main"})
		}},
		{"LaneListNeedingDispatch", live, func(r *recorder) {
			_, _ = q.LaneListNeedingDispatch(ctx, r, &dbsqlc.LaneListNeedingDispatchParams{IdleSeconds: 2, RearmAfterSeconds: 60})
		}},
		{"MonitorLaneList", slice, func(r *recorder) {
			_, _ = q.MonitorLaneList(ctx, r, &dbsqlc.MonitorLaneListParams{TenantID: "t42", Max: 50})
		}},
		{"SessionActiveRun", slice, func(r *recorder) {
			_, _ = q.SessionActiveRun(ctx, r, &dbsqlc.SessionActiveRunParams{TenantID: "t42", SessionKey: "session:thread-97642"})
		}},
		{"SessionArmFlush", slice, func(r *recorder) {
			_, _ = q.SessionArmFlush(ctx, r, &dbsqlc.SessionArmFlushParams{FlushAt: time.Now(), TenantID: "t42", Name: "session:thread-97642"})
		}},
		{"SessionDisarmFlush", slice, func(r *recorder) {
			_ = q.SessionDisarmFlush(ctx, r, &dbsqlc.SessionDisarmFlushParams{TenantID: "t42", Name: "session:thread-97642"})
		}},
		{"SessionListNeedingFlush", live, func(r *recorder) { _, _ = q.SessionListNeedingFlush(ctx, r) }},
	}
}

func otherCases() []queryCase {
	return []queryCase{
		{"ThreadIDByContact", slice, func(r *recorder) {
			_, _ = q.ThreadIDByContact(ctx, r, &dbsqlc.ThreadIDByContactParams{TenantID: "t42", Channel: "api", Contact: "thread-97642"})
		}},
		{"TimersPromote", slice, func(r *recorder) {
			_, _ = q.TimersPromote(ctx, r, &dbsqlc.TimersPromoteParams{Queues: []string{"high", "medium"}, LookaheadSeconds: 5,
				Kinds: []string{"execution.wait_timeout"}, Max: 1000})
		}},
		{"IdempotencyClaim", write, func(r *recorder) {
			_, _ = q.IdempotencyClaim(ctx, r, &dbsqlc.IdempotencyClaimParams{TenantID: "t42", Endpoint: "workflow.execute", MessageID: "msg-new"})
		}},
		{"IdempotencyGet", slice, func(r *recorder) {
			_, _ = q.IdempotencyGet(ctx, r, &dbsqlc.IdempotencyGetParams{TenantID: "t42", Endpoint: "workflow.execute", MessageID: "msg-54342"})
		}},
		{"IdempotencySetResponse", slice, func(r *recorder) {
			_ = q.IdempotencySetResponse(ctx, r, &dbsqlc.IdempotencySetResponseParams{
				StatusCode: 200, Response: raw, TenantID: "t42", Endpoint: "workflow.execute", MessageID: "msg-54342"})
		}},
		{"DefinitionInsert", write, func(r *recorder) {
			_, _ = q.DefinitionInsert(ctx, r, &dbsqlc.DefinitionInsertParams{
				TenantID: "t42", WorkflowID: "wf-3", Version: "2.0", Name: "wf", Definition: raw})
		}},
		{"DefinitionLatestID", slice, func(r *recorder) {
			_, _ = q.DefinitionLatestID(ctx, r, &dbsqlc.DefinitionLatestIDParams{TenantID: "t42", WorkflowID: "wf-3"})
		}},
		{"DefinitionGetByID", slice, func(r *recorder) { _, _ = q.DefinitionGetByID(ctx, r, 54342) }},
		{"DefinitionGetByVersion", slice, func(r *recorder) {
			_, _ = q.DefinitionGetByVersion(ctx, r, &dbsqlc.DefinitionGetByVersionParams{TenantID: "t42", WorkflowID: "wf-3", Version: "1.2"})
		}},
		{"DefinitionListLatest", slice, func(r *recorder) {
			_, _ = q.DefinitionListLatest(ctx, r, &dbsqlc.DefinitionListLatestParams{TenantID: "t42", AfterWorkflowID: "", Max: 50})
		}},
		{"JobHandBack", live, func(r *recorder) {
			_, _ = q.JobHandBack(ctx, r, &dbsqlc.JobHandBackParams{Message: "gone", ClientIds: []string{"client-1"}})
		}},
	}
}
