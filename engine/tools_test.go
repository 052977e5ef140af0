package engine_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/engine/workflow"
)

// toolServer is an httptest http tool that records every call.
type toolServer struct {
	*httptest.Server
	mu    sync.Mutex
	calls []map[string]any
	// answer decides the status and body of each call.
	answer func(n int, body map[string]any) (int, any)
}

func newToolServer(t *testing.T, answer func(n int, body map[string]any) (int, any)) *toolServer {
	ts := &toolServer{answer: answer}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		ts.mu.Lock()
		ts.calls = append(ts.calls, body)
		n := len(ts.calls)
		ts.mu.Unlock()
		status, out := ts.answer(n, body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *toolServer) keys(executionID string) []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []string
	for _, c := range ts.calls {
		if c["execution_id"] == executionID {
			out = append(out, c["idempotency_key"].(string))
		}
	}
	return out
}

func (ts *toolServer) count() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.calls)
}

func documentWorkflow(t *testing.T) string {
	raw, err := os.ReadFile("testdata/document-processor.json")
	require.NoError(t, err)
	return string(raw)
}

// The document-processing workflow of testdata against an http tool: both
// branches, node_path, and the step events in order and shape.
func TestDocumentProcessorBranchesWithHTTPTool(t *testing.T) {
	t.Parallel()
	tool := newToolServer(t, func(_ int, body map[string]any) (int, any) {
		inputs := body["inputs"].(map[string]any)
		lang := "en"
		if strings.Contains(inputs["document_url"].(string), "/es/") {
			lang = "es"
		}
		return 200, map[string]any{"language": lang, "page_count": 5}
	})
	b := setup(t, setupOpts{specs: map[string]engine.ToolSpec{
		"document_processor": {Type: engine.ToolTypeHTTP, URL: tool.URL},
	}})
	b.define(t, documentWorkflow(t))

	for _, tc := range []struct {
		url, branch, summaryLanguage string
	}{
		{"https://example.com/es/doc.pdf", "spanish_processing", "es"},
		{"https://example.com/en/doc.pdf", "other_language_processing", "en"},
	} {
		x := b.start(t, engine.StartParams{WorkflowID: "document-processor-workflow", Input: map[string]any{"document_url": tc.url}})
		done := b.waitFor(t, x.ExecutionID, terminal)
		require.Equal(t, engine.StatusCompleted, done.Status, "%+v", done)
		want := []string{"start", "document_processing", "language_detection", tc.branch, "end"}
		require.Equal(t, want, done.NodePath)
		require.Equal(t, tc.summaryLanguage, done.Variables["summary_language"])
		require.Equal(t, float64(5), done.Variables["document"].(map[string]any)["page_count"])

		// The tool got the documented request.
		require.Equal(t, []string{x.ExecutionID + ":document_processing:1"}, tool.keys(x.ExecutionID))
		tool.mu.Lock()
		var call map[string]any
		for _, c := range tool.calls {
			if c["execution_id"] == x.ExecutionID {
				call = c
			}
		}
		tool.mu.Unlock()
		require.Equal(t, "document_processor", call["tool_id"])
		require.Equal(t, "document_processing", call["node_id"])
		require.Equal(t, map[string]any{"extraction_level": "full"}, call["config"])
		require.Equal(t, map[string]any{"document_url": tc.url}, call["inputs"])

		logs, err := b.engine.Logs(context.Background(), b.pool, b.tenant, x.ExecutionID, 0, 100)
		require.NoError(t, err)
		var steps []map[string]any
		var actions []string
		for _, l := range logs {
			actions = append(actions, l.Action)
			if l.Action == engine.EventStepUpdate {
				steps = append(steps, l.Payload)
			}
		}
		require.Equal(t, engine.EventStarted, actions[0])
		require.Equal(t, engine.EventCompleted, actions[len(actions)-1])
		require.Len(t, steps, 5)
		for i, s := range steps {
			require.Equal(t, want[i], s["step_id"])
			require.Equal(t, float64(i+1), s["completed_steps"])
			require.Equal(t, float64(5), s["total_steps"])
			if i < 4 {
				require.Equal(t, want[i+1], s["next_node"])
			}
		}
		require.Equal(t, map[string]any{"language": tc.summaryLanguage, "page_count": float64(5)}, steps[1]["step_result"])
		require.Contains(t, steps[2]["decision_made"], "${document.language} == 'es'")
		require.Equal(t, float64(100), steps[4]["progress_percentage"])
	}
}

