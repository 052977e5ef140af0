package openapitest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/openapitest"
)

// documentPath is the document httpapi embeds and serves. It is read from
// disk so these tests do not depend on package httpapi compiling.
const documentPath = "../../httpapi/openapi.yaml"

func readDocument(t testing.TB) []byte {
	t.Helper()
	doc, err := os.ReadFile(documentPath)
	require.NoError(t, err)
	return doc
}

func setup(t *testing.T) *openapitest.Validator {
	t.Helper()
	return openapitest.New(t, readDocument(t))
}

// apiHeaders are the headers every /api/v1 answer carries.
func apiHeaders() http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Correlation-ID", "corr-1")
	h.Set("X-Request-ID", "req-1")
	return h
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func success(domain, action string, data any) map[string]any {
	return map[string]any{
		"request_id": "req-1", "correlation_id": "corr-1",
		"type":           map[string]any{"domain": domain, "action": action},
		"schema_version": "1.0", "status": "success", "data": data,
	}
}

func errorEnvelope(domain, code string, status int) map[string]any {
	return map[string]any{
		"type": map[string]any{"domain": domain, "action": "error"},
		"error": map[string]any{
			"code": code, "http_status": status, "message": "something is wrong",
			"details": map[string]any{}, "retryable": false, "retry_after_ms": nil,
		},
		"correlation_id": "corr-1", "request_id": "req-1",
	}
}

func execution() map[string]any {
	return map[string]any{
		"execution_id": "exec-1", "tenant_id": "acme", "workflow_id": "collector", "version": "1.0.0",
		"status": "waiting", "lane": "main", "thread_id": "thread-1", "parent_execution_id": nil,
		"restarted_from": nil, "correlation_id": "corr-1",
		"current_step": map[string]any{"step_id": "wait", "started_at": "2025-06-03T17:11:00Z"},
		"progress":     map[string]any{"completed_steps": 2, "total_steps": 5, "percentage": 40},
		"node_path":    []string{"start", "ask", "wait"},
		"waiting": map[string]any{
			"waiting_for": "document", "waiting_until": "2025-06-10T17:11:00Z",
			"waiting_data": map[string]any{"documents": []string{"INE"}},
		},
		"variables": map[string]any{"documents": []string{"INE"}},
		"result":    nil, "error": nil, "cancelled_by": nil, "cancel_reason": nil,
		"created_at": "2025-06-03T17:10:00Z", "started_at": "2025-06-03T17:10:00.123456Z",
		"updated_at": "2025-06-03T17:11:00Z", "completed_at": nil,
	}
}

func failedExecution() map[string]any {
	x := execution()
	x["status"] = "failed"
	x["current_step"] = nil
	x["waiting"] = nil
	x["completed_at"] = "2025-06-03T17:12:00Z"
	x["result"] = map[string]any{"result_type": "failure", "result_summary": nil, "variables": map[string]any{}, "output": nil}
	x["error"] = map[string]any{"code": "workflow.execute.step_failed", "message": "tool failed", "failed_node_id": "wait"}
	return x
}

func definition() map[string]any {
	return map[string]any{
		"workflow_id": "collector", "version": "1.0.0", "name": "Recolector", "description": "",
		"lane": nil, "default_timeout_ms": nil, "created_at": "2025-06-03T17:10:00Z",
		"nodes": []any{
			map[string]any{"id": "start", "type": "start", "next": "ask"},
			map[string]any{"id": "ask", "type": "action", "actionType": "send_message", "parameters": map[string]any{"message": "hola"}, "next": "end"},
			map[string]any{"id": "end", "type": "end", "result": map[string]any{"summary": "ok"}},
		},
	}
}

