package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batonrun/baton/db/dbsqlc"
)

// StartParams describe a new execution (docs/api.md, payload of
// workflow.execute).
type StartParams struct {
	// TenantID owns the execution. Required.
	TenantID string
	// WorkflowID names the workflow to run. Required.
	WorkflowID string
	// Version picks a stored version; empty means the latest.
	Version string
	// ExecutionID is the client's id for the execution; empty means a
	// generated one.
	ExecutionID string
	// ThreadID names the conversation the execution talks in; empty means
	// an implicit thread of its own.
	ThreadID string
	// Lane overrides the definition's lane; empty means the definition's,
	// else "main".
	Lane string
	// Input becomes the initial variables.
	Input map[string]any
	// Context is kept with the execution and visible to templates as
	// "context".
	Context map[string]any
	// CorrelationID traces the request that started the execution.
	CorrelationID string
	// IdempotencyKey is the request's message_id, kept for reference.
	IdempotencyKey string
	// CallbackURL receives the result when the execution ends.
	CallbackURL string
	// CallbackEvents are the callbacks CallbackURL receives (result,
	// input_request, status, error); nil means result and input_request.
	CallbackEvents []string
	// Priority is the envelope's priority, 0 (lowest) to 10; callers pass 5
	// when the request names none.
	Priority int
	// ParentExecutionID is the row id of the execution that triggered this
	// one (trigger_agent); zero for a top-level execution.
	ParentExecutionID int64
	// CanInheritLock lets this child take over its parent's thread lock
	// (trigger_agent with waitForCompletion).
	CanInheritLock bool
	// SessionKey, when set, puts the execution in that session lane
	// ("session:<thread key>", limit 1) besides its lane; runs started by
	// inbound messages have one.
	SessionKey string
	// RestartedFrom is the row id of the execution this one restarts
	// (POST …/restart); zero otherwise.
	RestartedFrom int64
	// LaneFirst says tx holds no lane, thread or execution row yet (an API
	// request's own transaction): the start then waits for its lane's row
	// first, in lock order (lane, thread, execution rows), and is admitted in
	// its own transaction, instead of trying the row after its thread's
	// and, when another transaction holds it, staying pending for a
	// lane.dispatch job. Under concurrent starts that turns a job hop per
	// start into a short wait.
	LaneFirst bool
	// heldSession is the session an inbound message's transaction holds
	// (lockSession): its session lane's row and its thread's row are
	// already tx's, so the start neither waits for the lane nor resolves
	// the thread by its key again.
	heldSession *sessionCtx
}

