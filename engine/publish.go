package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine/workflow"
)

// Resume event types an API client may publish (docs/api.md, "Events:
// resume payloads").
const (
	EventTypeMessageReceived    = "MESSAGE_RECEIVED"
	EventTypeDocumentUploaded   = "DOCUMENT_UPLOADED"
	EventTypeSignatureCompleted = "SIGNATURE_COMPLETED"
	EventTypeTestCompleted      = "TEST_COMPLETED"
	EventTypeEventCompleted     = "EVENT_COMPLETED"
)

// CodeEventNotWaiting is the conflict of an event addressed to an execution
// that does not wait for it.
const CodeEventNotWaiting = "event.publish.not_waiting"

// eventWaitingFor maps each event type to the wait it resumes.
var eventWaitingFor = map[string]string{
	EventTypeMessageReceived:    "response",
	EventTypeDocumentUploaded:   "document",
	EventTypeSignatureCompleted: "signature",
	EventTypeTestCompleted:      "test",
	EventTypeEventCompleted:     "event",
}

// PublishEventParams describe a resume event (docs/api.md, POST /events).
type PublishEventParams struct {
	// TenantID owns the event.
	TenantID string
	// EventType is one of the EventType constants.
	EventType string
	// EventID is the event's unique id; a repeated one replays the first
	// answer.
	EventID string
	// ExecutionID, when set, addresses one execution.
	ExecutionID string
	// ThreadID, when set (and ExecutionID is not), addresses the executions
	// on a thread.
	ThreadID string
	// Data is the event's data.
	Data map[string]any
}

// EventResult is the answer to a published event.
type EventResult struct {
	// EventID echoes the event's id.
	EventID string `json:"event_id"`
	// Resumed lists the executions the event resumed.
	Resumed []string `json:"resumed"`
	// Buffered lists running executions that will take the event at their
	// next wait of its type.
	Buffered []string `json:"buffered"`
	// Recorded lists executions that took the event but still wait: a
	// document upload while other requested documents are missing.
	Recorded []string `json:"recorded"`
	// Inbound is the inbound router's answer to a MESSAGE_RECEIVED
	// addressed to a thread only (resumed, started, steered, queued,
	// dropped or command); nil otherwise.
	Inbound *InboundResult `json:"inbound,omitempty"`
	// Replayed is set when the event_id was seen before and this is the
	// first answer again.
	Replayed bool `json:"-"`
}

// PublishEvent publishes a resume event in a transaction of its own; see
// PublishEventTx.
func (e *Engine) PublishEvent(ctx context.Context, p PublishEventParams) (*EventResult, error) {
	var out *EventResult
	err := e.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = e.PublishEventTx(ctx, tx, p)
		return err
	})
	return out, err
}

