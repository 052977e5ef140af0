package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

func TestMonitorLanes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, waitFlow("lanes", `{"id": "w", "type": "action", "actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "end"}`))
	b.startWaiting(t, "lanes", "x-lanes-1")
	monitor := mint(t, b.tenant, "monitor:read")

	r := b.do(t, call{method: http.MethodGet, path: "/api/v1/monitor/lanes"})
	require.Equal(t, http.StatusForbidden, r.status)
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/monitor/lanes", token: &monitor})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	byName := map[string]map[string]any{}
	for _, it := range r.data()["items"].([]any) {
		l := it.(map[string]any)
		byName[l["lane"].(string)] = l
	}
	require.Equal(t, float64(4), byName["main"]["max_concurrent"])
	require.Equal(t, float64(8), byName["subagent"]["max_concurrent"])
	require.Equal(t, float64(2), byName["cron"]["max_concurrent"])
	// The waiting run holds no slot.
	require.Equal(t, float64(0), byName["main"]["running"])
	require.Equal(t, float64(0), byName["main"]["pending"])
	require.Nil(t, byName["main"]["oldest_pending_age_ms"])
}

// Lanes page with ?limit= and ?cursor=: walked a lane or two at a time,
// the pages hold the configured lanes and the tenant's busy session lane,
// each once, by name, as one page of 500 does.
func TestMonitorLanesPages(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	b := setup(t, setupOpts{tools: map[string]engine.ToolFunc{
		"block": func(ctx context.Context, _ engine.ToolCall) (map[string]any, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return map[string]any{}, nil
		},
	}})
	b.define(t, `{"workflow_id": "busy", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "t"},
	  {"id": "t", "type": "task", "task": "block", "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/threads", body: envelope(map[string]any{
		"thread_id": "busy-thread", "channel": "web", "contact": "ana", "default_workflow_id": "busy"})})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)
	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/threads/busy-thread/messages", body: envelope(map[string]any{"text": "hola"})})
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	monitor := ptr(mint(t, b.tenant, "monitor:read"))

	names := func(pages [][]map[string]any) []string {
		var out []string
		for _, page := range pages {
			for _, l := range page {
				out = append(out, l["lane"].(string))
			}
		}
		return out
	}
	var want []string
	require.Eventually(t, func() bool {
		pages := b.pages(t, "/api/v1/monitor/lanes?limit=500", monitor)
		want = names(pages)
		return len(pages) == 1 && slices.Contains(want, "session:busy-thread")
	}, 10*time.Second, 20*time.Millisecond, "the session lane has work")
	require.Subset(t, want, []string{"main", "subagent", "cron"})
	require.True(t, slices.IsSorted(want), "by name: %v", want)

	for _, limit := range []int{1, 2} {
		pages := b.pages(t, fmt.Sprintf("/api/v1/monitor/lanes?limit=%d", limit), monitor)
		require.Len(t, pages, (len(want)+limit-1)/limit, "limit %d", limit)
		for _, page := range pages {
			require.LessOrEqual(t, len(page), limit)
		}
		require.Equal(t, want, names(pages), "limit %d: each lane once, in order", limit)
	}

	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/monitor/lanes?limit=0", token: monitor})
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.raw)
	require.Equal(t, "limit", r.body["error"].(map[string]any)["details"].(map[string]any)["field"])
}