// StartExecution creates an execution and starts it, in tx: the execution
// row, its thread, the workflow.started event and its first step commit
// together. A top-level execution runs its first step right there, up to
// its first wait, tool call or end; a child's first step is a job.
func (e *Engine) StartExecution(ctx context.Context, tx pgx.Tx, p StartParams) (*Execution, error) {
	if p.WorkflowID == "" {
		return nil, &InputError{Field: "payload.workflow_id", Message: "is required"}
	}
	inputJSON, contextJSON, err := e.startDocuments(p)
	if err != nil {
		return nil, err
	}
	// A key the engine makes up ("implicit:" and 96 random bits) names no
	// thread yet.
	freshThread := p.ExecutionID == "" && p.ThreadID == ""
	if p.ExecutionID == "" {
		p.ExecutionID = newID("exec")
	}
	threadKey := p.ThreadID
	if threadKey == "" {
		threadKey = "implicit:" + p.ExecutionID
	}
	def, plan, res, err := e.startDefinition(ctx, tx, &p, freshThread)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("workflow %s: %w", p.WorkflowID, ErrNotFound)
		}
		return nil, err
	}
	lane, inline, settles, session, reserve := plan.lane, plan.inline, plan.settles, plan.session, plan.reserve
	switch {
	case settles && session != nil && p.heldSession == nil:
		if _, _, err := e.lockLane(ctx, tx, p.TenantID, p.SessionKey, true); err != nil {
			return nil, err
		}
	case p.LaneFirst && !settles:
		if _, _, err := e.lockLane(ctx, tx, p.TenantID, lane, true); err != nil {
			return nil, err
		}
	}
	// A settling start reserves its id; one whose thread is fresh and
	// outside a session reserves first (startDefinition may have), drawing
	// the thread's id too, so that its thread's insert goes with the run's
	// other writes.
	if res == nil && reserve != nil && reserve.DrawThread {
		if res, err = e.reserveExecution(ctx, tx, reserve); err != nil {
			return nil, err
		}
	}
	thread, threadCreated, err := e.startThread(ctx, tx, p.TenantID, threadKey, res, p.heldSession)
	if err != nil {
		return nil, err
	}
	if reserve != nil && !reserve.DrawThread {
		if res, err = e.reserveExecution(ctx, tx, reserve); err != nil {
			return nil, err
		}
	}
	var restartedFrom *int64
	if p.RestartedFrom != 0 {
		restartedFrom = &p.RestartedFrom
	}
	var parent, eventData = (*int64)(nil), json.RawMessage(nil)
	if p.ParentExecutionID != 0 {
		parent = &p.ParentExecutionID
		eventData = mustJSON(map[string]any{"parentExecutionId": p.ParentExecutionID, "canInheritLock": p.CanInheritLock})
	}
	start := def.Start()
	var idem *string
	if p.IdempotencyKey != "" {
		idem = &p.IdempotencyKey
	}
	callback, err := e.checkCallback(p.CallbackURL, p.CallbackEvents)
	if err != nil {
		return nil, err
	}
	insert := &dbsqlc.ExecutionInsertParams{
		TenantID: p.TenantID, ExecutionID: p.ExecutionID, WorkflowID: def.WorkflowID, Version: def.Version,
		Lane: lane, ThreadID: thread.ID, CurrentNodeID: &start.ID,
		Input: inputJSON, Context: contextJSON, Variables: inputJSON,
		CorrelationID: p.CorrelationID, IdempotencyKey: idem, CallbackUrl: callback, CallbackEvents: callbackEventsToStore(p.CallbackEvents),
		Priority: int16(clampPriority(p.Priority)), TotalSteps: int32(def.Remaining(start.ID)),
		ParentExecutionID: parent, CanInheritLock: p.CanInheritLock, EventData: eventData, RestartedFrom: restartedFrom,
		SessionKey: session,
	}
	// A settling start runs without a slot when its lane has room; its row
	// is then written once, by the step (stepRun.unsaved).
	var row *dbsqlc.AgentExecution
	var messageID int64
	if res != nil && res.Room {
		row, messageID = settlingRow(res, insert), res.MessageID
	}
	if row == nil {
		if row, err = e.q.ExecutionInsert(ctx, tx, insert); err != nil {
			return nil, executionInsertError(err, p.ExecutionID)
		}
	}
	slotless := row.Status == StatusRunning
	events := &eventLog{tenantID: p.TenantID, executionID: row.ID}
	events.add(EventStarted, "info", "", fmt.Sprintf("Starting execution %s", row.ExecutionID), map[string]any{
		"workflow_id": def.WorkflowID, "version": def.Version, "execution_id": row.ExecutionID,
		"thread_id": threadKey, "lane": lane, "total_steps": row.TotalSteps,
	})
	e.InfoContext(ctx, fmt.Sprintf("Starting execution %s", row.ExecutionID),
		"execution_id", row.ExecutionID, "thread_id", threadKey, "tenant_id", p.TenantID,
		"correlation_id", p.CorrelationID, "workflow_id", def.WorkflowID)
	// Admission enqueues the first step of what it admits, except this
	// execution's when it runs inline below.
	if !slotless {
		if row, err = e.enterLane(ctx, tx, row, inline); err != nil {
			return nil, err
		}
	}
	// Admission reports the runs it admits; this reports one that stays
	// pending or starts without a slot.
	if row.Status == StatusPending || slotless {
		if err := e.enqueueStatus(ctx, tx, row); err != nil {
			return nil, err
		}
	}
	if row.Status != StatusRunning || !inline {
		if err := events.write(ctx, e.q, tx); err != nil {
			return nil, err
		}
		return executionFromRow(row, threadKey, nil, nil), nil
	}
	// Admitted at once: the first step runs in the start transaction, up to
	// the first wait, tool call or end, and enqueues the next step itself if
	// it stops at a tool call. The thread row is already ours from
	// ensureThread.
	run := newStepRun(e, tx, def.Definition, row)
	run.thread = holds(thread)
	run.slotless = slotless
	if slotless {
		if run.thread.private, err = e.lockIsPrivate(ctx, tx, thread, threadCreated); err != nil {
			return nil, err
		}
	}
	if slotless {
		run.unsaved = res
	}
	run.messageID = messageID
	run.events = events // workflow.started goes first, written with the step's
	if err := run.advance(ctx, nil); err != nil {
		return nil, err
	}
	if err := run.writePrivateLock(ctx); err != nil {
		return nil, err
	}
	observed := run.events.after
	afterCommit(tx, func() { observed.report(e.metrics) })
	if run.last != nil {
		return executionFromRow(run.last, threadKey, nil, nil), nil
	}
	if err := run.save(ctx); err != nil {
		return nil, err
	}
	row, err = e.q.ExecutionGetByID(ctx, tx, row.ID)
	if err != nil {
		return nil, fmt.Errorf("reading started execution: %w", err)
	}
	return executionFromRow(row, threadKey, nil, nil), nil
}

