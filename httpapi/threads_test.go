package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

const holdWorkflow = `{"workflow_id": "hold", "version": "1", "nodes": [
  {"id": "start", "type": "start", "next": "say"},
  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "{{text}}"}, "next": "wait"},
  {"id": "wait", "type": "task", "task": "block", "inputs": {"key": "{{text}}"}, "next": "end"},
  {"id": "end", "type": "end"}]}`

func TestThreadsLocksAndMonitoring(t *testing.T) {
	t.Parallel()
	release := map[string]chan struct{}{"first": make(chan struct{}), "second": make(chan struct{})}
	entered := make(chan string, 4)
	b := setup(t, setupOpts{lockTimeout: time.Second, tools: map[string]engine.ToolFunc{
		"block": func(ctx context.Context, call engine.ToolCall) (map[string]any, error) {
			key, _ := call.Inputs["key"].(string)
			entered <- key
			select {
			case <-release[key]:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return map[string]any{}, nil
		},
	}})
	b.define(t, holdWorkflow)
	monitor := ptr(mint(t, b.tenant, "workflows:read", "workflows:write", "monitor:read", "monitor:write"))

	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/threads", body: envelope(map[string]any{
		"channel": "whatsapp", "contact": "+5215550001", "thread_id": "juan", "default_workflow_id": "hold",
		"queue": map[string]any{"mode": "followup", "cap": 5}})})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)
	require.Equal(t, "juan", r.data()["thread_id"])
	queue := r.data()["queue"].(map[string]any)
	require.Equal(t, "followup", queue["mode"])
	require.Equal(t, map[string]any{"mode": "session", "cap": "session", "debounce_ms": "default", "drop": "default"}, queue["sources"])
	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/threads", body: envelope(map[string]any{"channel": "whatsapp", "contact": "+5215550001"})})
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "juan", r.data()["thread_id"])

	for _, text := range []string{"first", "second"} {
		r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute", body: envelope(map[string]any{
			"workflow_id": "hold", "execution_id": text, "thread_id": "juan", "input": map[string]any{"text": text}})})
		require.Equal(t, http.StatusAccepted, r.status)
		require.Equal(t, text, <-entered)
	}

	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/threads/juan"})
	require.Equal(t, http.StatusOK, r.status)
	lock := r.data()["lock"].(map[string]any)
	require.Equal(t, "first", lock["active_execution_id"])
	require.Equal(t, float64(1), r.data()["queued_count"])

	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/threads/juan/messages?direction=out"})
	require.Equal(t, http.StatusOK, r.status)
	items := r.data()["items"].([]any)
	require.Len(t, items, 2)
	require.Equal(t, "second", items[1].(map[string]any)["execution_id"])
	require.Equal(t, "queued", items[1].(map[string]any)["status"])

	// Monitoring needs its scope.
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/monitor/locks"})
	require.Equal(t, http.StatusForbidden, r.status)
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/monitor/locks", token: monitor})
	require.Equal(t, http.StatusOK, r.status)
	require.Len(t, r.data()["items"], 1)
	require.Equal(t, "first", r.data()["items"].([]any)[0].(map[string]any)["active_execution_id"])

	// Another tenant sees nothing of it.
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/threads/juan", tenant: ptr("other"), token: ptr(mint(t, "other"))})
	require.Equal(t, http.StatusNotFound, r.status)
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/monitor/locks", tenant: ptr("other"), token: ptr(mint(t, "other", "monitor:read"))})
	require.Len(t, r.data()["items"], 0)

	// Once the lock is stale, cleanup clears it and the queued message goes out.
	time.Sleep(1200 * time.Millisecond)
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/monitor/locks/stale", token: monitor})
	require.Len(t, r.data()["items"], 1, "%s", r.raw)
	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/monitor/locks/cleanup", token: monitor, body: envelope(map[string]any{})})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	require.Equal(t, float64(1), r.data()["released"])
	require.Equal(t, []any{"juan"}, r.data()["thread_ids"])
	require.Eventually(t, func() bool { return len(b.channel.Messages()) == 2 }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, "second", b.channel.Messages()[1].Body)

	close(release["first"])
	close(release["second"])
	b.waitTerminal(t, "first")
	b.waitTerminal(t, "second")
}

