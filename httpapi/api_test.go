package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

const helloWorkflow = `{
  "workflow_id": "hello", "version": "1.0.0", "name": "Hello",
  "nodes": [
    {"id": "start", "type": "start", "next": "set"},
    {"id": "set", "type": "action", "actionType": "set_variables", "parameters": {"values": {"greeting": "Hola {{name}}"}}, "next": "decide"},
    {"id": "decide", "type": "decision", "condition": "${visits} > 1", "branches": {"true": "back", "false": "new"}},
    {"id": "back", "type": "action", "actionType": "send_message", "parameters": {"message": "{{greeting}}, de nuevo"}, "next": "end"},
    {"id": "new", "type": "action", "actionType": "send_message", "parameters": {"message": "{{greeting}}, bienvenido"}, "next": "end"},
    {"id": "end", "type": "end", "result": {"summary": "Saludo a {{name}}"}}
  ]}`

func TestDefineExecuteAndInspect(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, helloWorkflow)

	// Storing the same version again is harmless; other content is a conflict.
	b.define(t, helloWorkflow)
	changed := strings.Replace(helloWorkflow, "bienvenido", "welcome", 1)
	var payload map[string]any
	require.NoError(t, json.Unmarshal([]byte(changed), &payload))
	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/definitions", body: envelope(payload)})
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "workflow.define.version_conflict", r.errorCode())

	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/definitions"})
	require.Equal(t, http.StatusOK, r.status)
	items := r.data()["items"].([]any)
	require.Len(t, items, 1)
	require.Equal(t, "hello", items[0].(map[string]any)["workflow_id"])

	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/definitions/hello?version=1.0.0"})
	require.Equal(t, http.StatusOK, r.status)
	require.Len(t, r.data()["nodes"], 6)
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/definitions/nope"})
	require.Equal(t, http.StatusNotFound, r.status)
	require.Equal(t, "workflow.get.not_found", r.errorCode())

	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute",
		headers: map[string]string{"X-Correlation-ID": "corr-abc-123", "X-Request-ID": "req-xyz-789", "X-Domain-Action": "workflow.execute"},
		body: map[string]any{
			"message_id": "m-1", "priority": 7,
			"metadata": map[string]any{"conversation_id": "whatsapp:+521555"},
			"payload": map[string]any{"workflow_id": "hello", "execution_id": "exec-12345",
				"input":             map[string]any{"name": "Ana", "visits": 3},
				"execution_options": map[string]any{"wait_for_completion": true}},
		}})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	require.Equal(t, "corr-abc-123", r.header.Get("X-Correlation-ID"))
	require.Equal(t, "req-xyz-789", r.header.Get("X-Request-ID"))
	require.Equal(t, "corr-abc-123", r.body["correlation_id"])
	require.Equal(t, "req-xyz-789", r.body["request_id"])
	require.Equal(t, map[string]any{"domain": "workflow", "action": "execute"}, r.body["type"])
	x := r.data()
	require.Equal(t, "exec-12345", x["execution_id"])
	require.Equal(t, "completed", x["status"])
	require.Equal(t, "whatsapp:+521555", x["thread_id"])
	require.Equal(t, []any{"start", "set", "decide", "back", "end"}, x["node_path"])
	require.Equal(t, map[string]any{"completed_steps": float64(5), "total_steps": float64(5), "percentage": float64(100)}, x["progress"])
	result := x["result"].(map[string]any)
	require.Equal(t, "success", result["result_type"])
	require.Equal(t, "Saludo a Ana", result["result_summary"])

	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/executions/exec-12345/logs"})
	require.Equal(t, http.StatusOK, r.status)
	var actions []string
	for _, it := range r.data()["items"].([]any) {
		actions = append(actions, it.(map[string]any)["action"].(string))
	}
	require.Equal(t, "workflow.started", actions[0])
	// The execution's own story ends with workflow.completed; the delivery
	// of its message may be recorded after it.
	var own []string
	for _, a := range actions {
		if a != "thread.message_delivered" {
			own = append(own, a)
		}
	}
	require.Equal(t, "workflow.completed", own[len(own)-1])
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/executions/exec-12345/logs?limit=2"})
	require.Len(t, r.data()["items"], 2)
	cursor := r.data()["next_cursor"].(string)
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/executions/exec-12345/logs?limit=2&cursor=" + cursor})
	require.Equal(t, "workflow.step_update", r.data()["items"].([]any)[0].(map[string]any)["action"])

	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/executions?status=completed&workflow_id=hello&thread_id=whatsapp:%2B521555"})
	require.Equal(t, http.StatusOK, r.status)
	require.Len(t, r.data()["items"], 1)
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/executions?status=bogus"})
	require.Equal(t, http.StatusBadRequest, r.status)

	// A completed execution cannot be cancelled.
	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/executions/exec-12345/cancel", body: envelope(map[string]any{"reason": "late"})})
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "workflow.cancel.invalid_state", r.errorCode())

	// A client-given execution_id cannot be reused.
	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute",
		body: envelope(map[string]any{"workflow_id": "hello", "execution_id": "exec-12345"})})
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "workflow.execute.duplicate_execution_id", r.errorCode())

	require.Eventually(t, func() bool { return len(b.channel.Messages()) == 1 }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, "Hola Ana, de nuevo", b.channel.Messages()[0].Body)
}