// startsSlotless reports whether a top-level run of def in lane may start
// without a slot: its lane is global and its first step settles.
func (e *Engine) startsSlotless(def *StoredDefinition, lane string) bool {
	return !e.cfg.DeferFirstStep && e.isGlobalLane(lane) && def.FirstStepSettles(e.cfg.MaxNodesPerStep)
}

// GetExecution returns an execution of the tenant by its external id.
func (e *Engine) GetExecution(ctx context.Context, db dbsqlc.DBTX, tenantID, executionID string) (*Execution, error) {
	r, err := e.q.ExecutionViewByExecutionID(ctx, db, &dbsqlc.ExecutionViewByExecutionIDParams{TenantID: tenantID, ExecutionID: executionID})
	if err != nil {
		return nil, notFound(err)
	}
	return executionFromRow(&r.AgentExecution, r.ThreadKey, r.ParentKey, r.RestartedFromKey), nil
}

// ExecutionFilter narrows ListExecutions; empty fields do not filter.
type ExecutionFilter struct {
	Status            string
	WorkflowID        string
	ThreadID          string
	ParentExecutionID string
	// BeforeID continues a listing after the row id of its last item.
	BeforeID int64
	// Limit is the page size.
	Limit int
}

// ListExecutions returns the tenant's executions, newest first.
func (e *Engine) ListExecutions(ctx context.Context, db dbsqlc.DBTX, tenantID string, f ExecutionFilter) ([]*Execution, error) {
	params := &dbsqlc.ExecutionViewListParams{TenantID: tenantID, Max: int32(f.Limit)}
	if f.Status != "" {
		if !dbsqlc.ExecutionStatus(f.Status).Valid() {
			return nil, &InputError{Field: "status", Message: fmt.Sprintf("unknown status %q", f.Status)}
		}
		params.Status = &f.Status
	}
	if f.WorkflowID != "" {
		params.WorkflowID = &f.WorkflowID
	}
	if f.ThreadID != "" {
		params.ThreadKey = &f.ThreadID
	}
	if f.ParentExecutionID != "" {
		params.ParentKey = &f.ParentExecutionID
	}
	if f.BeforeID > 0 {
		params.BeforeID = &f.BeforeID
	}
	rows, err := e.q.ExecutionViewList(ctx, db, params)
	if err != nil {
		return nil, fmt.Errorf("listing executions: %w", err)
	}
	out := make([]*Execution, 0, len(rows))
	for _, r := range rows {
		out = append(out, executionFromRow(&r.AgentExecution, r.ThreadKey, r.ParentKey, r.RestartedFromKey))
	}
	return out, nil
}

