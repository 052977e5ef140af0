package httpapi_test

import (
	"context"
	"net/http"
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
