package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

// sessionAgent is a thread's default workflow: it holds its turn in a gated
// tool call keyed by its prompt, then answers "re: <lastResponse>".
const sessionAgent = `{"workflow_id": "agent", "version": "1", "nodes": [
  {"id": "start", "type": "start", "next": "hold"},
  {"id": "hold", "type": "task", "task": "gate", "inputs": {"key": "{{lastResponse}}"}, "next": "reply"},
  {"id": "reply", "type": "action", "actionType": "send_message", "parameters": {"message": "re: {{lastResponse}}"}, "next": "end"},
  {"id": "end", "type": "end"}]}`

type sessionBundle struct {
	*testBundle
	gate *gate
}

// sessionSetup is a bundle with the gate tool, the session agent, and
// thread "s" (channel whatsapp) running it with the given session settings.
func sessionSetup(t *testing.T, queue *engine.QueueSettings, opts setupOpts) *sessionBundle {
	t.Helper()
	g := newGate()
	if opts.tools == nil {
		opts.tools = map[string]engine.ToolFunc{}
	}
	opts.tools["gate"] = g.tool
	b := setup(t, opts)
	b.define(t, sessionAgent)
	_, _, err := b.engine.UpsertThread(context.Background(), b.pool, engine.ThreadUpsert{
		TenantID: b.tenant, ThreadID: "s", Channel: "whatsapp", Contact: "+5215550001", DefaultWorkflowID: "agent", Queue: queue,
	})
	require.NoError(t, err)
	return &sessionBundle{testBundle: b, gate: g}
}

func ms(n int) *int { return &n }

// runs lists the session's runs, oldest first.
func (b *sessionBundle) runs(t *testing.T) []*engine.Execution {
	t.Helper()
	return sessionRuns(t, b.testBundle, "s")
}

// waitRuns waits until the session has n runs and returns them.
func (b *sessionBundle) waitRuns(t *testing.T, n int) []*engine.Execution {
	t.Helper()
	require.Eventually(t, func() bool { return len(b.runs(t)) >= n }, 20*time.Second, 20*time.Millisecond)
	runs := b.runs(t)
	require.Len(t, runs, n)
	return runs
}

// inboundStatuses maps each inbound message body to its status.
func (b *sessionBundle) inboundStatuses(t *testing.T) map[string]string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT body, status FROM thread_message WHERE direction = 'in' AND tenant_id = $1`, b.tenant)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var body, status string
		require.NoError(t, rows.Scan(&body, &status))
		out[body] = status
	}
	require.NoError(t, rows.Err())
	return out
}

// steer and its alias queue: a message arriving while the run is busy
// reaches that run at its next node boundary as lastResponse and in
// conversation_history; no later run starts.
func TestInboundSteer(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"steer", "queue"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := sessionSetup(t, &engine.QueueSettings{Mode: mode, DebounceMS: ms(0)}, setupOpts{})
			first := b.inbound(t, "s", "hola", "m1")
			require.Equal(t, engine.OutcomeStarted, first.Outcome)
			b.gate.waitEntered(t, "hola")

			steered := b.inbound(t, "s", "mejor mañana", "m2")
			require.Equal(t, engine.OutcomeSteered, steered.Outcome)
			require.Equal(t, *first.ExecutionID, *steered.ExecutionID)
			b.gate.release("hola")

			x := b.waitFor(t, *first.ExecutionID, terminal)
			require.Equal(t, engine.StatusCompleted, x.Status)
			require.Equal(t, "mejor mañana", x.Variables["lastResponse"])
			require.Equal(t, []string{"re: mejor mañana"}, b.waitDelivered(t, "s", 1))
			var history json.RawMessage
			require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT conversation_history FROM agent_execution WHERE execution_id = $1`, x.ExecutionID).Scan(&history))
			require.Contains(t, string(history), `"body": "mejor mañana"`)
			require.Equal(t, "consumed", b.inboundStatuses(t)["mejor mañana"])
			time.Sleep(300 * time.Millisecond)
			require.Len(t, b.runs(t), 1, "a steered message starts no run of its own")
		})
	}
}