// without returns a copy of m without key.
func without(m map[string]any, key string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// with returns a copy of m with key set to v.
func with(m map[string]any, key string, v any) map[string]any {
	out := without(m, key)
	out[key] = v
	return out
}

func TestDocument(t *testing.T) {
	t.Parallel()

	v := setup(t)
	require.Equal(t, "3.0.3", v.Doc.OpenAPI)
	require.Len(t, v.Doc.Servers, 1)
	require.Equal(t, "/", v.Doc.Servers[0].URL)

	// Every endpoint of docs/api.md's tables, by method and full path.
	want := []string{
		"POST /api/v1/workflow/definitions",
		"POST /api/v1/workflow/validate",
		"GET /api/v1/workflow/definitions",
		"GET /api/v1/workflow/definitions/{workflow_id}",
		"POST /api/v1/workflow/execute",
		"GET /api/v1/workflow/executions/{execution_id}",
		"GET /api/v1/workflow/executions",
		"GET /api/v1/workflow/executions/{execution_id}/logs",
		"POST /api/v1/workflow/executions/{execution_id}/cancel",
		"POST /api/v1/workflow/executions/{execution_id}/restart",
		"POST /api/v1/workflow/executions/{execution_id}/input",
		"POST /api/v1/events",
		"POST /api/v1/threads",
		"GET /api/v1/threads/{thread_id}",
		"GET /api/v1/threads/{thread_id}/messages",
		"POST /api/v1/threads/{thread_id}/messages",
		"PUT /api/v1/threads/{thread_id}/queue",
		"DELETE /api/v1/threads/{thread_id}/queue",
		"GET /api/v1/monitor/executions/summary",
		"GET /api/v1/monitor/executions/waiting",
		"GET /api/v1/monitor/executions/stuck",
		"GET /api/v1/monitor/locks",
		"GET /api/v1/monitor/locks/stale",
		"POST /api/v1/monitor/locks/cleanup",
		"GET /api/v1/monitor/lanes",
		"GET /api/v1/ws",
		"GET /api/v1/openapi.yaml",
		"GET /healthz",
		"GET /readyz",
		"GET /metrics",
	}
	var got []string
	for path, item := range v.Doc.Paths.Map() {
		for method, op := range item.Operations() {
			got = append(got, method+" "+path)

			public := !strings.HasPrefix(path, "/api/v1/") || path == "/api/v1/openapi.yaml"
			if path == "/metrics" {
				// Open, or behind BATON_METRICS_TOKEN when the server has one.
				require.NotNil(t, op.Security, "GET /metrics must declare its security")
				require.Equal(t, openapi3.SecurityRequirements{{}, {"metricsToken": []string{}}}, *op.Security)
				require.NotNil(t, op.Responses.Status(401), "GET /metrics documents no 401")
				continue
			}
			if public {
				require.NotNil(t, op.Security, "%s %s must declare security: []", method, path)
				require.Empty(t, *op.Security, "%s %s must need no token", method, path)
				continue
			}
			for _, status := range []int{400, 401, 403, 500} {
				require.NotNil(t, op.Responses.Status(status), "%s %s documents no %d", method, path, status)
			}
			if method == http.MethodPost || method == http.MethodPut {
				require.NotNil(t, op.Responses.Status(413), "%s %s documents no 413", method, path)
				require.NotNil(t, op.RequestBody, "%s %s has no request body", method, path)
				require.True(t, op.RequestBody.Value.Required, "%s %s: the envelope is required", method, path)
			}
			if path != "/api/v1/ws" {
				require.Contains(t, op.Extensions, "x-domain-action", "%s %s", method, path)
			}
			tenant := item.Parameters.GetByInAndName("header", "X-Tenant-ID")
			if tenant == nil {
				tenant = op.Parameters.GetByInAndName("header", "X-Tenant-ID")
			}
			require.NotNil(t, tenant, "%s %s does not take X-Tenant-ID", method, path)
			require.Equal(t, path != "/api/v1/ws", tenant.Required, "%s %s: X-Tenant-ID required", method, path)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	require.Equal(t, want, got)
}

func TestNewFailsOnAnInvalidDocument(t *testing.T) {
	t.Parallel()

	// A $ref to a schema that does not exist must not load.
	doc := []byte(`openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /x:
    get:
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {$ref: '#/components/schemas/Missing'}
`)
	ft := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		openapitest.New(ft, doc)
	}()
	require.True(t, ft.failed, "New must fail the test for an invalid document")
}

// fakeT records a failure instead of failing the real test; FailNow panics to
// stop the helper as testing.T's does (with runtime.Goexit).
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) FailNow()              { f.failed = true; panic("FailNow") }

func TestResponses(t *testing.T) {
	t.Parallel()

	v := setup(t)

	type testCase struct {
		name   string
		method string
		target string
		status int
		header http.Header
		body   []byte
		ok     bool
	}
	// plain are the headers of an answer outside the envelope: its
	// Content-Type and the echoed ids.
	plain := func(ct string) http.Header { h := apiHeaders(); h.Set("Content-Type", ct); return h }
	apiWithout := func(name string) http.Header { h := apiHeaders(); h.Del(name); return h }
	logs := func(level any) []byte {
		return mustJSON(t, success("workflow", "logs", map[string]any{
			"items": []any{map[string]any{
				"event_id": 7, "action": "workflow.step_update", "level": level, "message": "step done",
				"node_id": nil, "payload": map[string]any{"step_id": "ask"}, "created_at": "2025-06-03T17:10:00Z",
			}},
			"next_cursor": nil,
		}))
	}
	problems := func(problem map[string]any) []byte {
		e := errorEnvelope("workflow", "workflow.define.validation_error", 400)
		e["error"].(map[string]any)["details"] = map[string]any{"problems": []any{problem}}
		return mustJSON(t, e)
	}

	cases := []testCase{
		// Executions.
		{"status: waiting execution", "GET", "/api/v1/workflow/executions/exec-1", 200, apiHeaders(),
			mustJSON(t, success("workflow", "status", execution())), true},
		{"status: failed execution", "GET", "/api/v1/workflow/executions/exec-1", 200, apiHeaders(),
			mustJSON(t, success("workflow", "status", failedExecution())), true},
		{"status: full URL of a client request", "GET", "http://127.0.0.1:8080/api/v1/workflow/executions/exec-1", 200, apiHeaders(),
			mustJSON(t, success("workflow", "status", execution())), true},
		{"status: execution without status", "GET", "/api/v1/workflow/executions/exec-1", 200, apiHeaders(),
			mustJSON(t, success("workflow", "status", without(execution(), "status"))), false},
		{"status: the unknown in_progress status", "GET", "/api/v1/workflow/executions/exec-1", 200, apiHeaders(),
			mustJSON(t, success("workflow", "status", with(execution(), "status", "in_progress"))), false},
		{"status: execution without restarted_from", "GET", "/api/v1/workflow/executions/exec-1", 200, apiHeaders(),
			mustJSON(t, success("workflow", "status", without(execution(), "restarted_from"))), false},
		{"status: progress without percentage", "GET", "/api/v1/workflow/executions/exec-1", 200, apiHeaders(),
			mustJSON(t, success("workflow", "status", with(execution(), "progress", map[string]any{"completed_steps": 1, "total_steps": 2}))), false},
		{"status: unknown result_type", "GET", "/api/v1/workflow/executions/exec-1", 200, apiHeaders(),
			mustJSON(t, success("workflow", "status", with(failedExecution(), "result",
				map[string]any{"result_type": "partial", "result_summary": nil, "variables": map[string]any{}}))), false},
		{"status: not a date-time", "GET", "/api/v1/workflow/executions/exec-1", 200, apiHeaders(),
			mustJSON(t, success("workflow", "status", with(execution(), "created_at", "yesterday"))), false},
		{"status: envelope names another action", "GET", "/api/v1/workflow/executions/exec-1", 200, apiHeaders(),
			mustJSON(t, success("workflow", "get", execution())), false},
		{"status: envelope without request_id", "GET", "/api/v1/workflow/executions/exec-1", 200, apiHeaders(),
			mustJSON(t, without(success("workflow", "status", execution()), "request_id")), false},
		{"status: missing X-Request-ID header", "GET", "/api/v1/workflow/executions/exec-1", 200, apiWithout("X-Request-ID"),
			mustJSON(t, success("workflow", "status", execution())), false},
		{"status: text/plain body", "GET", "/api/v1/workflow/executions/exec-1", 200, with2(apiHeaders(), "Content-Type", "text/plain"),
			[]byte("hello"), false},
		{"status: undocumented status code", "GET", "/api/v1/workflow/executions/exec-1", 418, apiHeaders(),
			mustJSON(t, errorEnvelope("workflow", "workflow.status.teapot", 418)), false},
		{"status: 404 error envelope", "GET", "/api/v1/workflow/executions/nope", 404, apiHeaders(),
			mustJSON(t, errorEnvelope("workflow", "workflow.status.not_found", 404)), true},
		{"status: error envelope without code", "GET", "/api/v1/workflow/executions/nope", 404, apiHeaders(),
			mustJSON(t, with(errorEnvelope("workflow", "", 404), "error", map[string]any{
				"http_status": 404, "message": "no", "details": map[string]any{}, "retryable": false, "retry_after_ms": nil,
			})), false},
		{"status: error envelope whose action is not error", "GET", "/api/v1/workflow/executions/nope", 404, apiHeaders(),
			mustJSON(t, with(errorEnvelope("workflow", "workflow.status.not_found", 404), "type", map[string]any{"domain": "workflow", "action": "status"})), false},
		{"execute: 202", "POST", "/api/v1/workflow/execute", 202, apiHeaders(),
			mustJSON(t, success("workflow", "execute", execution())), true},
		{"cancel: 409", "POST", "/api/v1/workflow/executions/exec-1/cancel", 409, apiHeaders(),
			mustJSON(t, errorEnvelope("workflow", "workflow.cancel.invalid_state", 409)), true},
		{"cancel: 413", "POST", "/api/v1/workflow/executions/exec-1/cancel", 413, apiHeaders(),
			mustJSON(t, errorEnvelope("workflow", "request.body.too_large", 413)), true},
		{"list_executions: page", "GET", "/api/v1/workflow/executions?status=waiting&limit=10", 200, apiHeaders(),
			mustJSON(t, success("workflow", "list_executions", map[string]any{"items": []any{execution(), failedExecution()}, "next_cursor": "abc"})), true},
		{"list_executions: without next_cursor", "GET", "/api/v1/workflow/executions", 200, apiHeaders(),
			mustJSON(t, success("workflow", "list_executions", map[string]any{"items": []any{}})), false},
		{"logs: page", "GET", "/api/v1/workflow/executions/exec-1/logs", 200, apiHeaders(), logs("info"), true},
		{"logs: unknown level", "GET", "/api/v1/workflow/executions/exec-1/logs", 200, apiHeaders(), logs("verbose"), false},

		// Definitions.
		{"define: 201", "POST", "/api/v1/workflow/definitions", 201, apiHeaders(),
			mustJSON(t, success("workflow", "define", definition())), true},
		{"define: without created_at", "POST", "/api/v1/workflow/definitions", 201, apiHeaders(),
			mustJSON(t, success("workflow", "define", without(definition(), "created_at"))), false},
		{"define: unknown node type", "POST", "/api/v1/workflow/definitions", 201, apiHeaders(),
			mustJSON(t, success("workflow", "define", with(definition(), "nodes", []any{map[string]any{"id": "x", "type": "loop"}}))), false},
		{"define: validation problems", "POST", "/api/v1/workflow/definitions", 400, apiHeaders(),
			problems(map[string]any{"node_id": "ask", "field": "next", "message": "unknown node"}), true},
		{"define: problem without message", "POST", "/api/v1/workflow/definitions", 400, apiHeaders(),
			problems(map[string]any{"node_id": "ask", "field": "next"}), false},
		{"validate: valid", "POST", "/api/v1/workflow/validate", 200, apiHeaders(),
			mustJSON(t, success("workflow", "validate", map[string]any{"valid": true})), true},
		{"validate: valid false", "POST", "/api/v1/workflow/validate", 200, apiHeaders(),
			mustJSON(t, success("workflow", "validate", map[string]any{"valid": false})), false},
		{"get: with version", "GET", "/api/v1/workflow/definitions/collector?version=1.0.0", 200, apiHeaders(),
			mustJSON(t, success("workflow", "get", definition())), true},
		{"list: page", "GET", "/api/v1/workflow/definitions", 200, apiHeaders(),
			mustJSON(t, success("workflow", "list", map[string]any{"items": []any{definition()}, "next_cursor": nil})), true},

		// Events and threads.
		{"events: 202", "POST", "/api/v1/events", 202, apiHeaders(),
			mustJSON(t, success("event", "publish", map[string]any{"event_id": "ev-1", "resumed": []string{"exec-1"}, "buffered": []string{}})), true},
		{"events: without buffered", "POST", "/api/v1/events", 202, apiHeaders(),
			mustJSON(t, success("event", "publish", map[string]any{"event_id": "ev-1", "resumed": []string{}})), false},
		{"inbound: 202", "POST", "/api/v1/threads/thread-1/messages", 202, apiHeaders(),
			mustJSON(t, success("thread", "inbound", map[string]any{"message_id": "m-1", "outcome": "queued", "execution_id": nil})), true},
		{"inbound: unknown outcome", "POST", "/api/v1/threads/thread-1/messages", 202, apiHeaders(),
			mustJSON(t, success("thread", "inbound", map[string]any{"message_id": "m-1", "outcome": "ignored", "execution_id": nil})), false},

		// Outside the envelope.
		{"healthz", "GET", "/healthz", 200, plain("application/json"), []byte(`{"status":"ok"}`), true},
		{"healthz: without the ids", "GET", "/healthz", 200, with2(http.Header{}, "Content-Type", "application/json"), []byte(`{"status":"ok"}`), false},
		{"readyz: ready", "GET", "/readyz", 200, plain("application/json"), []byte(`{"status":"ready"}`), true},
		{"readyz: not ready", "GET", "/readyz", 503, plain("application/json"), []byte(`{"status":"not_ready","reason":"migrations pending"}`), true},
		{"readyz: not ready without reason", "GET", "/readyz", 503, plain("application/json"), []byte(`{"status":"not_ready"}`), false},
		{"metrics", "GET", "/metrics", 200, plain("text/plain; version=0.0.4; charset=utf-8"), []byte("# HELP x y\nx 1\n"), true},
		{"openapi.yaml: the document itself", "GET", "/api/v1/openapi.yaml", 200, plain("application/yaml"), readDocument(t), true},
		{"openapi.yaml: as JSON", "GET", "/api/v1/openapi.yaml", 200, plain("application/json"), []byte(`{}`), false},
		{"openapi.yaml: without the ids", "GET", "/api/v1/openapi.yaml", 200, with2(http.Header{}, "Content-Type", "application/yaml"), readDocument(t), false},
		{"undocumented path", "GET", "/api/v1/nope", 404, apiHeaders(),
			mustJSON(t, errorEnvelope("request", "request.route.not_found", 404)), false},
		{"undocumented method", "DELETE", "/api/v1/workflow/execute", 405, apiHeaders(), nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(tc.method, tc.target, nil)
			err := v.ValidateResponse(req, tc.status, tc.header, tc.body)
			if tc.ok {
				require.NoError(t, err)
				v.Check(t, req, tc.status, tc.header, tc.body)
			} else {
				require.Error(t, err)
				t.Logf("rejected as expected: %v", err)
			}
		})
	}
}

