package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waitFlow is start → w (the given wait node) → end.
func waitFlow(id, waitNode string) string {
	return fmt.Sprintf(`{"workflow_id": %q, "version": "1.0.0", "nodes": [
	  {"id": "start", "type": "start", "next": "w"}, %s,
	  {"id": "end", "type": "end", "result": {"summary": "ok"}}]}`, id, waitNode)
}

func (b *testBundle) startWaiting(t *testing.T, workflowID, executionID string) map[string]any {
	t.Helper()
	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute", body: map[string]any{
		"metadata": map[string]any{"timeout_ms": 10000},
		"payload": map[string]any{"workflow_id": workflowID, "execution_id": executionID, "thread_id": "th-" + executionID,
			"execution_options": map[string]any{"wait_for_completion": true}}}})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	require.Equal(t, "waiting", r.data()["status"], "%s", r.raw)
	return r.data()
}

func (b *testBundle) publish(t *testing.T, payload map[string]any) *response {
	t.Helper()
	return b.do(t, call{method: http.MethodPost, path: "/api/v1/events", body: envelope(payload)})
}

func TestEveryWaitTypeResumesThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, waitFlow("resp", `{"id": "w", "type": "action", "actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "end"}`))
	b.define(t, waitFlow("docs", `{"id": "w", "type": "action", "actionType": "request_document", "parameters": {"documents": ["INE", "CURP"]}, "next": "end"}`))
	b.define(t, waitFlow("sign", `{"id": "w", "type": "action", "actionType": "request_signature", "parameters": {"document_url": "https://x/contrato.pdf"}, "next": "end"}`))
	b.define(t, waitFlow("test", `{"id": "w", "type": "action", "actionType": "assign_test", "parameters": {"test_id": "T-42"}, "next": "end"}`))
	b.define(t, waitFlow("event", `{"id": "w", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "cal-7"}, "next": "end"}`))

	x := b.startWaiting(t, "resp", "x-resp")
	waitingView := x["waiting"].(map[string]any)
	require.Equal(t, "response", waitingView["waiting_for"])
	wd := waitingView["waiting_data"].(map[string]any)
	require.Equal(t, "th-x-resp", wd["threadId"])
	require.Equal(t, "1h", wd["timeout"])
	r := b.publish(t, map[string]any{"event_type": "MESSAGE_RECEIVED", "event_id": "e-resp", "execution_id": "x-resp", "data": map[string]any{"text": "Hola"}})
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	require.Equal(t, []any{"x-resp"}, r.data()["resumed"])
	done := b.waitTerminal(t, "x-resp")
	require.Equal(t, "completed", done["status"])
	require.Equal(t, "Hola", done["variables"].(map[string]any)["lastResponse"])
	require.Equal(t, false, done["variables"].(map[string]any)["timedOut"])

	// A repeated event_id replays the first answer and resumes nothing.
	r = b.publish(t, map[string]any{"event_type": "MESSAGE_RECEIVED", "event_id": "e-resp", "execution_id": "x-resp", "data": map[string]any{"text": "otra vez"}})
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	require.Equal(t, []any{"x-resp"}, r.data()["resumed"])
	// A new event for a terminal execution is refused.
	r = b.publish(t, map[string]any{"event_type": "MESSAGE_RECEIVED", "event_id": "e-resp-2", "execution_id": "x-resp", "data": map[string]any{"text": "tarde"}})
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "event.publish.not_waiting", r.errorCode())

	// Documents: resumes once every requested document is in.
	b.startWaiting(t, "docs", "x-docs")
	r = b.publish(t, map[string]any{"event_type": "SIGNATURE_COMPLETED", "event_id": "e-wrong", "execution_id": "x-docs", "data": map[string]any{}})
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "event.publish.not_waiting", r.errorCode())
	r = b.publish(t, map[string]any{"event_type": "DOCUMENT_UPLOADED", "event_id": "e-d1", "execution_id": "x-docs", "data": map[string]any{"document_type": "INE", "url": "https://x/ine.pdf"}})
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	require.Empty(t, r.data()["resumed"])
	require.Equal(t, []any{"x-docs"}, r.data()["recorded"])
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/executions/x-docs"})
	require.Equal(t, "waiting", r.data()["status"])
	received := r.data()["waiting"].(map[string]any)["waiting_data"].(map[string]any)["received"]
	require.Equal(t, map[string]any{"INE": "https://x/ine.pdf"}, received)
	r = b.publish(t, map[string]any{"event_type": "DOCUMENT_UPLOADED", "event_id": "e-d2", "execution_id": "x-docs", "data": map[string]any{"document_type": "CURP", "url": "https://x/curp.pdf"}})
	require.Equal(t, []any{"x-docs"}, r.data()["resumed"])
	done = b.waitTerminal(t, "x-docs")
	require.Equal(t, []any{"https://x/ine.pdf", "https://x/curp.pdf"}, done["variables"].(map[string]any)["documentUrls"])

	// Signature (the thread got the default notification first).
	b.startWaiting(t, "sign", "x-sign")
	r = b.publish(t, map[string]any{"event_type": "SIGNATURE_COMPLETED", "event_id": "e-s", "execution_id": "x-sign",
		"data": map[string]any{"signed_document_url": "https://x/firmado.pdf", "signed_at": "2024-01-15T10:00:00Z"}})
	require.Equal(t, []any{"x-sign"}, r.data()["resumed"])
	vars := b.waitTerminal(t, "x-sign")["variables"].(map[string]any)
	require.Equal(t, "https://x/firmado.pdf", vars["signedDocumentUrl"])
	require.Equal(t, "2024-01-15T10:00:00Z", vars["signedAt"])

	// Test, addressed by thread only.
	b.startWaiting(t, "test", "x-test")
	r = b.publish(t, map[string]any{"event_type": "TEST_COMPLETED", "event_id": "e-t", "thread_id": "th-x-test", "data": map[string]any{"score": 87, "result": "aprobado"}})
	require.Equal(t, []any{"x-test"}, r.data()["resumed"])
	vars = b.waitTerminal(t, "x-test")["variables"].(map[string]any)
	require.Equal(t, float64(87), vars["testScore"])
	require.Equal(t, "aprobado", vars["testResult"])

	// Calendar event: matched by data.event_id.
	b.startWaiting(t, "event", "x-event")
	r = b.publish(t, map[string]any{"event_type": "EVENT_COMPLETED", "event_id": "e-e0", "execution_id": "x-event", "data": map[string]any{"event_id": "cal-other"}})
	require.Equal(t, http.StatusConflict, r.status)
	r = b.publish(t, map[string]any{"event_type": "EVENT_COMPLETED", "event_id": "e-e1", "data": map[string]any{"event_id": "cal-7", "room": "A"}})
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	require.Equal(t, []any{"x-event"}, r.data()["resumed"])
	vars = b.waitTerminal(t, "x-event")["variables"].(map[string]any)
	require.Equal(t, map[string]any{"event_id": "cal-7", "room": "A"}, vars["eventData"])

	require.Eventually(t, func() bool { return len(b.channel.Messages()) == 2 }, 10*time.Second, 20*time.Millisecond)
	got := map[string]string{}
	for _, m := range b.channel.Messages() {
		got[m.ThreadID] = m.Body
	}
	require.Equal(t, "Por favor firma el documento: https://x/contrato.pdf", got["th-x-sign"])
	require.Equal(t, "Te asignamos la evaluación T-42. Complétala cuando puedas.", got["th-x-test"])

	r = b.publish(t, map[string]any{"event_type": "MESSAGE_RECEIVED", "event_id": "e-404", "execution_id": "nope", "data": map[string]any{"text": "x"}})
	require.Equal(t, http.StatusNotFound, r.status)
}

