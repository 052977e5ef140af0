package engine_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

// leakWorkflows fail with what a contact wrote or a variable holds: a
// delay whose duration is the contact's answer or a variable, a condition
// that cannot evaluate a variable or whose value matches no branch, a
// tool that echoes its input in its error, a child workflow named by a
// variable.
var leakWorkflows = []string{
	`{"workflow_id": "answer-delay", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "ask"},
	  {"id": "ask", "type": "action", "actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "pause"},
	  {"id": "pause", "type": "action", "actionType": "delay", "parameters": {"duration": "{{lastResponse}}"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`,
	`{"workflow_id": "var-delay", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "pause"},
	  {"id": "pause", "type": "action", "actionType": "delay", "parameters": {"duration": "{{wait}}"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`,
	`{"workflow_id": "var-condition", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "check"},
	  {"id": "check", "type": "decision", "condition": "${choices}[${answer}] == 1", "branches": {"true": "end", "false": "end"}},
	  {"id": "end", "type": "end"}]}`,
	`{"workflow_id": "var-branch", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "check"},
	  {"id": "check", "type": "decision", "condition": "${answer}", "branches": {"yes": "end"}},
	  {"id": "end", "type": "end"}]}`,
	`{"workflow_id": "echo-tool", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "call"},
	  {"id": "call", "type": "task", "task": "echo", "inputs": {"email": "{{email}}"},
	   "retry": {"max": 1, "delay_ms": 10}, "next": "end"},
	  {"id": "end", "type": "end"}]}`,
	`{"workflow_id": "var-child", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "child"},
	  {"id": "child", "type": "action", "actionType": "trigger_agent", "parameters": {"workflow_id": "{{who}}"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`,
	`{"workflow_id": "short-wait", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "w"},
	  {"id": "w", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "never", "timeout": "1s"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`,
}

// Runs that fail on what a contact wrote or on a variable's value leave
// that text out of the process log, at every level down to DEBUG: the
// "step failed" warning names the field and its length, while the
// execution's error_message, which the tenant reads, keeps the text. The
// tool's answer, which echoes the contact's address, is told by its
// length; the resume's debug line gives lastResponse's length.
func TestTenantDataStaysOutOfTheLog(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	tool := newToolServer(t, func(n int, body map[string]any) (int, any) {
		email, _ := body["inputs"].(map[string]any)["email"].(string)
		if n == 1 {
			return 503, map[string]any{"error": "busy with " + email}
		}
		return 422, map[string]any{"error": "no such address: " + email}
	})
	b := setup(t, setupOpts{logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		specs: map[string]engine.ToolSpec{"echo": {Type: engine.ToolTypeHTTP, URL: tool.URL}}})
	for _, def := range leakWorkflows {
		b.define(t, def)
	}
	const card = "my card is 4111 1111 1111 1111"
	failed := func(p engine.StartParams, secret, logged string) {
		t.Helper()
		x := b.start(t, p)
		if p.WorkflowID == "answer-delay" {
			b.waitFor(t, x.ExecutionID, waiting)
			b.inbound(t, p.ThreadID, card, "m-card")
		}
		done := b.waitFor(t, x.ExecutionID, terminal)
		require.Equal(t, engine.StatusFailed, done.Status, p.WorkflowID)
		require.Contains(t, *done.ErrorMessage, secret, "the tenant reads what failed")
		require.True(t, logs.has(t, func(line map[string]any) bool {
			msg, _ := line["error"].(string)
			return line["msg"] == "step failed" && line["level"] == "WARN" && line["execution_id"] == x.ExecutionID && strings.HasPrefix(msg, logged)
		}), "no step failed line saying %q", logged)
	}
	failed(engine.StartParams{WorkflowID: "answer-delay", ThreadID: "th-card"}, card,
		fmt.Sprintf("duration <%d bytes> is not a duration", len(card)))
	failed(engine.StartParams{WorkflowID: "var-delay", Input: map[string]any{"wait": "maria@example.com"}}, "maria@example.com",
		"duration <17 bytes> is not a duration")
	contact := map[string]any{"email": "maria.object@example.com"}
	failed(engine.StartParams{WorkflowID: "var-delay", Input: map[string]any{"wait": contact}}, "maria.object@example.com",
		`duration <36 bytes> is not a duration`) // {"email":"maria.object@example.com"}
	failed(engine.StartParams{WorkflowID: "var-condition", Input: map[string]any{"choices": map[string]any{"a": 1}, "answer": "maria.cond@example.com"}}, "maria.cond@example.com",
		"the condition did not evaluate (<")
	failed(engine.StartParams{WorkflowID: "var-branch", Input: map[string]any{"answer": "maria.branch@example.com"}}, "maria.branch@example.com",
		"the condition gave <24 bytes> and no branch matches it")
	failed(engine.StartParams{WorkflowID: "echo-tool", Input: map[string]any{"email": "maria.tool@example.com"}}, "maria.tool@example.com",
		fmt.Sprintf("tool echo failed at step call after 2 attempts: the tool rejected its input: <%d bytes>", answerLen("no such address: maria.tool@example.com")))
	failed(engine.StartParams{WorkflowID: "var-child", Input: map[string]any{"who": "maria.trigger@example.com"}}, "maria.trigger@example.com",
		"trigger_agent: workflow_id <25 bytes> names no defined workflow")

	require.True(t, logs.has(t, func(line map[string]any) bool {
		return line["msg"] == "tool call failed; retrying" &&
			line["error"] == fmt.Sprintf("service error (HTTP 503): the tool answered <%d bytes>", answerLen("busy with maria.tool@example.com"))
	}), "the retried tool's answer is told by its length")
	require.True(t, logs.has(t, func(line map[string]any) bool {
		return line["level"] == "DEBUG" && line["msg"] == fmt.Sprintf("Updating state: shouldWait=false, lastResponse=<%d bytes>", len(card))
	}))
	for _, secret := range []string{"4111 1111", "@example.com"} {
		require.NotContains(t, logs.text(), secret)
	}
}