// PublishEventTx delivers a resume event to the executions waiting for it,
// in tx. The event_id is recorded first: a repeated one returns the first
// answer, marked Replayed, before any state check. An addressed execution
// that is not waiting for this event is a *ConflictError with code
// event.publish.not_waiting, and nothing changes.
func (e *Engine) PublishEventTx(ctx context.Context, tx pgx.Tx, p PublishEventParams) (*EventResult, error) {
	waitingFor, ok := eventWaitingFor[p.EventType]
	if !ok {
		return nil, &InputError{Field: "payload.event_type", Message: fmt.Sprintf("unknown event type %q", p.EventType)}
	}
	if p.EventID == "" {
		return nil, &InputError{Field: "payload.event_id", Message: "is required"}
	}
	if p.Data == nil {
		p.Data = map[string]any{}
	}
	if err := checkEventData(p); err != nil {
		return nil, err
	}
	_, err := e.q.InboundEventClaim(ctx, tx, &dbsqlc.InboundEventClaimParams{
		TenantID: p.TenantID, EventID: p.EventID, EventType: p.EventType,
		ExecutionID: nilIfBlank(p.ExecutionID), ThreadID: nilIfBlank(p.ThreadID), Data: mustJSON(p.Data),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		prev, err := e.q.InboundEventGet(ctx, tx, &dbsqlc.InboundEventGetParams{TenantID: p.TenantID, EventID: p.EventID})
		if err != nil {
			return nil, fmt.Errorf("reading event %s: %w", p.EventID, err)
		}
		out := &EventResult{EventID: p.EventID, Resumed: []string{}, Buffered: []string{}, Recorded: []string{}}
		if err := jsonUnmarshal(prev.Response, out); err != nil {
			return nil, fmt.Errorf("decoding the answer of event %s: %w", p.EventID, err)
		}
		out.Replayed = true
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claiming event %s: %w", p.EventID, err)
	}
	out := &EventResult{EventID: p.EventID, Resumed: []string{}, Buffered: []string{}, Recorded: []string{}}
	if p.EventType == EventTypeMessageReceived && p.ExecutionID == "" && p.ThreadID != "" {
		// A user's message on a thread: the inbound router decides, with
		// the event_id as the message's id.
		if err := e.routeMessageEvent(ctx, tx, p, out); err != nil {
			return nil, err
		}
		return out, e.recordEventAnswer(ctx, tx, p, out)
	}
	targets, err := e.eventTargets(ctx, tx, p, waitingFor)
	if err != nil {
		return nil, err
	}
	inline := 0
	for _, row := range targets {
		if row.Status == StatusRunning || row.Status == StatusPending {
			if err := e.q.InboundEventBuffer(ctx, tx, &dbsqlc.InboundEventBufferParams{TenantID: p.TenantID, EventID: p.EventID, ExecutionID: row.ID}); err != nil {
				return nil, fmt.Errorf("keeping event %s: %w", p.EventID, err)
			}
			out.Buffered = append(out.Buffered, row.ExecutionID)
			continue
		}
		spec, ready, err := e.eventResume(ctx, tx, row, p)
		if err != nil {
			return nil, err
		}
		if !ready {
			out.Recorded = append(out.Recorded, row.ExecutionID)
			continue
		}
		// The first few runs go on in this transaction when they can
		// (resumeNow); the rest, and any event with many targets, by jobs.
		resume := e.resumeLocked
		if inline < maxInlineResumes {
			resume, inline = e.resumeNow, inline+1
		}
		if _, err := resume(ctx, tx, row, spec); err != nil {
			return nil, err
		}
		out.Resumed = append(out.Resumed, row.ExecutionID)
	}
	return out, e.recordEventAnswer(ctx, tx, p, out)
}

// recordEventAnswer stores the answer a repeated event_id replays. Nothing
// reads the write's result: it goes with the transaction's COMMIT.
func (e *Engine) recordEventAnswer(ctx context.Context, tx pgx.Tx, p PublishEventParams, out *EventResult) error {
	explain := func(err error) error { return fmt.Errorf("recording the answer of event %s: %w", p.EventID, err) }
	return e.q.InboundEventSetResponse(ctx, later(tx, explain), &dbsqlc.InboundEventSetResponseParams{
		TenantID: p.TenantID, EventID: p.EventID, Response: mustJSON(out),
	})
}

// routeMessageEvent hands a thread-addressed MESSAGE_RECEIVED to the inbound
// router, as POST /threads/{id}/messages would, and reports a resumed run
// under Resumed too.
func (e *Engine) routeMessageEvent(ctx context.Context, tx pgx.Tx, p PublishEventParams, out *EventResult) error {
	channel, _ := p.Data["channel"].(string)
	res, err := e.ReceiveInboundTx(ctx, tx, InboundParams{
		TenantID: p.TenantID, ThreadID: p.ThreadID, Text: workflow.RenderText(p.Data["text"]), MessageID: p.EventID, Channel: channel,
	})
	if err != nil {
		return err
	}
	out.Inbound = res
	if res.Outcome == OutcomeResumed && res.ExecutionID != nil {
		out.Resumed = append(out.Resumed, *res.ExecutionID)
	}
	return nil
}

func checkEventData(p PublishEventParams) error {
	need := func(key string) error {
		if s, ok := p.Data[key].(string); !ok || s == "" {
			return &InputError{Field: "payload.data." + key, Message: fmt.Sprintf("is required (a string) for %s", p.EventType)}
		}
		return nil
	}
	switch p.EventType {
	case EventTypeMessageReceived:
		return need("text")
	case EventTypeDocumentUploaded:
		if err := need("document_type"); err != nil {
			return err
		}
		return need("url")
	case EventTypeEventCompleted:
		return need("event_id")
	}
	return nil
}

// eventTargets finds and locks the executions an event addresses, and
// refuses the event when an addressed execution does not wait for it.
func (e *Engine) eventTargets(ctx context.Context, tx pgx.Tx, p PublishEventParams, waitingFor string) ([]*dbsqlc.AgentExecution, error) {
	var eventKey *string
	if p.EventType == EventTypeEventCompleted {
		k := workflow.RenderText(p.Data["event_id"])
		eventKey = &k
	}
	if p.ExecutionID != "" {
		row, err := e.q.ExecutionLockByExecutionID(ctx, tx, &dbsqlc.ExecutionLockByExecutionIDParams{TenantID: p.TenantID, ExecutionID: p.ExecutionID})
		if err != nil {
			return nil, fmt.Errorf("execution %s: %w", p.ExecutionID, notFound(err))
		}
		if row.Status == StatusRunning || row.Status == StatusPending {
			// Kept for the execution's next wait of this type.
			return []*dbsqlc.AgentExecution{row}, nil
		}
		if row.Status != StatusWaiting || deref(row.WaitingFor) != waitingFor {
			return nil, &ConflictError{Code: CodeEventNotWaiting, Message: fmt.Sprintf(
				"execution %s is %s%s, not waiting for %s", row.ExecutionID, row.Status, waitingSuffix(row), p.EventType)}
		}
		if eventKey != nil {
			var wd map[string]any
			if err := jsonUnmarshal(row.WaitingData, &wd); err != nil {
				return nil, fmt.Errorf("execution %s: waiting_data is not valid JSON: %w", row.ExecutionID, err)
			}
			if want := workflow.RenderText(wd["event_id"]); want != *eventKey {
				return nil, &ConflictError{Code: CodeEventNotWaiting, Message: fmt.Sprintf(
					"execution %s waits for event %q, not %q", row.ExecutionID, want, *eventKey)}
			}
		}
		return []*dbsqlc.AgentExecution{row}, nil
	}
	var threadKey *string
	switch {
	case p.ThreadID != "":
		if _, err := e.q.ThreadGetByThreadID(ctx, tx, &dbsqlc.ThreadGetByThreadIDParams{TenantID: p.TenantID, ThreadID: p.ThreadID}); err != nil {
			return nil, fmt.Errorf("thread %s: %w", p.ThreadID, notFound(err))
		}
		threadKey = &p.ThreadID
	case p.EventType != EventTypeEventCompleted:
		return nil, &InputError{Field: "payload.execution_id", Message: fmt.Sprintf("%s needs an execution_id or a thread_id", p.EventType)}
	}
	rows, err := e.q.ExecutionLockWaitingMatches(ctx, tx, &dbsqlc.ExecutionLockWaitingMatchesParams{
		TenantID: p.TenantID, WaitingFor: waitingFor, ThreadKey: threadKey, EventKey: eventKey, Max: 1000,
	})
	if err != nil {
		return nil, fmt.Errorf("finding waiting executions: %w", err)
	}
	if len(rows) == 0 {
		where := "in this tenant"
		if threadKey != nil {
			where = "on thread " + *threadKey
		}
		return nil, &ConflictError{Code: CodeEventNotWaiting, Message: fmt.Sprintf("no execution %s is waiting for %s", where, p.EventType)}
	}
	if p.EventType == EventTypeMessageReceived {
		// One message resumes one run: the thread's lock holder, else the
		// oldest waiting run.
		pick := &rows[0].AgentExecution
		for _, r := range rows {
			if r.HoldsLock {
				pick = &r.AgentExecution
				break
			}
		}
		return []*dbsqlc.AgentExecution{pick}, nil
	}
	out := make([]*dbsqlc.AgentExecution, 0, len(rows))
	for _, r := range rows {
		out = append(out, &r.AgentExecution)
	}
	return out, nil
}

// maxInlineResumes bounds the runs one event's transaction resumes and runs
// on itself (resumeNow).
const maxInlineResumes = 8

// eventResume merges an event into a locked waiting execution's variables
// and returns the resume that applies it; a document upload that leaves
// documents missing only records itself in waiting_data and reports false.
func (e *Engine) eventResume(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution, p PublishEventParams) (resumeSpec, bool, error) {
	vars, err := decodeVariables(row.Variables)
	if err != nil {
		return resumeSpec{}, false, fmt.Errorf("applying event to execution %s: %w", row.ExecutionID, err)
	}
	switch p.EventType {
	case EventTypeMessageReceived:
		vars["lastResponse"] = p.Data["text"]
	case EventTypeDocumentUploaded:
		wd := map[string]any{}
		if err := jsonUnmarshal(row.WaitingData, &wd); err != nil {
			return resumeSpec{}, false, fmt.Errorf("applying event to execution %s: waiting_data is not valid JSON: %w", row.ExecutionID, err)
		}
		received, _ := wd["received"].(map[string]any)
		if received == nil {
			received = map[string]any{}
		}
		received[workflow.RenderText(p.Data["document_type"])] = p.Data["url"]
		wd["received"] = received
		requested, _ := wd["documents"].([]any)
		urls := make([]any, 0, len(requested))
		for _, d := range requested {
			if u, ok := received[workflow.RenderText(d)]; ok {
				urls = append(urls, u)
			}
		}
		if len(urls) < len(requested) {
			if _, err := e.q.ExecutionSetWaitingData(ctx, tx, &dbsqlc.ExecutionSetWaitingDataParams{ID: row.ID, WaitSeq: row.WaitSeq, WaitingData: mustJSON(wd)}); err != nil {
				return resumeSpec{}, false, fmt.Errorf("recording document upload: %w", err)
			}
			events := &eventLog{tenantID: row.TenantID, executionID: row.ID}
			events.add(EventWaitProgress, "info", deref(row.CurrentNodeID),
				fmt.Sprintf("Document %s received; %d of %d in", workflow.RenderText(p.Data["document_type"]), len(urls), len(requested)),
				map[string]any{"event_id": p.EventID, "received": received, "documents": requested})
			return resumeSpec{}, false, events.write(ctx, e.q, tx)
		}
		vars["documentUrls"] = urls
		vars["documents"] = received
	case EventTypeSignatureCompleted:
		vars["signedDocumentUrl"] = p.Data["signed_document_url"]
		vars["signedAt"] = p.Data["signed_at"]
	case EventTypeTestCompleted:
		vars["testScore"] = p.Data["score"]
		vars["testResult"] = p.Data["result"]
	case EventTypeEventCompleted:
		vars["eventData"] = p.Data
	}
	return resumeSpec{vars: vars, eventData: p.Data, cause: p.EventType}, true, nil
}

func nilIfBlank(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// applyBufferedEvents runs in the transaction that made an execution wait:
// events kept for it while it was running, of the type it now waits for,
// are applied oldest first, as if they arrived now. It reports whether one
// of them resumed the execution.
func (e *Engine) applyBufferedEvents(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution) (bool, error) {
	var types []string
	for t, w := range eventWaitingFor {
		if w == deref(row.WaitingFor) {
			types = append(types, t)
		}
	}
	if len(types) == 0 {
		return false, nil
	}
	kept, err := e.q.InboundEventBufferedFor(ctx, tx, &dbsqlc.InboundEventBufferedForParams{ExecutionID: row.ID, EventTypes: types})
	if err != nil {
		return false, fmt.Errorf("reading kept events: %w", err)
	}
	for _, ev := range kept {
		cur, err := e.q.ExecutionLockWaiting(ctx, tx, &dbsqlc.ExecutionLockWaitingParams{ID: row.ID, WaitSeq: row.WaitSeq})
		if errors.Is(err, pgx.ErrNoRows) {
			return true, nil // resumed by an earlier kept event
		}
		if err != nil {
			return false, fmt.Errorf("locking waiting execution: %w", err)
		}
		p := PublishEventParams{TenantID: ev.TenantID, EventType: ev.EventType, EventID: ev.EventID, ExecutionID: cur.ExecutionID}
		if err := jsonUnmarshal(ev.Data, &p.Data); err != nil {
			return false, fmt.Errorf("reading kept event %s: data is not valid JSON: %w", ev.EventID, err)
		}
		if ev.EventType == EventTypeEventCompleted {
			var wd map[string]any
			if err := jsonUnmarshal(cur.WaitingData, &wd); err != nil {
				return false, fmt.Errorf("execution %s: waiting_data is not valid JSON: %w", cur.ExecutionID, err)
			}
			if workflow.RenderText(wd["event_id"]) != workflow.RenderText(p.Data["event_id"]) {
				continue // kept for a later wait on another event
			}
		}
		spec, ready, err := e.eventResume(ctx, tx, cur, p)
		if err != nil {
			return false, err
		}
		if ready {
			if _, err := e.resumeLocked(ctx, tx, cur, spec); err != nil {
				return false, err
			}
		}
		if err := e.q.InboundEventMarkApplied(ctx, tx, &dbsqlc.InboundEventMarkAppliedParams{TenantID: ev.TenantID, EventID: ev.EventID}); err != nil {
			return false, fmt.Errorf("marking kept event applied: %w", err)
		}
		if ready {
			return true, nil
		}
	}
	return false, nil
}
