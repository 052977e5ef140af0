package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

// TestRealExecutionsMatchTheStrictContract reads waiting, completed and
// failed executions, with their null current_step, waiting, result and
// error, through the API; every answer is checked against the document
// read as strict OpenAPI 3.0 (see internal/openapitest).
func TestRealExecutionsMatchTheStrictContract(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{tools: map[string]engine.ToolFunc{
		"broken": func(context.Context, engine.ToolCall) (map[string]any, error) {
			return nil, &engine.ToolError{Class: engine.ClassClient, Err: errors.New("boom")}
		},
	}})
	b.define(t, helloWorkflow)
	b.define(t, waitFlow("strict-wait", `{"id": "w", "type": "action", "actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "end"}`))
	b.define(t, waitFlow("strict-fail", `{"id": "w", "type": "task", "task": "broken", "next": "end"}`))

	b.startWaiting(t, "strict-wait", "x-waiting")
	for id, workflow := range map[string]string{"x-completed": "hello", "x-failed": "strict-fail"} {
		r := b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute", body: envelope(map[string]any{
			"workflow_id": workflow, "execution_id": id, "input": map[string]any{"name": "Ana", "visits": 1}})})
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
		b.waitTerminal(t, id)
	}

	// Which of the four are objects; the others must be present and null.
	objects := map[string][]string{
		"x-waiting":   {"current_step", "waiting"},
		"x-completed": {"result"},
		"x-failed":    {"result", "error"},
	}
	for id, set := range objects {
		path := "/api/v1/workflow/executions/" + id
		r := b.do(t, call{method: http.MethodGet, path: path})
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		x := r.data()
		for _, field := range []string{"current_step", "waiting", "result", "error"} {
			require.Contains(t, x, field, id)
			if slices.Contains(set, field) {
				require.IsType(t, map[string]any{}, x[field], "%s %s", id, field)
			} else {
				require.Nil(t, x[field], "%s %s", id, field)
			}
		}
		req, err := http.NewRequest(http.MethodGet, b.server.URL+path, nil)
		require.NoError(t, err)
		require.NoError(t, b.validator.ValidateResponse(req, r.status, r.header, r.raw))
	}
}