// steer-backlog (and its spelling steer+backlog): steered into the active
// run now, and kept for a later run of its own.
func TestInboundSteerBacklog(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"steer-backlog", "steer+backlog"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := sessionSetup(t, &engine.QueueSettings{Mode: mode, DebounceMS: ms(0)}, setupOpts{})
			first := b.inbound(t, "s", "hola", "m1")
			b.gate.waitEntered(t, "hola")
			require.Equal(t, engine.OutcomeSteered, b.inbound(t, "s", "y otra cosa", "m2").Outcome)
			b.gate.release("hola")
			require.Equal(t, "y otra cosa", b.waitFor(t, *first.ExecutionID, terminal).Variables["lastResponse"])

			runs := b.waitRuns(t, 2)
			b.gate.waitEntered(t, "y otra cosa")
			b.gate.release("y otra cosa")
			later := b.waitFor(t, runs[1].ExecutionID, terminal)
			require.Equal(t, engine.StatusCompleted, later.Status)
			require.Equal(t, "y otra cosa", later.Variables["lastResponse"])
			require.Equal(t, []string{"re: y otra cosa", "re: y otra cosa"}, b.waitDelivered(t, "s", 2))
			time.Sleep(300 * time.Millisecond)
			require.Len(t, b.runs(t), 2)
		})
	}
}

// A steered message the run never takes (it is cancelled first) becomes a
// followup and gets a run of its own.
func TestInboundSteerFallsBackToFollowup(t *testing.T) {
	t.Parallel()
	b := sessionSetup(t, &engine.QueueSettings{Mode: "steer", DebounceMS: ms(0)}, setupOpts{})
	first := b.inbound(t, "s", "hola", "m1")
	b.gate.waitEntered(t, "hola")
	require.Equal(t, engine.OutcomeSteered, b.inbound(t, "s", "sigues ahí?", "m2").Outcome)
	_, err := b.engine.Cancel(context.Background(), b.tenant, *first.ExecutionID, "user", "test")
	require.NoError(t, err)

	runs := b.waitRuns(t, 2)
	require.Equal(t, "sigues ahí?", runs[1].Variables["lastResponse"])
	b.gate.waitEntered(t, "sigues ahí?")
	b.gate.release("sigues ahí?")
	require.Equal(t, engine.StatusCompleted, b.waitFor(t, runs[1].ExecutionID, terminal).Status)
	require.Equal(t, []string{"re: sigues ahí?"}, b.waitDelivered(t, "s", 1))
}

// interrupt: the active run is cancelled by the system with a reason and
// the newest message runs at once.
func TestInboundInterrupt(t *testing.T) {
	t.Parallel()
	b := sessionSetup(t, &engine.QueueSettings{Mode: "interrupt"}, setupOpts{})
	first := b.inbound(t, "s", "hola", "m1")
	b.gate.waitEntered(t, "hola")
	second := b.inbound(t, "s", "olvídalo, otra cosa", "m2")
	require.Equal(t, engine.OutcomeStarted, second.Outcome)
	require.NotEqual(t, *first.ExecutionID, *second.ExecutionID)

	old := b.waitFor(t, *first.ExecutionID, terminal)
	require.Equal(t, engine.StatusCancelled, old.Status)
	require.Equal(t, "system", *old.CancelledBy)
	require.Contains(t, *old.CancelReason, "interrupted by inbound message m2")

	b.gate.waitEntered(t, "olvídalo, otra cosa")
	b.gate.release("olvídalo, otra cosa")
	x := b.waitFor(t, *second.ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, x.Status)
	require.Equal(t, []string{"re: olvídalo, otra cosa"}, b.waitDelivered(t, "s", 1))
	require.Len(t, b.runs(t), 2)
}

// followup: one later run per queued message, in arrival order.
func TestInboundFollowup(t *testing.T) {
	t.Parallel()
	b := sessionSetup(t, &engine.QueueSettings{Mode: "followup", DebounceMS: ms(0)}, setupOpts{})
	first := b.inbound(t, "s", "uno", "m1")
	b.gate.waitEntered(t, "uno")
	for i, text := range []string{"dos", "tres"} {
		r := b.inbound(t, "s", text, "q"+string(rune('a'+i)))
		require.Equal(t, engine.OutcomeQueued, r.Outcome)
	}
	b.gate.release("uno")
	require.Equal(t, engine.StatusCompleted, b.waitFor(t, *first.ExecutionID, terminal).Status)
	for n, text := range []string{"dos", "tres"} {
		runs := b.waitRuns(t, n+2)
		require.Equal(t, text, runs[n+1].Variables["lastResponse"])
		b.gate.waitEntered(t, text)
		b.gate.release(text)
		b.waitFor(t, runs[n+1].ExecutionID, terminal)
	}
	require.Equal(t, []string{"re: uno", "re: dos", "re: tres"}, b.waitDelivered(t, "s", 3))
	time.Sleep(300 * time.Millisecond)
	require.Len(t, b.runs(t), 3)
}

