package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine/workflow"
)

// Outcomes of an inbound message (docs/api.md, thread.inbound).
const (
	OutcomeResumed = "resumed"
	OutcomeStarted = "started"
	OutcomeSteered = "steered"
	OutcomeQueued  = "queued"
	OutcomeDropped = "dropped"
	OutcomeCommand = "command"
)

// EventTyping is written as soon as an inbound message is accepted for a
// run: on the execution it was routed to (resumed, started, steered) or on
// the session's active run it queues behind. execution_event needs an
// execution, and these are the ones whose stream a client follows.
const EventTyping = "thread.typing"

// CodeNoDefaultWorkflow is the conflict of an inbound message that would
// start a run on a thread without a default workflow.
const CodeNoDefaultWorkflow = "thread.inbound.no_default_workflow"

// Prompt texts of runs started from queued messages.
const (
	collectHeader   = "[Queued messages while agent was busy]"
	summaryLineMax  = 160
	overflowPattern = "[Queue overflow] Dropped %d messages due to cap. Summary:"
)

// InboundParams describe a user's message on a thread.
type InboundParams struct {
	TenantID string
	// ThreadID is the thread's external id.
	ThreadID string
	Text     string
	// MessageID is the channel's id of the message; a repeated one replays
	// the first answer. Empty means a generated one.
	MessageID string
	// Channel is where it arrived; empty means the thread's channel.
	Channel string
}

// InboundResult is the router's answer.
type InboundResult struct {
	MessageID   string  `json:"message_id"`
	Outcome     string  `json:"outcome"`
	ExecutionID *string `json:"execution_id"`
}

// sessionCtx is what a router or flush transaction holds: the lane rows in
// order, then the thread row.
type sessionCtx struct {
	thread  *dbsqlc.Thread
	session string
	// workflow and version name the thread's default workflow's latest
	// version when the locks were taken; empty without one.
	workflow, version string
	settings          EffectiveQueueSettings
}

// lockSession takes, in lock order, the global lane of the thread's default
// workflow, the session lane and the thread row. A default workflow whose
// first step settles skips the global lane: its runs start without a slot
// when the lane has room (StartExecution), so conversations do not queue on
// one row; when the lane is full they are admitted with a try-lock or by a
// lane.dispatch job, like any run that frees a slot.
func (e *Engine) lockSession(ctx context.Context, tx pgx.Tx, tenantID, threadKey, channel string) (*sessionCtx, error) {
	t, err := e.q.ThreadGetByThreadID(ctx, tx, &dbsqlc.ThreadGetByThreadIDParams{TenantID: tenantID, ThreadID: threadKey})
	if err != nil {
		return nil, fmt.Errorf("thread %s: %w", threadKey, notFound(err))
	}
	s := &sessionCtx{session: SessionLane(t.ThreadID)}
	if t.DefaultWorkflowID != nil {
		s.workflow = *t.DefaultWorkflowID
		def, err := e.GetDefinition(ctx, tx, tenantID, s.workflow, "")
		if err != nil {
			return nil, fmt.Errorf("default workflow %s: %w", s.workflow, err)
		}
		s.version = def.Version
		lane := def.Lane
		if lane == "" {
			lane = LaneMain
		}
		if !e.startsSlotless(def, lane) {
			if _, _, err := e.lockLane(ctx, tx, tenantID, lane, true); err != nil {
				return nil, err
			}
		}
	}
	if _, _, err := e.lockLane(ctx, tx, tenantID, s.session, true); err != nil {
		return nil, err
	}
	if s.thread, err = e.lockThread(ctx, tx, t.ID); err != nil {
		return nil, err
	}
	if channel == "" {
		channel = s.thread.Channel
	}
	s.settings = e.effectiveQueue(s.thread.QueueSettings, channel)
	return s, nil
}