// A thread's id never changes: POST /threads with another thread_id for a
// contact that has a thread is a 409 naming the contact's thread, and one
// another contact's thread has is a 409 too; an undefined
// default_workflow_id is a 400 naming it. None of them changes anything.
func TestThreadUpsertRefusesWhatItCannotHonour(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, id := range []string{"w1", "w2"} {
		b.define(t, `{"workflow_id": "`+id+`", "version": "1", "nodes": [{"id": "start", "type": "start", "next": "end"}, {"id": "end", "type": "end"}]}`)
	}
	upsert := func(payload map[string]any) *response {
		return b.do(t, call{method: http.MethodPost, path: "/api/v1/threads", body: envelope(payload)})
	}
	// refused sends an upsert that must change no row.
	refused := func(payload map[string]any) *response {
		before := b.fingerprint(t)
		r := upsert(payload)
		require.Equal(t, before, b.fingerprint(t), "%v changed rows: %s", payload, r.raw)
		return r
	}
	thread := func(id string) *response {
		return b.do(t, call{method: http.MethodGet, path: "/api/v1/threads/" + id})
	}
	r := upsert(map[string]any{"channel": "web", "contact": "ana", "thread_id": "ana-1", "default_workflow_id": "w1"})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)

	r = refused(map[string]any{"channel": "web", "contact": "ana", "thread_id": "ana-2", "default_workflow_id": "w2"})
	require.Equal(t, http.StatusConflict, r.status, "%s", r.raw)
	require.Equal(t, "thread.upsert.contact_has_thread", r.errorCode())
	require.Equal(t, map[string]any{"field": "payload.thread_id", "thread_id": "ana-1"}, r.errorDetails())
	require.Equal(t, http.StatusNotFound, thread("ana-2").status)
	require.Equal(t, "w1", thread("ana-1").data()["default_workflow_id"], "the refused upsert changed nothing")

	r = refused(map[string]any{"channel": "web", "contact": "carl", "thread_id": "ana-1"})
	require.Equal(t, http.StatusConflict, r.status, "%s", r.raw)
	require.Equal(t, "thread.upsert.thread_id_in_use", r.errorCode())
	require.Equal(t, "payload.thread_id", r.errorDetails()["field"])

	// The contact's own thread_id, or none, updates it.
	r = upsert(map[string]any{"channel": "web", "contact": "ana", "thread_id": "ana-1", "default_workflow_id": "w2"})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	require.Equal(t, "w2", r.data()["default_workflow_id"])
	r = upsert(map[string]any{"channel": "web", "contact": "ana"})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	require.Equal(t, "ana-1", r.data()["thread_id"])

	for _, payload := range []map[string]any{
		{"channel": "web", "contact": "bob", "default_workflow_id": "nope"},
		{"channel": "web", "contact": "bob", "thread_id": "bob", "default_workflow_id": "nope"},
		{"channel": "web", "contact": "ana", "default_workflow_id": "nope"},
	} {
		r = refused(payload)
		require.Equal(t, http.StatusBadRequest, r.status, "%v: %s", payload, r.raw)
		require.Equal(t, "thread.upsert.invalid_request", r.errorCode())
		require.Equal(t, "payload.default_workflow_id", r.errorDetails()["field"])
	}
	require.Equal(t, http.StatusNotFound, thread("bob").status)
	require.Equal(t, http.StatusNotFound, thread("web:bob").status)
	require.Equal(t, "w2", thread("ana-1").data()["default_workflow_id"])

	r = refused(map[string]any{"channel": "web"})
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.raw)
	require.Equal(t, "payload.contact", r.errorDetails()["field"])
}