func TestExecuteIsIdempotentByMessageID(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, helloWorkflow)
	body := map[string]any{"message_id": "dup-1", "payload": map[string]any{"workflow_id": "hello", "input": map[string]any{"name": "Ana", "visits": 1}}}

	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		ids = map[string]int{}
	)
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute", body: body})
			require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
			mu.Lock()
			ids[r.data()["execution_id"].(string)]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.Len(t, ids, 1, "one message_id made more than one execution: %v", ids)
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM agent_execution WHERE tenant_id = $1`, b.tenant).Scan(&n))
	require.Equal(t, 1, n)
	for id := range ids {
		require.Equal(t, "completed", b.waitTerminal(t, id)["status"])
	}
	require.Eventually(t, func() bool { return len(b.channel.Messages()) == 1 }, 10*time.Second, 20*time.Millisecond)

	// The same message_id on another endpoint is another request.
	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/executions/nope/cancel", body: map[string]any{"message_id": "dup-1", "payload": map[string]any{}}})
	require.Equal(t, http.StatusNotFound, r.status)
}

func TestAuthenticationAndTenantIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, helloWorkflow)
	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute",
		body: envelope(map[string]any{"workflow_id": "hello", "execution_id": "secret-run", "input": map[string]any{"name": "Ana"}})})
	require.Equal(t, http.StatusAccepted, r.status)
	path := "/api/v1/workflow/executions/secret-run"

	// Tenant B, with its own valid token, cannot see tenant A's execution.
	r = b.do(t, call{method: http.MethodGet, path: path, tenant: ptr("tenant-b"), token: ptr(mint(t, "tenant-b"))})
	require.Equal(t, http.StatusNotFound, r.status)
	require.Equal(t, "workflow.status.not_found", r.errorCode())
	r = b.do(t, call{method: http.MethodPost, path: path + "/cancel", tenant: ptr("tenant-b"), token: ptr(mint(t, "tenant-b")), body: envelope(map[string]any{})})
	require.Equal(t, http.StatusNotFound, r.status)
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/definitions/hello", tenant: ptr("tenant-b"), token: ptr(mint(t, "tenant-b"))})
	require.Equal(t, http.StatusNotFound, r.status)

	// No token: 401.
	r = b.do(t, call{method: http.MethodGet, path: path, token: ptr("")})
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Equal(t, "workflow.access.unauthorized", r.errorCode())
	// A forged or expired token: 401.
	r = b.do(t, call{method: http.MethodGet, path: path, token: ptr(b.token + "x")})
	require.Equal(t, http.StatusUnauthorized, r.status)
	// A token for A with X-Tenant-ID B: 403.
	r = b.do(t, call{method: http.MethodGet, path: path, tenant: ptr("tenant-b")})
	require.Equal(t, http.StatusForbidden, r.status)
	require.Equal(t, "workflow.access.forbidden", r.errorCode())
	// A read-only token cannot execute.
	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute", token: ptr(mint(t, b.tenant, "workflows:read")),
		body: envelope(map[string]any{"workflow_id": "hello"})})
	require.Equal(t, http.StatusForbidden, r.status)
	r = b.do(t, call{method: http.MethodGet, path: path, token: ptr(mint(t, b.tenant, "workflows:read"))})
	require.Equal(t, http.StatusOK, r.status)
}

func TestBadRequestsChangeNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, helloWorkflow)

	big := `{"payload":{"workflow_id":"hello","input":{"blob":"` + strings.Repeat("x", 1<<20) + `"}}}`
	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute", raw: []byte(big)})
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status)
	require.Equal(t, "request.body.too_large", r.errorCode())

	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute", raw: []byte(`{"payload":`)})
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, "workflow.execute.invalid_request", r.errorCode())

	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute", body: map[string]any{"message_id": "x"}})
	require.Equal(t, http.StatusBadRequest, r.status)

	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute", body: envelope(map[string]any{"workflow_id": "hello", "surprise": 1})})
	require.Equal(t, http.StatusBadRequest, r.status)

	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute", body: envelope(map[string]any{"workflow_id": "missing"})})
	require.Equal(t, http.StatusNotFound, r.status)
	require.Equal(t, "workflow.execute.not_found", r.errorCode())

	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute", headers: map[string]string{"X-Domain-Action": "workflow.cancel"},
		body: envelope(map[string]any{"workflow_id": "hello"})})
	require.Equal(t, http.StatusBadRequest, r.status)

	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute",
		body: envelope(map[string]any{"workflow_id": "hello", "execution_options": map[string]any{"callback_url": "ftp://example"}})})
	require.Equal(t, http.StatusBadRequest, r.status)

	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/executions?limit=501"})
	require.Equal(t, http.StatusBadRequest, r.status)

	// Text Postgres cannot store is a client error, not a 500.
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/executions/bad%00id"})
	require.Equal(t, http.StatusBadRequest, r.status)
	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute", body: envelope(map[string]any{"workflow_id": "hello", "execution_id": "x\u0000y"})})
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.raw)

	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM agent_execution`).Scan(&n))
	require.Equal(t, 0, n)
}