// ReceiveInboundTx routes a user's message (docs/architecture.md, "How an
// execution moves") in tx: the message is stored before the answer, so a
// 202 means it is in Postgres. In order: a /queue command; a run waiting
// for response on the thread is resumed; a session run is active (pending
// or running) → the queue mode; otherwise a run of the thread's default
// workflow starts in the session lane.
func (e *Engine) ReceiveInboundTx(ctx context.Context, tx pgx.Tx, p InboundParams) (*InboundResult, error) {
	if strings.ContainsRune(p.Text, 0) {
		return nil, &InputError{Field: "payload.text", Message: "must not contain NUL"}
	}
	if strings.TrimSpace(p.Text) == "" {
		return nil, &InputError{Field: "payload.text", Message: "is required"}
	}
	s, err := e.lockSession(ctx, tx, p.TenantID, p.ThreadID, p.Channel)
	if err != nil {
		return nil, err
	}
	if p.Channel == "" {
		p.Channel = s.thread.Channel
	}
	if p.MessageID == "" {
		p.MessageID = newID("msg")
	} else {
		// A repeated message id replays the first answer; under the locks,
		// a concurrent request with the same id has committed or not begun.
		prev, err := e.q.InboundGetByExternalID(ctx, tx, &dbsqlc.InboundGetByExternalIDParams{ThreadID: s.thread.ID, ExternalID: p.MessageID})
		if err == nil {
			return &InboundResult{MessageID: p.MessageID, Outcome: deref(prev.Outcome), ExecutionID: prev.ExecutionKey}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("looking up message %s: %w", p.MessageID, err)
		}
	}
	r := &router{e: e, tx: tx, s: s, p: p}
	return r.route(ctx)
}

type router struct {
	e  *Engine
	tx pgx.Tx
	s  *sessionCtx
	p  InboundParams
}

// store writes the inbound message row with its outcome.
func (r *router) store(ctx context.Context, status, outcome string, execID *int64, mode string, backlog bool) (*dbsqlc.ThreadMessage, error) {
	var qm *string
	if mode != "" {
		qm = &mode
	}
	m, err := r.e.q.InboundInsert(ctx, r.tx, &dbsqlc.InboundInsertParams{
		TenantID: r.p.TenantID, ThreadID: r.s.thread.ID, ExecutionID: execID, Body: r.p.Text, Status: status,
		ExternalID: r.p.MessageID, Channel: r.p.Channel, QueueMode: qm, Backlog: backlog, Outcome: outcome,
	})
	if err != nil {
		return nil, fmt.Errorf("storing inbound message: %w", err)
	}
	return m, nil
}

// runRef names the run a message went to.
type runRef struct {
	id          int64
	tenantID    string
	executionID string
}

func refOfRow(x *dbsqlc.AgentExecution) *runRef {
	return &runRef{id: x.ID, tenantID: x.TenantID, executionID: x.ExecutionID}
}

func refOf(x *Execution) *runRef {
	return &runRef{id: x.ID, tenantID: x.TenantID, executionID: x.ExecutionID}
}

func (r *router) answer(outcome string, x *runRef) *InboundResult {
	out := &InboundResult{MessageID: r.p.MessageID, Outcome: outcome}
	if x != nil && outcome != OutcomeQueued {
		out.ExecutionID = &x.executionID
	}
	return out
}

func (r *router) typing(ctx context.Context, x *runRef) error {
	events := &eventLog{tenantID: x.tenantID, executionID: x.id}
	events.add(EventTyping, "info", "", fmt.Sprintf("Typing on thread %s", r.s.thread.ThreadID),
		map[string]any{"thread_id": r.s.thread.ThreadID, "message_id": r.p.MessageID})
	return events.write(ctx, r.e.q, r.tx)
}