func TestInputResumesARequestInput(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, waitFlow("ask", `{"id": "w", "type": "action", "actionType": "request_input",
	  "parameters": {"prompt": "¿Color?", "input_type": "choice", "options": ["rojo", "azul"], "timeout": "1h"}, "next": "end"}`))
	b.define(t, waitFlow("ask-default", `{"id": "w", "type": "action", "actionType": "request_input",
	  "parameters": {"prompt": "¿Color?", "timeout": "1s", "onTimeout": "continue", "default": {"color": "verde"}}, "next": "end"}`))
	x := b.startWaiting(t, "ask", "x-ask")
	wd := x["waiting"].(map[string]any)["waiting_data"].(map[string]any)
	require.Equal(t, "¿Color?", wd["prompt"])
	require.Equal(t, []any{"rojo", "azul"}, wd["options"])

	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/executions/x-ask/input", body: envelope(map[string]any{"input_data": map[string]any{"color": "azul"}, "node_id": "other"})})
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "workflow.input.not_waiting", r.errorCode())
	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/executions/x-ask/input", body: envelope(map[string]any{"input_data": map[string]any{"color": "azul"}, "node_id": "w"})})
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	done := b.waitTerminal(t, "x-ask")
	require.Equal(t, "azul", done["variables"].(map[string]any)["color"])
	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/executions/x-ask/input", body: envelope(map[string]any{"input_data": map[string]any{"color": "rojo"}})})
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "workflow.input.not_waiting", r.errorCode())

	// On timeout with continue, the defaults become the input.
	b.startWaiting(t, "ask-default", "x-def")
	done = b.waitTerminal(t, "x-def")
	require.Equal(t, "completed", done["status"])
	require.Equal(t, "verde", done["variables"].(map[string]any)["color"])
	require.Equal(t, true, done["variables"].(map[string]any)["timedOut"])
}