// Cancel cancels a live execution in a transaction of its own; see CancelTx.
func (e *Engine) Cancel(ctx context.Context, tenantID, executionID, cancelledBy, reason string) (*Execution, error) {
	var out *Execution
	err := e.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = e.CancelTx(ctx, tx, tenantID, executionID, cancelledBy, reason)
		return err
	})
	return out, err
}

// CancelTx cancels a live execution in tx: pending, running or waiting
// becomes cancelled in one compare-and-swap with its finalization. A terminal
// execution is a *TransitionError and stays as it is.
func (e *Engine) CancelTx(ctx context.Context, tx pgx.Tx, tenantID, executionID, cancelledBy, reason string) (*Execution, error) {
	if cancelledBy == "" {
		cancelledBy = "user"
	}
	var out *Execution
	err := func() error {
		cur, err := e.q.ExecutionGetByExecutionID(ctx, tx, &dbsqlc.ExecutionGetByExecutionIDParams{TenantID: tenantID, ExecutionID: executionID})
		if err != nil {
			return notFound(err)
		}
		if _, err := e.lockThread(ctx, tx, cur.ThreadID); err != nil {
			return err
		}
		var reasonPtr *string
		if reason != "" {
			reasonPtr = &reason
		}
		summary := "Cancelled by " + cancelledBy
		if reason != "" {
			summary += ": " + reason
		}
		row, err := e.q.ExecutionCancel(ctx, tx, &dbsqlc.ExecutionCancelParams{ID: cur.ID, ResultSummary: summary, CancelledBy: cancelledBy, CancelReason: reasonPtr})
		if err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return e.lostTransition(ctx, tx, cur.ID, "cancel")
			}
			return fmt.Errorf("cancelling execution: %w", err)
		}
		events := &eventLog{tenantID: row.TenantID, executionID: row.ID}
		if err := e.finalize(ctx, tx, row, events, finish{freed: true}); err != nil {
			return err
		}
		// Cancelling a parent cancels the child it waits for (after the
		// parent, so the child's finalize finds no parent to resume).
		if err := e.cancelWaitedChild(ctx, tx, cur, fmt.Sprintf("parent execution %s was cancelled", executionID)); err != nil {
			return err
		}
		afterCommit(tx, func() { events.after.report(e.metrics) })
		out, err = e.GetExecution(ctx, tx, tenantID, executionID)
		return err
	}()
	return out, err
}

// Fail ends a live execution as failed from outside its step, such as when
// its step job has run out of attempts. A non-zero stepSeq fails it only if
// its checkpoint is still that one (a step that committed after all is not
// undone). A terminal or moved-on execution is a *TransitionError.
func (e *Engine) Fail(ctx context.Context, executionID, stepSeq int64, code, message string) error {
	var events *eventLog
	err := e.WithTx(ctx, func(tx pgx.Tx) error {
		cur, err := e.q.ExecutionGetByID(ctx, tx, executionID)
		if err != nil {
			return notFound(err)
		}
		events, err = e.failTx(ctx, tx, cur, stepSeq, code, message)
		return err
	})
	if err == nil {
		events.after.report(e.metrics)
	}
	return err
}

// finish is what the caller of finalize knows.
type finish struct {
	// freed says the execution may have held a lane slot until now, which
	// admission may give on.
	freed bool
	// thread is the execution's thread when the caller holds it (a step),
	// else nil.
	thread *heldThread
}

// lostTransition builds the typed error of a transition that found the
// execution in another state.
func (e *Engine) lostTransition(ctx context.Context, db dbsqlc.DBTX, id int64, transition string) error {
	cur, err := e.q.ExecutionGetByID(ctx, db, id)
	if err != nil {
		return notFound(err)
	}
	return &TransitionError{ExecutionID: cur.ExecutionID, Transition: transition, Status: cur.Status}
}