func (r *router) route(ctx context.Context) (*InboundResult, error) {
	if cmd, ok := parseQueueCommand(r.p.Text); ok {
		if err := r.e.applyQueueCommand(ctx, r.tx, r.s.thread.ID, cmd); err != nil {
			return nil, err
		}
		if _, err := r.store(ctx, "command", OutcomeCommand, nil, "", false); err != nil {
			return nil, err
		}
		return r.answer(OutcomeCommand, nil), nil
	}
	// A run waiting for a response on the thread takes the message.
	key := r.s.thread.ThreadID
	waiters, err := r.e.q.ExecutionLockWaitingMatches(ctx, r.tx, &dbsqlc.ExecutionLockWaitingMatchesParams{
		TenantID: r.p.TenantID, WaitingFor: "response", ThreadKey: &key, Max: 100,
	})
	if err != nil {
		return nil, fmt.Errorf("finding runs waiting for a response: %w", err)
	}
	if len(waiters) > 0 {
		pick := &waiters[0].AgentExecution
		for _, w := range waiters {
			if w.HoldsLock {
				pick = &w.AgentExecution
				break
			}
		}
		vars, err := decodeVariables(pick.Variables)
		if err != nil {
			return nil, fmt.Errorf("resuming execution %s: %w", pick.ExecutionID, err)
		}
		vars["lastResponse"] = r.p.Text
		if _, err := r.e.resumeNow(ctx, r.tx, pick, resumeSpec{vars: vars, eventData: map[string]any{"text": r.p.Text, "message_id": r.p.MessageID}, cause: EventTypeMessageReceived}); err != nil {
			return nil, err
		}
		if _, err := r.store(ctx, "consumed", OutcomeResumed, &pick.ID, "", false); err != nil {
			return nil, err
		}
		return r.answer(OutcomeResumed, refOfRow(pick)), r.typing(ctx, refOfRow(pick))
	}
	active, err := r.e.q.SessionActiveRun(ctx, r.tx, &dbsqlc.SessionActiveRunParams{TenantID: r.p.TenantID, SessionKey: r.s.session})
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("finding the session's active run: %w", err)
	}
	if err != nil {
		active = nil
	}
	queued, err := r.e.q.InboundCountReceived(ctx, r.tx, r.s.thread.ID)
	if err != nil {
		return nil, fmt.Errorf("counting queued messages: %w", err)
	}
	if active == nil && queued == 0 {
		x, err := r.e.startSessionRun(ctx, r.tx, r.s, r.p.Text, []map[string]any{{"message_id": r.p.MessageID, "text": r.p.Text, "channel": r.p.Channel}})
		if err != nil {
			return nil, err
		}
		if _, err := r.store(ctx, "consumed", OutcomeStarted, &x.ID, "", false); err != nil {
			return nil, err
		}
		return r.answer(OutcomeStarted, refOf(x)), r.typing(ctx, refOf(x))
	}
	mode := r.s.settings.Mode
	if active != nil {
		switch mode {
		case "steer", "queue", "steer-backlog", "steer+backlog":
			backlog := mode == "steer-backlog" || mode == "steer+backlog"
			if _, err := r.store(ctx, "steer", OutcomeSteered, &active.ID, mode, backlog); err != nil {
				return nil, err
			}
			return r.answer(OutcomeSteered, refOfRow(active)), r.typing(ctx, refOfRow(active))
		case "interrupt":
			if _, err := r.e.CancelTx(ctx, r.tx, active.TenantID, active.ExecutionID, "system",
				fmt.Sprintf("interrupted by inbound message %s", r.p.MessageID)); err != nil {
				return nil, err
			}
			x, err := r.e.startSessionRun(ctx, r.tx, r.s, r.p.Text, []map[string]any{{"message_id": r.p.MessageID, "text": r.p.Text, "channel": r.p.Channel}})
			if err != nil {
				return nil, err
			}
			if _, err := r.store(ctx, "consumed", OutcomeStarted, &x.ID, mode, false); err != nil {
				return nil, err
			}
			return r.answer(OutcomeStarted, refOf(x)), r.typing(ctx, refOf(x))
		}
	}
	// followup, collect, or no active run but a queue to join.
	outcome, err := r.enqueue(ctx, mode, int(queued))
	if err != nil {
		return nil, err
	}
	if active != nil && outcome == OutcomeQueued {
		if err := r.typing(ctx, refOfRow(active)); err != nil {
			return nil, err
		}
	}
	if active == nil {
		// Idle session with a queue: make sure its flush is on its way.
		if err := r.e.armFlush(ctx, r.tx, r.p.TenantID, r.s.session, time.Now(), true); err != nil {
			return nil, err
		}
	}
	return r.answer(outcome, nil), nil
}

// enqueue adds the message to the session's queue under its cap and drop
// policy.
func (r *router) enqueue(ctx context.Context, mode string, queued int) (string, error) {
	if mode != "followup" && mode != "collect" {
		mode = "followup" // steer modes without a run to steer
	}
	st := r.s.settings
	if queued >= st.Cap {
		switch st.Drop {
		case "new":
			_, err := r.store(ctx, "dropped", OutcomeDropped, nil, mode, false)
			return OutcomeDropped, err
		case "old", "summarize":
			dropped, err := r.e.q.InboundDropOldest(ctx, r.tx, r.s.thread.ID)
			if err != nil {
				return "", fmt.Errorf("dropping the oldest queued message: %w", err)
			}
			if st.Drop == "summarize" {
				if err := r.summarize(ctx, dropped, mode); err != nil {
					return "", err
				}
			}
		}
	}
	_, err := r.store(ctx, "received", OutcomeQueued, nil, mode, false)
	return OutcomeQueued, err
}