func TestMonitorExecutions(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, waitFlow("mon", `{"id": "w", "type": "action", "actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "end"}`))
	b.startWaiting(t, "mon", "x-mon-1")
	b.startWaiting(t, "mon", "x-mon-2")
	monitor := mint(t, b.tenant, "monitor:read")

	r := b.do(t, call{method: http.MethodGet, path: "/api/v1/monitor/executions/summary"})
	require.Equal(t, http.StatusForbidden, r.status)
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/monitor/executions/summary", token: &monitor})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	items := r.data()["items"].([]any)
	require.Len(t, items, 1)
	require.Equal(t, "waiting", items[0].(map[string]any)["status"])
	require.Equal(t, float64(2), items[0].(map[string]any)["count"])

	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/monitor/executions/waiting?limit=1", token: &monitor})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	first := r.data()["items"].([]any)[0].(map[string]any)
	require.Equal(t, "x-mon-1", first["execution_id"])
	require.Equal(t, "mon", first["agent_id"])
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/monitor/executions/waiting?limit=1&cursor=" + r.data()["next_cursor"].(string), token: &monitor})
	require.Equal(t, "x-mon-2", r.data()["items"].([]any)[0].(map[string]any)["execution_id"])
	require.Nil(t, r.data()["next_cursor"])

	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/monitor/executions/stuck", token: &monitor})
	require.Equal(t, http.StatusOK, r.status)
	require.Empty(t, r.data()["items"])
	// Backdate one wait: past its deadline and untouched for two hours.
	_, err := b.pool.Exec(t.Context(), `UPDATE agent_execution SET waiting_until = now() - interval '3 hours', updated_at = now() - interval '2 hours' WHERE execution_id = 'x-mon-2'`)
	require.NoError(t, err)
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/monitor/executions/stuck", token: &monitor})
	items = r.data()["items"].([]any)
	require.Len(t, items, 1)
	require.Equal(t, "x-mon-2", items[0].(map[string]any)["execution_id"])
	require.InDelta(t, 2.0, items[0].(map[string]any)["waiting_hours"], 0.1)

	// Another tenant sees none of it.
	other := "tenant-other-mon"
	otherTok := mint(t, other, "monitor:read")
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/monitor/executions/waiting", tenant: &other, token: &otherTok})
	require.Empty(t, r.data()["items"])
}

// Waits with no timeout get the default for their type (response
// 24h, document/signature/test/event 7d), and a delay through the API
// waits for its duration and continues through SCHEDULE_REACHED.
func TestDefaultTimeoutsAndDelayThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	defaults := map[string]struct {
		node string
		want time.Duration
	}{
		"d-resp":  {`{"id": "w", "type": "action", "actionType": "wait_for_response", "next": "end"}`, 24 * time.Hour},
		"d-docs":  {`{"id": "w", "type": "action", "actionType": "request_document", "parameters": {"documents": ["INE"]}, "next": "end"}`, 7 * 24 * time.Hour},
		"d-sign":  {`{"id": "w", "type": "action", "actionType": "request_signature", "parameters": {"document_url": "https://x/c.pdf"}, "next": "end"}`, 7 * 24 * time.Hour},
		"d-test":  {`{"id": "w", "type": "action", "actionType": "assign_test", "parameters": {"test_id": "T-1"}, "next": "end"}`, 7 * 24 * time.Hour},
		"d-event": {`{"id": "w", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "e"}, "next": "end"}`, 7 * 24 * time.Hour},
	}
	for id, c := range defaults {
		b.define(t, waitFlow(id, c.node))
		before := time.Now()
		x := b.startWaiting(t, id, "x-"+id)
		until, err := time.Parse(time.RFC3339Nano, x["waiting"].(map[string]any)["waiting_until"].(string))
		require.NoError(t, err)
		require.WithinDuration(t, before.Add(c.want), until, time.Minute, id)
	}

	b.define(t, waitFlow("nap", `{"id": "w", "type": "action", "actionType": "delay", "parameters": {"duration": "1s"}, "next": "end"}`))
	began := time.Now()
	x := b.startWaiting(t, "nap", "x-nap")
	require.Equal(t, "delay", x["waiting"].(map[string]any)["waiting_for"])
	done := b.waitTerminal(t, "x-nap")
	require.Equal(t, "completed", done["status"])
	require.GreaterOrEqual(t, time.Since(began), time.Second, "a delay never ends early")
	r := b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/executions/x-nap/logs"})
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, string(r.raw), "SCHEDULE_REACHED")
}