// cap with drop old and drop new, under collect: the collected run's prompt
// holds exactly the messages the policy kept.
func TestInboundCapDropPolicies(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		outcomes []string
		prompt   string
		dropped  []string
	}{
		"old": {
			outcomes: []string{engine.OutcomeQueued, engine.OutcomeQueued, engine.OutcomeQueued},
			prompt:   "[Queued messages while agent was busy]\n\n---\nQueued #1\ndos\n\n---\nQueued #2\ntres",
			dropped:  []string{"uno"},
		},
		"new": {
			outcomes: []string{engine.OutcomeQueued, engine.OutcomeQueued, engine.OutcomeDropped},
			prompt:   "[Queued messages while agent was busy]\n\n---\nQueued #1\nuno\n\n---\nQueued #2\ndos",
			dropped:  []string{"tres"},
		},
	}
	for drop, tc := range cases {
		t.Run(drop, func(t *testing.T) {
			t.Parallel()
			b := sessionSetup(t, &engine.QueueSettings{Mode: "collect", DebounceMS: ms(0), Cap: ms(2), Drop: drop}, setupOpts{})
			first := b.inbound(t, "s", "hola", "m1")
			b.gate.waitEntered(t, "hola")
			for i, text := range []string{"uno", "dos", "tres"} {
				require.Equal(t, tc.outcomes[i], b.inbound(t, "s", text, text).Outcome, text)
			}
			b.gate.release("hola")
			b.waitFor(t, *first.ExecutionID, terminal)
			runs := b.waitRuns(t, 2)
			require.Equal(t, tc.prompt, runs[1].Variables["lastResponse"])
			b.gate.waitEntered(t, tc.prompt)
			b.gate.release(tc.prompt)
			b.waitFor(t, runs[1].ExecutionID, terminal)
			statuses := b.inboundStatuses(t)
			for _, d := range tc.dropped {
				require.Equal(t, "dropped", statuses[d], d)
			}
			time.Sleep(300 * time.Millisecond)
			require.Len(t, b.runs(t), 2, "nothing is answered twice")
		})
	}
}

// A summarize overflow line is the message on one line, at most 160
// characters.
func TestInboundSummarizeLineIsShort(t *testing.T) {
	t.Parallel()
	b := sessionSetup(t, &engine.QueueSettings{Mode: "collect", DebounceMS: ms(0), Cap: ms(1), Drop: "summarize"}, setupOpts{})
	first := b.inbound(t, "s", "hola", "m1")
	b.gate.waitEntered(t, "hola")
	long := "una\nlínea muy larga " + strings.Repeat("palabra ", 40)
	b.inbound(t, "s", long, "q1")
	b.inbound(t, "s", "fin", "q2")
	b.gate.release("hola")
	b.waitFor(t, *first.ExecutionID, terminal)
	runs := b.waitRuns(t, 2)
	prompt, _ := runs[1].Variables["lastResponse"].(string)
	const header = "[Queue overflow] Dropped 1 messages due to cap. Summary:\n- "
	require.True(t, len(prompt) > len(header) && prompt[:len(header)] == header, prompt)
	line := prompt[len(header):]
	line, _, _ = strings.Cut(line, "\n")
	require.LessOrEqual(t, len([]rune(line)), 160)
	require.True(t, []rune(line)[len([]rune(line))-1] == '…', line)
	require.NotContains(t, line, "\n")
	require.Contains(t, prompt, "Queued #1\nfin")
	b.gate.release(prompt)
}