// summarize adds a dropped message's line to the session's overflow
// summary, a synthetic queued message.
func (r *router) summarize(ctx context.Context, dropped *dbsqlc.ThreadMessage, mode string) error {
	line := "- " + summaryLine(dropped.Body)
	cur, err := r.e.q.InboundSummaryRow(ctx, r.tx, r.s.thread.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		_, err := r.e.q.InboundInsert(ctx, r.tx, &dbsqlc.InboundInsertParams{
			TenantID: r.p.TenantID, ThreadID: r.s.thread.ID, Body: fmt.Sprintf(overflowPattern, 1) + "\n" + line,
			Status: "received", ExternalID: newID("summary"), Channel: r.p.Channel, QueueMode: &mode, Summary: true,
			DroppedCount: 1, Outcome: OutcomeQueued,
		})
		if err != nil {
			return fmt.Errorf("storing overflow summary: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading overflow summary: %w", err)
	}
	n := cur.DroppedCount + 1
	lines := cur.Body[strings.Index(cur.Body, "\n")+1:]
	body := fmt.Sprintf(overflowPattern, n) + "\n" + lines + "\n" + line
	if err := r.e.q.InboundUpdateSummary(ctx, r.tx, &dbsqlc.InboundUpdateSummaryParams{ID: cur.ID, Body: body, DroppedCount: n}); err != nil {
		return fmt.Errorf("updating overflow summary: %w", err)
	}
	return nil
}

// summaryLine is a dropped message on one line of at most 160 characters.
func summaryLine(text string) string {
	s := strings.Join(strings.Fields(text), " ")
	if r := []rune(s); len(r) > summaryLineMax {
		s = string(r[:summaryLineMax-1]) + "…"
	}
	return s
}

// startSessionRun starts a run of the thread's default workflow in its
// session lane, with the prompt as lastResponse and the messages as
// inboundMessages.
func (e *Engine) startSessionRun(ctx context.Context, tx pgx.Tx, s *sessionCtx, prompt string, msgs []map[string]any) (*Execution, error) {
	if s.workflow == "" {
		return nil, &ConflictError{Code: CodeNoDefaultWorkflow, Message: fmt.Sprintf("thread %s has no default workflow to start", s.thread.ThreadID)}
	}
	list := make([]any, 0, len(msgs))
	for _, m := range msgs {
		list = append(list, m)
	}
	return e.StartExecution(ctx, tx, StartParams{
		TenantID: s.thread.TenantID, WorkflowID: s.workflow, Version: s.version, ThreadID: s.thread.ThreadID, SessionKey: s.session,
		Input: map[string]any{"lastResponse": prompt, "inboundMessages": list}, Priority: 5, heldSession: s,
	})
}

// takeSteered hands the messages steered into a session run to it at a node
// boundary (the start of a step), in the step's transaction: each is
// appended to conversation_history and the last becomes lastResponse, in
// vars (the step's variables, decoded from row) and in row. It returns how
// many it handed over.
func (e *Engine) takeSteered(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution, vars workflow.Variables) (int, error) {
	if row.SessionKey == nil {
		return 0, nil
	}
	msgs, err := e.q.InboundTakeSteered(ctx, tx, row.ID)
	if err != nil {
		return 0, fmt.Errorf("taking steered messages: %w", err)
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	entries := make([]any, 0, len(msgs))
	for _, m := range msgs {
		entries = append(entries, map[string]any{"direction": "in", "body": m.Body, "message_id": deref(m.ExternalID)})
		vars["lastResponse"] = m.Body
	}
	row.Variables = mustJSON(vars)
	if err := e.q.ExecutionAppendHistory(ctx, tx, &dbsqlc.ExecutionAppendHistoryParams{ID: row.ID, Entries: mustJSON(entries), Variables: row.Variables, MaxEntries: int32(e.cfg.Limits.HistoryEntries)}); err != nil {
		return 0, fmt.Errorf("appending steered messages: %w", err)
	}
	return len(msgs), nil
}