// POST /threads/{id}/messages resumes a run waiting for a response on the
// thread, starts a run of the thread's default workflow when nothing waits,
// and replays its answer for a repeated message_id.
func TestThreadInboundThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, waitFlow("asker", `{"id": "w", "type": "action", "actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "end"}`))
	b.define(t, `{"workflow_id": "echo", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "reply"},
	  {"id": "reply", "type": "action", "actionType": "send_message", "parameters": {"message": "re: {{lastResponse}}"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/threads", body: envelope(map[string]any{
		"thread_id": "th-x-ask", "channel": "whatsapp", "contact": "+5215550002", "default_workflow_id": "echo"})})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)
	b.startWaiting(t, "asker", "x-ask")

	inbound := func(text, id string) *response {
		r := b.do(t, call{method: http.MethodPost, path: "/api/v1/threads/th-x-ask/messages", body: envelope(map[string]any{"text": text, "message_id": id})})
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
		return r
	}
	r = inbound("Soy María", "wa-1")
	require.Equal(t, "resumed", r.data()["outcome"])
	require.Equal(t, "x-ask", r.data()["execution_id"])
	require.Equal(t, "Soy María", b.waitTerminal(t, "x-ask")["variables"].(map[string]any)["lastResponse"])
	require.Equal(t, r.data(), inbound("Soy María", "wa-1").data(), "a repeated message_id replays the answer")

	r = inbound("¿sigues ahí?", "wa-2")
	require.Equal(t, "started", r.data()["outcome"])
	started := r.data()["execution_id"].(string)
	require.Equal(t, "completed", b.waitTerminal(t, started)["status"])

	// A thread-addressed MESSAGE_RECEIVED goes through the same router.
	r = b.publish(t, map[string]any{"event_type": "MESSAGE_RECEIVED", "event_id": "wa-3", "thread_id": "th-x-ask", "data": map[string]any{"text": "hola"}})
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	require.Equal(t, "started", r.data()["inbound"].(map[string]any)["outcome"])

	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/threads/th-x-ask/messages?direction=in"})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	require.Len(t, r.data()["items"], 3)
}

// POST …/restart starts a fresh execution with the same workflow, input and
// thread, linked by restarted_from; a live one is cancelled first.
func TestRestartExecution(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, waitFlow("again", `{"id": "w", "type": "action", "actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "end"}`))
	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute", body: envelope(map[string]any{
		"workflow_id": "again", "execution_id": "x-first", "thread_id": "th-restart", "input": map[string]any{"name": "Ana"}})})
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)

	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/executions/x-first/restart", body: envelope(map[string]any{"reason": "stuck"})})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)
	fresh := r.data()
	require.Equal(t, "x-first", fresh["restarted_from"])
	require.NotEqual(t, "x-first", fresh["execution_id"])
	require.Equal(t, "th-restart", fresh["thread_id"])
	require.Equal(t, "waiting", fresh["status"])
	require.Equal(t, "Ana", fresh["variables"].(map[string]any)["name"])

	old := b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/executions/x-first"}).data()
	require.Equal(t, "cancelled", old["status"])
	require.Equal(t, "stuck", old["cancel_reason"])

	// A terminal execution is restarted as it is: nothing is cancelled.
	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/executions/x-first/restart", body: envelope(map[string]any{})})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)
	require.Equal(t, "waiting", b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/executions/" + fresh["execution_id"].(string)}).data()["status"])

	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/executions/x-none/restart", body: envelope(map[string]any{})})
	require.Equal(t, http.StatusNotFound, r.status)
}