// byChannel decides the mode per message channel; a session override beats
// it; /queue reset and /queue default remove the override.
func TestInboundByChannelAndQueueReset(t *testing.T) {
	t.Parallel()
	b := sessionSetup(t, nil, setupOpts{queue: engine.QueueConfig{DebounceMS: 50, ByChannel: map[string]string{"whatsapp": "followup"}}})
	th, err := b.engine.GetThread(context.Background(), b.pool, b.tenant, "s")
	require.NoError(t, err)
	require.Equal(t, "followup", th.Queue.Mode)
	require.Equal(t, "channel", th.Queue.Sources["mode"])
	require.Equal(t, "global", th.Queue.Sources["debounce_ms"])
	require.Equal(t, "default", th.Queue.Sources["cap"])

	// A whatsapp message follows up (one run each); one from another
	// channel is collected.
	first := b.inbound(t, "s", "hola", "m1")
	b.gate.waitEntered(t, "hola")
	require.Equal(t, engine.OutcomeQueued, b.inbound(t, "s", "wa-1", "w1").Outcome)
	require.Equal(t, engine.OutcomeQueued, b.inbound(t, "s", "wa-2", "w2").Outcome)
	var res *engine.InboundResult
	require.NoError(t, b.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
		var err error
		res, err = b.engine.ReceiveInboundTx(context.Background(), tx, engine.InboundParams{TenantID: b.tenant, ThreadID: "s", Text: "web-1", MessageID: "x1", Channel: "web"})
		return err
	}))
	require.Equal(t, engine.OutcomeQueued, res.Outcome)
	b.gate.release("hola")
	b.waitFor(t, *first.ExecutionID, terminal)
	collected := "[Queued messages while agent was busy]\n\n---\nQueued #1\nweb-1"
	for n, prompt := range []string{"wa-1", "wa-2", collected} {
		runs := b.waitRuns(t, n+2)
		require.Equal(t, prompt, runs[n+1].Variables["lastResponse"])
		b.gate.waitEntered(t, prompt)
		b.gate.release(prompt)
		b.waitFor(t, runs[n+1].ExecutionID, terminal)
	}

	// The session override wins over the channel; reset and default drop it.
	for _, reset := range []string{"/queue reset", "/queue default"} {
		require.Equal(t, engine.OutcomeCommand, b.inbound(t, "s", "/queue collect debounce:2s cap:25 drop:old", "").Outcome)
		th, err = b.engine.GetThread(context.Background(), b.pool, b.tenant, "s")
		require.NoError(t, err)
		require.Equal(t, engine.EffectiveQueueSettings{Mode: "collect", DebounceMS: 2000, Cap: 25, Drop: "old",
			Sources: map[string]string{"mode": "session", "debounce_ms": "session", "cap": "session", "drop": "session"}}, th.Queue)
		require.Equal(t, engine.OutcomeCommand, b.inbound(t, "s", reset, "").Outcome)
		th, err = b.engine.GetThread(context.Background(), b.pool, b.tenant, "s")
		require.NoError(t, err)
		require.Equal(t, "followup", th.Queue.Mode, reset)
		require.Equal(t, "channel", th.Queue.Sources["mode"], reset)
		require.Equal(t, 50, th.Queue.DebounceMS, reset)
	}
	require.Len(t, b.runs(t), 4, "commands start no run")
}

