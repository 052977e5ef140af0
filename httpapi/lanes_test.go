package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
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