// PUT …/queue names the field at fault, whatever is wrong with it, and
// changes nothing.
func TestThreadQueueNamesTheField(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/threads", body: envelope(map[string]any{"thread_id": "q", "channel": "web", "contact": "q"})})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)
	for _, tc := range []struct {
		payload map[string]any
		field   string
	}{
		{map[string]any{"cap": "3"}, "payload.cap"},
		{map[string]any{"debounce_ms": 1.5}, "payload.debounce_ms"},
		{map[string]any{"mode": 7}, "payload.mode"},
		{map[string]any{"mode": "bogus"}, "payload.mode"},
		{map[string]any{"queue": map[string]any{"mode": "followup"}}, "payload.queue"},
		{map[string]any{}, "payload"},
	} {
		before := b.fingerprint(t)
		r := b.do(t, call{method: http.MethodPut, path: "/api/v1/threads/q/queue", body: envelope(tc.payload)})
		require.Equal(t, http.StatusBadRequest, r.status, "%v: %s", tc.payload, r.raw)
		require.Equal(t, before, b.fingerprint(t), "%v changed rows", tc.payload)
		require.Equal(t, "thread.queue.invalid_request", r.errorCode())
		require.Equal(t, tc.field, r.errorDetails()["field"], "%v", tc.payload)
	}
	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/threads", body: envelope(map[string]any{"channel": "web", "contact": "q", "queue": map[string]any{"cap": "3"}})})
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.raw)
	require.Equal(t, "payload.queue.cap", r.errorDetails()["field"])

	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/threads/q"})
	require.Equal(t, map[string]any{"mode": "default", "cap": "default", "debounce_ms": "default", "drop": "default"},
		r.data()["queue"].(map[string]any)["sources"], "nothing was stored")
}

// A method a path is not served with is a 405 with the error envelope and
// an Allow header listing the path's methods; an unknown path is a 404.
func TestWrongMethodIs405(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	errorSchema := b.validator.Doc.Components.Schemas["ErrorEnvelope"].Value
	for _, tc := range []struct {
		method, path, allow string
		status              int
	}{
		{http.MethodPost, "/api/v1/threads/x", "GET, HEAD", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/api/v1/workflow/execute", "POST", http.StatusMethodNotAllowed},
		{http.MethodPatch, "/api/v1/threads/x/queue", "PUT, DELETE", http.StatusMethodNotAllowed},
		{http.MethodGet, "/api/v1/threads", "POST", http.StatusMethodNotAllowed},
		{http.MethodPost, "/healthz", "GET, HEAD", http.StatusMethodNotAllowed},
		{http.MethodOptions, "/api/v1/workflow/definitions", "GET, HEAD, POST", http.StatusMethodNotAllowed},
		{http.MethodGet, "/api/v1/nowhere", "", http.StatusNotFound},
	} {
		req, err := http.NewRequest(tc.method, b.server.URL+tc.path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+b.token)
		req.Header.Set("X-Tenant-ID", b.tenant)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, tc.status, resp.StatusCode, "%s %s: %s", tc.method, tc.path, raw)
		require.Equal(t, tc.allow, resp.Header.Get("Allow"), "%s %s", tc.method, tc.path)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		require.NotEmpty(t, resp.Header.Get("X-Request-ID"))
		var body map[string]any
		require.NoError(t, json.Unmarshal(raw, &body))
		require.NoError(t, errorSchema.VisitJSON(body), "%s", raw)
		e := body["error"].(map[string]any)
		require.Equal(t, float64(tc.status), e["http_status"])
		if tc.status == http.StatusMethodNotAllowed {
			require.Equal(t, "request.route.method_not_allowed", e["code"])
			require.Equal(t, tc.allow, strings.Join(toStrings(e["details"].(map[string]any)["allow"]), ", "))
		} else {
			require.Equal(t, "request.route.not_found", e["code"])
		}
	}
}

func toStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}