const retryWorkflow = `{
  "workflow_id": "retry", "version": "1",
  "nodes": [
    {"id": "start", "type": "start", "next": "call"},
    {"id": "call", "type": "task", "task": "flaky", "output": "answer",
     "retry": {"max": 3, "backoff": "linear", "delay_ms": 20}, "next": "end"},
    {"id": "end", "type": "end", "result": {"summary": "done {{answer.ok}}"}}
  ]}`

// A flaky tool is retried per the node's policy, each attempt with the same
// idempotency prefix and Baton's attempt number, and succeeds.
func TestFlakyToolRetriedPerPolicy(t *testing.T) {
	t.Parallel()
	failuresPer := map[string]int{}
	var mu sync.Mutex
	tool := newToolServer(t, func(_ int, body map[string]any) (int, any) {
		mu.Lock()
		defer mu.Unlock()
		id := body["execution_id"].(string)
		if failuresPer[id] < 2 {
			failuresPer[id]++
			return 503, map[string]any{"error": "busy"}
		}
		return 200, map[string]any{"ok": true}
	})
	b := setup(t, setupOpts{specs: map[string]engine.ToolSpec{"flaky": {Type: engine.ToolTypeHTTP, URL: tool.URL}}})
	b.define(t, retryWorkflow)
	x := b.start(t, engine.StartParams{WorkflowID: "retry"})
	done := b.waitFor(t, x.ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, done.Status, "%+v", done)
	require.Equal(t, "done true", *done.ResultSummary)
	prefix := x.ExecutionID + ":call:"
	require.Equal(t, []string{prefix + "1", prefix + "2", prefix + "3"}, tool.keys(x.ExecutionID))
	require.Equal(t, 2, countRows(t, b.pool, `SELECT count(*) FROM execution_event WHERE execution_id = $1 AND action = 'workflow.step_retry'`, x.ID))
	// The retries snoozed the step job: no River attempt was spent on them.
	require.Equal(t, 0, countRows(t, b.pool, `SELECT count(*) FROM river_job WHERE kind = 'execution.step' AND args->>'execution_id' = $1::bigint::text AND attempt > 1`, x.ID))
	require.Equal(t, 0, countRows(t, b.pool, `SELECT node_attempt FROM agent_execution WHERE id = $1`, x.ID))
}

// 4xx answers fail at once; 5xx answers are retried and, once the retries
// are spent, fail with workflow.service.unavailable, retryable.
func TestToolErrorClasses(t *testing.T) {
	t.Parallel()
	status := map[string]int{}
	var mu sync.Mutex
	tool := newToolServer(t, func(_ int, body map[string]any) (int, any) {
		mu.Lock()
		defer mu.Unlock()
		return status[body["execution_id"].(string)], map[string]any{"error": "no"}
	})
	b := setup(t, setupOpts{specs: map[string]engine.ToolSpec{"flaky": {Type: engine.ToolTypeHTTP, URL: tool.URL,
		Breaker: engine.BreakerSettings{Failures: 100}}}})
	b.define(t, retryWorkflow)

	for _, tc := range []struct {
		status    int
		code      string
		calls     int
		retryable bool
	}{
		{400, engine.CodeToolFailed, 1, false},
		{422, engine.CodeToolFailed, 1, false},
		{500, engine.CodeServiceUnavailable, 4, true},
	} {
		id := engine.StartParams{WorkflowID: "retry", ExecutionID: "exec-status-" + http.StatusText(tc.status)}
		mu.Lock()
		status[id.ExecutionID] = tc.status
		mu.Unlock()
		x := b.start(t, id)
		done := b.waitFor(t, x.ExecutionID, terminal)
		require.Equal(t, engine.StatusFailed, done.Status)
		require.Equal(t, tc.code, *done.ErrorCode, "%d: %s", tc.status, *done.ErrorMessage)
		require.Equal(t, "call", *done.FailedNodeID)
		require.Len(t, tool.keys(x.ExecutionID), tc.calls)
		d := done.ErrorDetails()
		require.Equal(t, tc.retryable, d["retryable"])
		require.Equal(t, float64(tc.status), d["http_status"])
		if tc.retryable {
			require.Greater(t, d["retry_after_ms"], float64(0))
		} else {
			require.Nil(t, d["retry_after_ms"])
		}
	}
}

