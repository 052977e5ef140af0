package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// execution_options.callback_events that names an unknown callback, is
// not a list of names, or comes without a callback_url is answered 400
// workflow.execute.invalid_request naming the field, and starts nothing.
func TestExecuteRefusesBadCallbackEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, `{"workflow_id": "quick", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "end"}, {"id": "end", "type": "end"}]}`)
	for name, options := range map[string]map[string]any{
		"unknown name":    {"callback_url": "https://hooks.example.com/cb", "callback_events": []any{"status", "progress"}},
		"not a list":      {"callback_url": "https://hooks.example.com/cb", "callback_events": "status"},
		"no callback_url": {"callback_events": []any{"status"}},
	} {
		r := b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute", body: envelope(map[string]any{
			"workflow_id": "quick", "execution_options": options})})
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", name, r.raw)
		require.Equal(t, "workflow.execute.invalid_request", r.errorCode(), name)
		if name != "not a list" { // a payload that does not decode names no field
			field := r.body["error"].(map[string]any)["details"].(map[string]any)["field"]
			require.Equal(t, "payload.execution_options.callback_events", field, name)
		}
	}
	r := b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/executions"})
	require.Equal(t, http.StatusOK, r.status)
	require.Empty(t, r.data()["items"])
}