// A run waiting for a response on the thread takes the user's message,
// whether it comes to POST /threads/{id}/messages or as a thread-addressed
// MESSAGE_RECEIVED event; with nothing waiting, the event goes through the
// router like any inbound message.
func TestInboundResumesAWaitingRun(t *testing.T) {
	t.Parallel()
	b := sessionSetup(t, &engine.QueueSettings{Mode: "collect", DebounceMS: ms(0)}, setupOpts{})
	b.define(t, `{"workflow_id": "asker", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "ask"},
	  {"id": "ask", "type": "action", "actionType": "send_message", "parameters": {"message": "¿Cuál es tu nombre?"}, "next": "wait"},
	  {"id": "wait", "type": "action", "actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "again"},
	  {"id": "again", "type": "action", "actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "bye"},
	  {"id": "bye", "type": "action", "actionType": "send_message", "parameters": {"message": "Gracias {{lastResponse}}"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	asker := b.start(t, engine.StartParams{WorkflowID: "asker", ThreadID: "s"})
	b.waitFor(t, asker.ExecutionID, func(x *engine.Execution) bool { return x.Status == engine.StatusWaiting })

	res := b.inbound(t, "s", "María", "m1")
	require.Equal(t, engine.OutcomeResumed, res.Outcome)
	require.Equal(t, asker.ExecutionID, *res.ExecutionID)
	x := b.waitFor(t, asker.ExecutionID, func(x *engine.Execution) bool {
		return x.Status == engine.StatusWaiting && len(x.NodePath) > 0 && x.NodePath[len(x.NodePath)-1] == "again"
	})
	require.Equal(t, "María", x.Variables["lastResponse"])

	ev := b.publish(t, engine.PublishEventParams{TenantID: b.tenant, EventType: engine.EventTypeMessageReceived, EventID: "e1", ThreadID: "s",
		Data: map[string]any{"text": "María López"}})
	require.Equal(t, []string{asker.ExecutionID}, ev.Resumed)
	require.Equal(t, engine.OutcomeResumed, ev.Inbound.Outcome)
	x = b.waitFor(t, asker.ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, x.Status)
	require.Equal(t, []string{"¿Cuál es tu nombre?", "Gracias María López"}, b.waitDelivered(t, "s", 2))

	// A repeated event_id replays the answer and resumes nothing.
	again := b.publish(t, engine.PublishEventParams{TenantID: b.tenant, EventType: engine.EventTypeMessageReceived, EventID: "e1", ThreadID: "s",
		Data: map[string]any{"text": "María López"}})
	require.Equal(t, ev.Resumed, again.Resumed)
	require.True(t, again.Replayed)

	// Nobody waits now: the event starts a run of the thread's default
	// workflow instead of a conflict.
	started := b.publish(t, engine.PublishEventParams{TenantID: b.tenant, EventType: engine.EventTypeMessageReceived, EventID: "e2", ThreadID: "s",
		Data: map[string]any{"text": "hola otra vez"}})
	require.Empty(t, started.Resumed)
	require.Equal(t, engine.OutcomeStarted, started.Inbound.Outcome)
	b.gate.waitEntered(t, "hola otra vez")
	b.gate.release("hola otra vez")
	require.Equal(t, engine.StatusCompleted, b.waitFor(t, *started.Inbound.ExecutionID, terminal).Status)
}

// Messages queued behind a run that fails or times out are answered
// afterwards, once each.
func TestInboundQueueSurvivesFailureAndTimeout(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		workflow string
		status   engine.ExecutionStatus
	}{
		"failed": {`{"workflow_id": "agent", "version": "2", "nodes": [
		  {"id": "start", "type": "start", "next": "hold"},
		  {"id": "hold", "type": "task", "task": "gate", "inputs": {"key": "{{lastResponse}}"}, "next": "boom"},
		  {"id": "boom", "type": "task", "task": "boom", "next": "end"},
		  {"id": "end", "type": "end"}]}`, engine.StatusFailed},
		"timeout": {`{"workflow_id": "agent", "version": "2", "nodes": [
		  {"id": "start", "type": "start", "next": "hold"},
		  {"id": "hold", "type": "task", "task": "gate", "inputs": {"key": "{{lastResponse}}"}, "next": "wait"},
		  {"id": "wait", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "never", "timeout": "1s", "onTimeout": "fail"}, "next": "end"},
		  {"id": "end", "type": "end"}]}`, engine.StatusTimeout},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := sessionSetup(t, &engine.QueueSettings{Mode: "collect", DebounceMS: ms(0)}, setupOpts{tools: map[string]engine.ToolFunc{
				"boom": func(context.Context, engine.ToolCall) (map[string]any, error) {
					return nil, &engine.ToolError{Class: engine.ClassValidation, Err: errors.New("the tool refuses")}
				},
			}})
			b.define(t, tc.workflow)
			first := b.inbound(t, "s", "hola", "m1")
			b.gate.waitEntered(t, "hola")
			require.Equal(t, engine.OutcomeQueued, b.inbound(t, "s", "a", "a").Outcome)
			require.Equal(t, engine.OutcomeQueued, b.inbound(t, "s", "b", "b").Outcome)
			b.gate.release("hola")
			require.Equal(t, tc.status, b.waitFor(t, *first.ExecutionID, terminal).Status)

			prompt := "[Queued messages while agent was busy]\n\n---\nQueued #1\na\n\n---\nQueued #2\nb"
			runs := b.waitRuns(t, 2)
			require.Equal(t, prompt, runs[1].Variables["lastResponse"])
			b.gate.waitEntered(t, prompt)
			b.gate.release(prompt)
			b.waitFor(t, runs[1].ExecutionID, terminal)
			statuses := b.inboundStatuses(t)
			require.Equal(t, "consumed", statuses["a"])
			require.Equal(t, "consumed", statuses["b"])
			time.Sleep(300 * time.Millisecond)
			require.Len(t, b.runs(t), 2, "nothing is answered twice")
		})
	}
}

// The debounce window is a trailing quiet period: the queued run starts no
// earlier than debounce after the last queued message, even when the active
// run ends before that (loosely bounded above here; the benchmark measures
// precision).
func TestInboundDebounceWindow(t *testing.T) {
	t.Parallel()
	b := sessionSetup(t, &engine.QueueSettings{Mode: "collect", DebounceMS: ms(600)}, setupOpts{})
	first := b.inbound(t, "s", "hola", "m1")
	b.gate.waitEntered(t, "hola")
	require.Equal(t, engine.OutcomeQueued, b.inbound(t, "s", "uno", "u1").Outcome)
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, engine.OutcomeQueued, b.inbound(t, "s", "dos", "u2").Outcome)
	b.gate.release("hola")
	b.waitFor(t, *first.ExecutionID, terminal)
	var last time.Time
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT max(created_at) FROM thread_message WHERE direction = 'in' AND body IN ('uno', 'dos')`).Scan(&last))

	prompt := "[Queued messages while agent was busy]\n\n---\nQueued #1\nuno\n\n---\nQueued #2\ndos"
	runs := b.waitRuns(t, 2)
	require.Equal(t, prompt, runs[1].Variables["lastResponse"])
	waited := runs[1].CreatedAt.Sub(last)
	t.Logf("the queued run started %v after the last message (debounce 600ms)", waited)
	require.GreaterOrEqual(t, waited, 600*time.Millisecond)
	require.Less(t, waited, 3*time.Second)
	b.gate.waitEntered(t, prompt)
	b.gate.release(prompt)
	b.waitFor(t, runs[1].ExecutionID, terminal)
}