// A dead tool opens its breaker after N failures; executions that need it
// pause (pending, off their lane, no attempts spent, no calls) and continue
// after the cooldown once the tool is back.
func TestBreakerPausesExecutionsUntilToolIsBack(t *testing.T) {
	t.Parallel()
	var dead atomic.Bool
	dead.Store(true)
	tool := newToolServer(t, func(int, map[string]any) (int, any) {
		if dead.Load() {
			return 503, map[string]any{"error": "down"}
		}
		return 200, map[string]any{"ok": true}
	})
	const cooldown = 3 * time.Second
	b := setup(t, setupOpts{specs: map[string]engine.ToolSpec{"flaky": {
		Type: engine.ToolTypeHTTP, URL: tool.URL,
		Retry:   &workflow.RetryPolicy{Max: 10, Backoff: engine.BackoffLinear, DelayMS: 20},
		Breaker: engine.BreakerSettings{Failures: 3, Cooldown: cooldown},
	}}})
	b.define(t, strings.Replace(retryWorkflow, `"retry": {"max": 3, "backoff": "linear", "delay_ms": 20}, `, "", 1))

	first := b.start(t, engine.StartParams{WorkflowID: "retry"})
	breaker := func() engine.BreakerStatus {
		for _, s := range b.engine.Tools().Breakers() {
			if s.Tool == "flaky" {
				return s
			}
		}
		t.Fatal("no breaker for tool flaky")
		return engine.BreakerStatus{}
	}
	require.Eventually(t, func() bool { return breaker().State == "open" }, 20*time.Second, 10*time.Millisecond)
	status := breaker()
	require.Equal(t, 3, tool.count())

	second := b.start(t, engine.StartParams{WorkflowID: "retry"})
	// Wait for both runs to pause at the open breaker, or for its window to
	// close on a machine too slow to see them do it.
	require.Eventually(t, func() bool {
		paused := b.get(t, first.ExecutionID).Status == engine.StatusPending &&
			b.get(t, second.ExecutionID).Status == engine.StatusPending
		return paused || time.Now().After(status.OpenUntil)
	}, 20*time.Second, 10*time.Millisecond)
	// Read everything first, then look at the clock: what was read before
	// the breaker's probe time cannot have seen the probe's admission.
	calls := tool.count()
	seen := []*engine.Execution{b.get(t, first.ExecutionID), b.get(t, second.ExecutionID)}
	attempts := []int{
		countRows(t, b.pool, `SELECT node_attempt FROM agent_execution WHERE id = $1`, first.ID),
		countRows(t, b.pool, `SELECT node_attempt FROM agent_execution WHERE id = $1`, second.ID),
	}
	if time.Now().Before(status.OpenUntil.Add(-20 * time.Millisecond)) {
		// Still open: nobody called the tool, nobody failed, no attempt
		// burned, and both wait off their lane (pending) for the probe.
		require.Equal(t, 3, calls)
		for _, cur := range seen {
			require.Equal(t, engine.StatusPending, cur.Status)
			require.Equal(t, "call", *cur.CurrentNodeID)
		}
		require.Equal(t, []int{3, 0}, attempts)
	} else {
		t.Log("the machine was too slow to look inside the open window; checking only the outcome")
	}

	dead.Store(false)
	for _, x := range []*engine.Execution{first, second} {
		done := b.waitFor(t, x.ExecutionID, terminal)
		require.Equal(t, engine.StatusCompleted, done.Status, "%+v", done)
	}
	require.Equal(t, "closed", breaker().State)
	p := first.ExecutionID + ":call:"
	require.Equal(t, []string{p + "1", p + "2", p + "3", p + "4"}, tool.keys(first.ExecutionID))
	require.Equal(t, []string{second.ExecutionID + ":call:1"}, tool.keys(second.ExecutionID))
	require.Equal(t, 5, tool.count())
	// The pause shows in the execution's log: why it was not moving.
	var paused int
	var payload map[string]any
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) OVER (), payload FROM execution_event
		WHERE execution_id = $1 AND action = 'workflow.step_paused' ORDER BY id LIMIT 1`, second.ID).Scan(&paused, &payload))
	require.GreaterOrEqual(t, paused, 1)
	require.Equal(t, "open", payload["breaker"])
	require.Equal(t, "flaky", payload["tool_id"])
}

// The llm tool speaks the chat completions protocol and sends the
// execution's conversation history before the node's prompt.
func TestLLMToolSendsConversationHistory(t *testing.T) {
	t.Parallel()
	var got struct {
		auth string
		body map[string]any
	}
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v1/chat/completions", r.URL.Path)
		mu.Lock()
		got.auth = r.Header.Get("Authorization")
		_ = json.NewDecoder(r.Body).Decode(&got.body)
		mu.Unlock()
		_, _ = w.Write([]byte(`{"model":"tiny-1","choices":[{"index":0,"message":{"role":"assistant","content":"Claro, Ana."},"finish_reason":"stop"}],"usage":{"total_tokens":12}}`))
	}))
	t.Cleanup(srv.Close)
	require.NoError(t, os.Setenv("BATON_TEST_LLM_KEY", "sk-test")) // a name no other test uses
	b := setup(t, setupOpts{specs: map[string]engine.ToolSpec{"chat": {
		Type: engine.ToolTypeLLM, BaseURL: srv.URL + "/v1", Model: "tiny-1", APIKeyEnv: "BATON_TEST_LLM_KEY",
	}}})
	b.define(t, `{"workflow_id": "llm", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "ask"},
	  {"id": "ask", "type": "task", "task": "chat", "output": "reply",
	   "inputs": {"system": "Eres breve.", "prompt": "Resume para {{name}}"}, "next": "end"},
	  {"id": "end", "type": "end", "result": {"summary": "{{reply.content}}"}}]}`)
	var x *engine.Execution
	require.NoError(t, b.engine.WithTx(context.Background(), func(tx pgxTx) error {
		var err error
		x, err = b.engine.StartExecution(context.Background(), tx, engine.StartParams{TenantID: b.tenant, WorkflowID: "llm", Input: map[string]any{"name": "Ana"}})
		if err != nil {
			return err
		}
		_, err = tx.Exec(context.Background(), `UPDATE agent_execution SET conversation_history = $2 WHERE id = $1`, x.ID,
			`[{"role":"user","content":"Hola"},{"direction":"out","body":"¿En qué te ayudo?"}]`)
		return err
	}))
	done := b.waitFor(t, x.ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, done.Status, "%+v", done)
	require.Equal(t, "Claro, Ana.", *done.ResultSummary)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, "Bearer sk-test", got.auth)
	require.Equal(t, "tiny-1", got.body["model"])
	require.Equal(t, []any{
		map[string]any{"role": "system", "content": "Eres breve."},
		map[string]any{"role": "user", "content": "Hola"},
		map[string]any{"role": "assistant", "content": "¿En qué te ayudo?"},
		map[string]any{"role": "user", "content": "Resume para Ana"},
	}, got.body["messages"])
}

// A call that outlives the workflow's default_timeout_ms is a timeout:
// retried with exponential backoff (50 ms, then 100 ms) under one
// idempotency prefix, and the run completes once the tool answers in time;
// when it never does, the run fails with workflow.execute.timeout.
func TestToolTimeoutRetriedWithExponentialBackoff(t *testing.T) {
	t.Parallel()
	slowFor := map[string]int{}
	var mu sync.Mutex
	tool := newToolServer(t, func(n int, body map[string]any) (int, any) {
		mu.Lock()
		id := body["execution_id"].(string)
		slow := slowFor[id] != 0
		if slowFor[id] > 0 {
			slowFor[id]--
		}
		mu.Unlock()
		if slow {
			time.Sleep(600 * time.Millisecond) // past the 150 ms timeout
		}
		return 200, map[string]any{"ok": true}
	})
	b := setup(t, setupOpts{specs: map[string]engine.ToolSpec{"slow": {Type: engine.ToolTypeHTTP, URL: tool.URL,
		Breaker: engine.BreakerSettings{Failures: 100}}}})
	b.define(t, `{"workflow_id": "timed", "version": "1", "default_timeout_ms": 150, "nodes": [
	  {"id": "start", "type": "start", "next": "call"},
	  {"id": "call", "type": "task", "task": "slow", "output": "answer",
	   "retry": {"max": 3, "backoff": "exponential", "delay_ms": 50}, "next": "end"},
	  {"id": "end", "type": "end", "result": {"summary": "done {{answer.ok}}"}}]}`)

	mu.Lock()
	slowFor["exec-timeout-twice"] = 2
	slowFor["exec-timeout-always"] = -1
	mu.Unlock()
	x := b.start(t, engine.StartParams{WorkflowID: "timed", ExecutionID: "exec-timeout-twice"})
	done := b.waitFor(t, x.ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, done.Status, "%+v", done)
	prefix := x.ExecutionID + ":call:"
	require.Equal(t, []string{prefix + "1", prefix + "2", prefix + "3"}, tool.keys(x.ExecutionID))
	rows, err := b.pool.Query(context.Background(), `SELECT (payload->>'retry_after_ms')::int, payload->>'error_type' FROM execution_event
		WHERE execution_id = $1 AND action = 'workflow.step_retry' ORDER BY id`, x.ID)
	require.NoError(t, err)
	var delays []int
	for rows.Next() {
		var d int
		var class string
		require.NoError(t, rows.Scan(&d, &class))
		require.Equal(t, "timeout", class)
		delays = append(delays, d)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []int{50, 100}, delays, "exponential backoff from delay_ms")

	y := b.start(t, engine.StartParams{WorkflowID: "timed", ExecutionID: "exec-timeout-always"})
	failed := b.waitFor(t, y.ExecutionID, terminal)
	require.Equal(t, engine.StatusFailed, failed.Status)
	require.Equal(t, engine.CodeTimeout, *failed.ErrorCode)
	require.Len(t, tool.keys(y.ExecutionID), 4, "the first call and three retries")
}

// While a tool's breaker is open, the runs that need it give their lane
// slot back: with main limited to one, a run that needs no tool completes
// meanwhile, and the paused run completes once the tool is back.
func TestBreakerPauseFreesTheLaneSlot(t *testing.T) {
	t.Parallel()
	var dead atomic.Bool
	dead.Store(true)
	tool := newToolServer(t, func(int, map[string]any) (int, any) {
		if dead.Load() {
			return 503, map[string]any{"error": "down"}
		}
		return 200, map[string]any{"ok": true}
	})
	b := setup(t, setupOpts{laneLimits: map[string]int{"main": 1}, specs: map[string]engine.ToolSpec{"flaky": {
		Type: engine.ToolTypeHTTP, URL: tool.URL,
		Retry:   &workflow.RetryPolicy{Max: 10, Backoff: engine.BackoffLinear, DelayMS: 20},
		Breaker: engine.BreakerSettings{Failures: 2, Cooldown: 5 * time.Second}, // long enough to look inside the open window on a slow machine
	}}})
	b.define(t, strings.Replace(retryWorkflow, `"retry": {"max": 3, "backoff": "linear", "delay_ms": 20}, `, "", 1))
	b.define(t, sender("quick", []string{"sin herramienta"}))

	stuck := b.start(t, engine.StartParams{WorkflowID: "retry"})
	b.waitFor(t, stuck.ExecutionID, func(x *engine.Execution) bool { return x.Status == engine.StatusPending })
	var lane struct{ running, pending int }
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT running, pending FROM monitor_lanes WHERE lane = 'main'`).Scan(&lane.running, &lane.pending))
	require.Equal(t, 0, lane.running, "the paused run holds no slot")
	require.Equal(t, 1, lane.pending)

	quick := b.start(t, engine.StartParams{WorkflowID: "quick"})
	require.Equal(t, engine.StatusCompleted, quick.Status, "admitted at once: the slot was free")
	require.Equal(t, engine.StatusPending, b.get(t, stuck.ExecutionID).Status)

	dead.Store(false)
	done := b.waitFor(t, stuck.ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, done.Status, "%+v", done)
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM execution_event WHERE execution_id = $1 AND action = 'workflow.step_paused'`, stuck.ID))
}
