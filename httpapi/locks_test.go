package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

// POST /monitor/locks/cleanup clears the caller's stale locks only: another
// tenant's stale lock stays until that tenant (or the periodic reaper)
// clears it.
func TestLockCleanupIsPerTenant(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	entered := make(chan string, 2)
	b := setup(t, setupOpts{lockTimeout: time.Second, tools: map[string]engine.ToolFunc{
		"block": func(ctx context.Context, call engine.ToolCall) (map[string]any, error) {
			entered <- call.TenantID
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return map[string]any{}, nil
		},
	}})
	t.Cleanup(func() { close(release) })
	other := b.tenant + "-b"
	tenants := map[string]*string{
		b.tenant: ptr(mint(t, b.tenant, "workflows:read", "workflows:write", "monitor:read", "monitor:write")),
		other:    ptr(mint(t, other, "workflows:read", "workflows:write", "monitor:read", "monitor:write")),
	}
	for tenant, tok := range tenants {
		r := b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/definitions", tenant: &tenant, token: tok, body: envelope(map[string]any{
			"workflow_id": "hold", "version": "1", "nodes": []any{
				map[string]any{"id": "start", "type": "start", "next": "say"},
				map[string]any{"id": "say", "type": "action", "actionType": "send_message", "parameters": map[string]any{"message": "hola"}, "next": "wait"},
				map[string]any{"id": "wait", "type": "task", "task": "block", "next": "end"},
				map[string]any{"id": "end", "type": "end"},
			}})})
		require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)
		r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute", tenant: &tenant, token: tok, body: envelope(map[string]any{
			"workflow_id": "hold", "thread_id": "juan"})})
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
		require.Equal(t, tenant, <-entered)
	}
	stale := func(tenant string) []any {
		r := b.do(t, call{method: http.MethodGet, path: "/api/v1/monitor/locks/stale", tenant: &tenant, token: tenants[tenant]})
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		return r.data()["items"].([]any)
	}
	require.Eventually(t, func() bool { return len(stale(b.tenant)) == 1 && len(stale(other)) == 1 }, 10*time.Second, 100*time.Millisecond)

	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/monitor/locks/cleanup", token: tenants[b.tenant], body: envelope(map[string]any{})})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	require.Equal(t, float64(1), r.data()["released"])
	require.Equal(t, []any{"juan"}, r.data()["thread_ids"])
	require.Empty(t, stale(b.tenant))
	require.Len(t, stale(other), 1, "the other tenant's stale lock stays")

	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/monitor/locks/cleanup", tenant: &other, token: tenants[other], body: envelope(map[string]any{})})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	require.Equal(t, float64(1), r.data()["released"])
	require.Empty(t, stale(other))
}