// A tenant's failing runs log at WARN, not ERROR: a step that failed, a
// tool that failed, a wait that timed out. ERROR is Baton's.
func TestTenantFailuresLogAtWarn(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	tool := newToolServer(t, func(int, map[string]any) (int, any) { return 400, map[string]any{"error": "no"} })
	b := setup(t, setupOpts{logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		specs: map[string]engine.ToolSpec{"echo": {Type: engine.ToolTypeHTTP, URL: tool.URL}}})
	for _, def := range leakWorkflows {
		b.define(t, def)
	}
	ended := map[string]engine.ExecutionStatus{}
	for _, p := range []engine.StartParams{
		{WorkflowID: "var-delay", Input: map[string]any{"wait": "soon"}},
		{WorkflowID: "echo-tool", Input: map[string]any{"email": "x"}},
		{WorkflowID: "short-wait"},
	} {
		x := b.start(t, p)
		ended[x.ExecutionID] = b.waitFor(t, x.ExecutionID, terminal).Status
	}
	for id, status := range ended {
		result := map[engine.ExecutionStatus]string{engine.StatusFailed: "failure", engine.StatusTimeout: "timeout"}[status]
		require.NotEmpty(t, result, "%s ended %s", id, status)
		require.True(t, logs.has(t, func(line map[string]any) bool {
			return line["msg"] == fmt.Sprintf("Execution %s completed with result: %s", id, result) && line["level"] == "WARN"
		}), "%s's end is a warning", id)
	}
	require.False(t, logs.has(t, func(line map[string]any) bool { return line["level"] == "ERROR" }), "an ERROR line:\n%s", logs.text())
}

// answerLen is the length of the tool server's answer {"error": msg}.
func answerLen(msg string) int {
	raw, _ := json.Marshal(map[string]any{"error": msg})
	return len(raw) + 1 // json.Encoder ends it with a newline
}

// has reports whether some line satisfies match.
func (l *logBuffer) has(t *testing.T, match func(map[string]any) bool) bool {
	t.Helper()
	for _, line := range l.lines(t) {
		if match(line) {
			return true
		}
	}
	return false
}

// text is everything logged so far.
func (l *logBuffer) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Clone(l.buf.String())
}