// finalize does what every terminal transition needs, in its transaction,
// whose caller holds the execution's thread row: it releases or hands back
// the thread lock and wakes the drain, writes the workflow.completed event,
// enqueues the workflow.callback job when the execution has a callback_url,
// and logs "Execution … completed with result: …".
func (e *Engine) finalize(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution, events *eventLog, fin finish) error {
	if events == nil {
		events = &eventLog{tenantID: row.TenantID, executionID: row.ID}
	}
	if err := e.releaseLock(ctx, tx, row, events, fin.thread); err != nil {
		return err
	}
	if err := e.resumeParent(ctx, tx, row); err != nil {
		return err
	}
	if fin.freed {
		if err := e.slotFreed(ctx, tx, row); err != nil {
			return err
		}
	}
	// A session run, slotless or not, hands its session's inbound work on.
	if err := e.sessionFreed(ctx, tx, row); err != nil {
		return err
	}
	resultType := deref(row.ResultType)
	payload := map[string]any{
		"status":      completedStatus(row.Status),
		"result_type": resultType,
		"node_path":   row.NodePath,
	}
	if row.ResultSummary != nil {
		payload["result_summary"] = *row.ResultSummary
	}
	if row.ErrorCode != nil {
		payload["error"] = map[string]any{"code": *row.ErrorCode, "message": deref(row.ErrorMessage), "failed_node_id": row.FailedNodeID}
	}
	payload["steps_executed"] = row.StepsCompleted
	ended := time.Now()
	if row.CompletedAt != nil {
		ended = *row.CompletedAt
	}
	duration := ended.Sub(row.CreatedAt)
	payload["total_duration_ms"] = duration.Milliseconds()
	workflowID, status, code := row.WorkflowID, row.Status, deref(row.ErrorCode)
	events.after.add(func(m Metrics) {
		m.ExecutionFinished(workflowID, status, duration)
		if code != "" {
			m.Error(code)
		}
	})
	msg := fmt.Sprintf("Execution %s completed with result: %s", row.ExecutionID, resultType)
	level, logLevel := "info", slog.LevelInfo
	switch row.Status {
	case StatusFailed:
		// The tenant's run failed, not Baton (engine/logsafe.go): an error
		// event for the tenant, a warning in the process log.
		level, logLevel = "error", slog.LevelWarn
	case StatusTimeout:
		logLevel = slog.LevelWarn
	}
	events.add(EventCompleted, level, "", msg, payload)
	if err := events.write(ctx, e.q, tx); err != nil {
		return err
	}
	if err := e.enqueueEndCallbacks(ctx, tx, row); err != nil {
		return err
	}
	e.Log(ctx, logLevel, msg, "execution_id", row.ExecutionID, "tenant_id", row.TenantID,
		"thread_id", row.ThreadID, "correlation_id", row.CorrelationID, "status", string(row.Status))
	return nil
}

// executionInsertError names a duplicate execution_id; other errors are
// wrapped as they are.
func executionInsertError(err error, executionID string) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "agent_execution_execution_id_key" {
		return &ConflictError{Code: "workflow.execute.duplicate_execution_id", Message: fmt.Sprintf("execution_id %q is already in use", executionID)}
	}
	return fmt.Errorf("inserting execution: %w", err)
}

// completedStatus is the payload status of workflow.completed (docs/api.md,
// "WebSocket").
func completedStatus(s ExecutionStatus) string {
	switch s {
	case StatusCompleted:
		return "successful"
	case StatusFailed:
		return "failed"
	case StatusTimeout:
		return "timeout"
	default:
		return "cancelled"
	}
}

func newID(prefix string) string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return prefix + "-" + hex.EncodeToString(b[:])
}

func clampPriority(p int) int {
	switch {
	case p < 0:
		return 0
	case p > 10:
		return 10
	}
	return p
}

// riverPriority maps the envelope's priority (0–10, 10 most urgent) to
// River's (1–4, 1 most urgent).
func riverPriority(p int) int {
	switch {
	case p >= 9:
		return 1
	case p >= 6:
		return 2
	case p >= 3:
		return 3
	default:
		return 4
	}
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func jsonUnmarshal(b []byte, v any) error {
	if len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, v)
}
