package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
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

// pages walks a list endpoint from its first page to its last, following
// next_cursor, and returns the pages' items in order.
func (b *testBundle) pages(t *testing.T, path string, token *string) [][]map[string]any {
	t.Helper()
	var pages [][]map[string]any
	next := path
	for {
		r := b.do(t, call{method: http.MethodGet, path: next, token: token})
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		var page []map[string]any
		for _, it := range r.data()["items"].([]any) {
			page = append(page, it.(map[string]any))
		}
		pages = append(pages, page)
		cursor, ok := r.data()["next_cursor"].(string)
		if !ok {
			return pages
		}
		require.Less(t, len(pages), 100, "the cursor does not move on")
		next = path + "&cursor=" + url.QueryEscape(cursor)
	}
}

// Held locks page with ?limit= and ?cursor=: five locks, two a page, come in
// three pages, oldest first, each lock once; a cursor Baton did not give
// out is a 400 naming it.
func TestMonitorLocksPages(t *testing.T) {
	t.Parallel()
	// Every lock is stale at once, so /locks/stale pages them too.
	b := setup(t, setupOpts{lockTimeout: time.Millisecond})
	b.define(t, `{"workflow_id": "held", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "say"},
	  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "hola"}, "next": "w"},
	  {"id": "w", "type": "action", "actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	var want []string
	for i := range 5 {
		id := fmt.Sprintf("held-%d", i)
		b.startWaiting(t, "held", id)
		want = append(want, id)
	}
	monitor := ptr(mint(t, b.tenant, "monitor:read"))
	for _, path := range []string{"/api/v1/monitor/locks?limit=500", "/api/v1/monitor/locks/stale?limit=500"} {
		require.Eventually(t, func() bool {
			all := b.pages(t, path, monitor)
			return len(all) == 1 && len(all[0]) == 5
		}, 10*time.Second, 20*time.Millisecond, "every execution holds its thread's lock")
	}

	for _, path := range []string{"/api/v1/monitor/locks?limit=2", "/api/v1/monitor/locks/stale?limit=2"} {
		pages := b.pages(t, path, monitor)
		require.Len(t, pages, 3, path)
		var got []string
		var prev time.Time
		for i, page := range pages {
			require.LessOrEqual(t, len(page), 2)
			if i < 2 {
				require.Len(t, page, 2, "only the last page may be short")
			}
			for _, l := range page {
				got = append(got, l["active_execution_id"].(string))
				at, err := time.Parse(time.RFC3339Nano, l["execution_locked_at"].(string))
				require.NoError(t, err)
				require.False(t, at.Before(prev), "oldest first")
				prev = at
			}
		}
		require.ElementsMatch(t, want, got, "%s: each lock once, none missing", path)
	}

	r := b.do(t, call{method: http.MethodGet, path: "/api/v1/monitor/locks?cursor=bm90LWEta2V5", token: monitor})
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.raw)
	require.Equal(t, "monitor.locks.invalid_request", r.errorCode())
	require.Equal(t, "cursor", r.body["error"].(map[string]any)["details"].(map[string]any)["field"])
}