func with2(h http.Header, key, value string) http.Header {
	h.Set(key, value)
	return h
}

func TestCheckRecorderAndResponse(t *testing.T) {
	t.Parallel()

	v := setup(t)
	body := mustJSON(t, success("workflow", "status", execution()))
	handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for k, vs := range apiHeaders() {
			w.Header()[k] = vs
		}
		_, _ = w.Write(body)
	})

	t.Run("Recorder", func(t *testing.T) {
		t.Parallel()
		req := httptest.NewRequest(http.MethodGet, "/api/v1/workflow/executions/exec-1", nil)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		v.CheckRecorder(t, req, rec)
	})

	t.Run("Response", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(handler)
		t.Cleanup(srv.Close)
		resp, err := srv.Client().Get(srv.URL + "/api/v1/workflow/executions/exec-1")
		require.NoError(t, err)
		v.CheckResponse(t, resp)
		// The body is still readable.
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.JSONEq(t, string(body), string(got))
	})
}

func TestRequests(t *testing.T) {
	t.Parallel()

	v := setup(t)
	newReq := func(method, target string, body any, header map[string]string) *http.Request {
		var r io.Reader
		if body != nil {
			r = strings.NewReader(string(mustJSON(t, body)))
		}
		req := httptest.NewRequest(method, target, r)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Tenant-ID", "acme")
		for k, val := range header {
			if val == "" {
				req.Header.Del(k)
			} else {
				req.Header.Set(k, val)
			}
		}
		return req
	}
	execute := map[string]any{
		"message_id": "m-1",
		"type":       map[string]any{"domain": "workflow", "action": "execute"},
		"priority":   5,
		"metadata":   map[string]any{"conversation_id": "c-1", "timeout_ms": 5000},
		"payload": map[string]any{
			"workflow_id": "collector", "input": map[string]any{"name": "Ana"},
			"execution_options": map[string]any{"wait_for_completion": true},
		},
	}

	t.Run("GoodExecuteKeepsBodyReadable", func(t *testing.T) {
		t.Parallel()
		req := newReq(http.MethodPost, "/api/v1/workflow/execute", execute, nil)
		v.CheckRequest(t, req)
		got, err := io.ReadAll(req.Body)
		require.NoError(t, err)
		require.JSONEq(t, string(mustJSON(t, execute)), string(got))
	})

	t.Run("GoodDefineOfTheAPIExample", func(t *testing.T) {
		t.Parallel()
		example := v.Doc.Components.Schemas["DefinitionInput"].Value.Example
		require.NotNil(t, example)
		v.CheckRequest(t, newReq(http.MethodPost, "/api/v1/workflow/definitions", map[string]any{"payload": example}, nil))
	})

	t.Run("GoodGetWithQuery", func(t *testing.T) {
		t.Parallel()
		v.CheckRequest(t, newReq(http.MethodGet, "/api/v1/workflow/executions?status=waiting&limit=500", nil, nil))
	})

	bad := []struct {
		name string
		req  *http.Request
	}{
		{"no payload", newReq(http.MethodPost, "/api/v1/workflow/execute", without(execute, "payload"), nil)},
		{"payload without workflow_id", newReq(http.MethodPost, "/api/v1/workflow/execute",
			with(execute, "payload", map[string]any{"input": map[string]any{}}), nil)},
		{"priority over 10", newReq(http.MethodPost, "/api/v1/workflow/execute", with(execute, "priority", 11), nil)},
		{"no X-Tenant-ID", newReq(http.MethodPost, "/api/v1/workflow/execute", execute, map[string]string{"X-Tenant-ID": ""})},
		{"limit over 500", newReq(http.MethodGet, "/api/v1/workflow/executions?limit=501", nil, nil)},
		{"unknown status filter", newReq(http.MethodGet, "/api/v1/workflow/executions?status=in_progress", nil, nil)},
		{"unknown event type", newReq(http.MethodPost, "/api/v1/events", map[string]any{"payload": map[string]any{
			"event_type": "AGENT_COMPLETED", "event_id": "e-1", "data": map[string]any{},
		}}, nil)},
	}
	for _, tc := range bad {
		t.Run("Bad/"+tc.name, func(t *testing.T) {
			t.Parallel()
			err := v.ValidateRequest(tc.req)
			require.Error(t, err)
			t.Logf("rejected as expected: %v", err)
		})
	}
}

// TestExamplesMatchTheirSchemas checks the document's examples against their
// schemas (openapi3's Validate does too; this makes the intent explicit).
func TestExamplesMatchTheirSchemas(t *testing.T) {
	t.Parallel()

	v := setup(t)
	for _, name := range []string{"Execution", "DefinitionInput", "ErrorEnvelope", "WebSocketEvent"} {
		s := v.Doc.Components.Schemas[name]
		require.NotNil(t, s, name)
		require.NotNil(t, s.Value.Example, name)
		require.NoError(t, s.Value.VisitJSON(s.Value.Example, openapi3.MultiErrors()), name)
	}
}