// A message steered in while the run's llm node is waiting for the model:
// that answer is discarded and the node runs again, with the steered message
// in the conversation and a new idempotency key.
func TestInboundSteerRerunsAnLLMNode(t *testing.T) {
	t.Parallel()
	firstCall := make(chan struct{})
	release := make(chan struct{})
	var mu sync.Mutex
	var keys []string
	var lastMessages []any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		n := len(keys)
		lastMessages, _ = body["messages"].([]any)
		mu.Unlock()
		answer := "respuesta nueva"
		if n == 1 {
			close(firstCall)
			<-release
			answer = "respuesta vieja"
		}
		_, _ = fmt.Fprintf(w, `{"model":"tiny","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, answer)
	}))
	t.Cleanup(srv.Close)
	b := setup(t, setupOpts{specs: map[string]engine.ToolSpec{"chat": {Type: engine.ToolTypeLLM, BaseURL: srv.URL + "/v1", Model: "tiny"}}})
	b.define(t, `{"workflow_id": "talk", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "think"},
	  {"id": "think", "type": "task", "task": "chat", "output": "reply", "inputs": {"prompt": "{{lastResponse}}"}, "next": "say"},
	  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "{{reply.content}}"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	_, _, err := b.engine.UpsertThread(context.Background(), b.pool, engine.ThreadUpsert{TenantID: b.tenant, ThreadID: "s", Channel: "web", Contact: "c",
		DefaultWorkflowID: "talk", Queue: &engine.QueueSettings{Mode: "steer"}})
	require.NoError(t, err)

	first := b.inbound(t, "s", "hola", "m1")
	<-firstCall
	require.Equal(t, engine.OutcomeSteered, b.inbound(t, "s", "mejor en inglés", "m2").Outcome)
	close(release)

	x := b.waitFor(t, *first.ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, x.Status)
	require.Equal(t, []string{"respuesta nueva"}, b.waitDelivered(t, "s", 1), "the answer given before the steer is not sent")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{x.ExecutionID + ":think:1", x.ExecutionID + ":think:2"}, keys)
	require.Contains(t, fmt.Sprint(lastMessages), "mejor en inglés", "the rerun sees the steered message")
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM execution_event WHERE execution_id = $1 AND action = 'workflow.steered'`, x.ID))
}