func TestCancelWhileToolRuns(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	b := setup(t, setupOpts{tools: map[string]engine.ToolFunc{
		"slow": func(ctx context.Context, _ engine.ToolCall) (map[string]any, error) {
			entered <- struct{}{}
			<-release
			return map[string]any{"ok": true}, nil
		},
	}})
	b.define(t, `{"workflow_id": "slow", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "work"},
	  {"id": "work", "type": "task", "task": "slow", "next": "say"},
	  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "done"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute", body: envelope(map[string]any{"workflow_id": "slow", "execution_id": "slow-1"})})
	require.Equal(t, http.StatusAccepted, r.status)
	<-entered
	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/executions/slow-1/cancel", body: envelope(map[string]any{"reason": "changed my mind"})})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	require.Equal(t, "cancelled", r.data()["status"])
	require.Equal(t, "changed my mind", r.data()["cancel_reason"])
	require.Equal(t, "cancelled", r.data()["result"].(map[string]any)["result_type"])
	close(release)

	time.Sleep(300 * time.Millisecond) // the step finishes its tool call and must find the execution cancelled
	x := b.waitTerminal(t, "slow-1")
	require.Equal(t, "cancelled", x["status"])
	var completedEvents, messages int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM execution_event e JOIN agent_execution x ON x.id = e.execution_id WHERE x.execution_id = 'slow-1' AND e.action = 'workflow.completed'`).Scan(&completedEvents))
	require.Equal(t, 1, completedEvents)
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM thread_message`).Scan(&messages))
	require.Equal(t, 0, messages)
}

func TestHealthReadinessAndOpenAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	r := b.do(t, call{method: http.MethodGet, path: "/healthz", token: ptr(""), tenant: ptr("")})
	require.Equal(t, http.StatusOK, r.status)
	r = b.do(t, call{method: http.MethodGet, path: "/readyz", token: ptr(""), tenant: ptr("")})
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "ready", r.body["status"])
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/openapi.yaml", token: ptr(""), tenant: ptr("")})
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, string(r.raw), "openapi: 3")
}
