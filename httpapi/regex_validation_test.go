package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A condition's regular expression is charged by what it compiles to:
// one over limits.regexProgramSize, or whose matches would cost over the
// budget on the longest string the variables allow, is answered 400
// workflow.define.validation_error naming the node and the limit, both when
// validated and when stored, and nothing is stored.
func TestRegexConditionsAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	definition := func(condition string) map[string]any {
		var payload map[string]any
		require.NoError(t, json.Unmarshal([]byte(fmt.Sprintf(`{"workflow_id": "wf", "version": "1", "nodes": [
		  {"id": "start", "type": "start", "next": "check"},
		  {"id": "check", "type": "decision", "condition": %q, "branches": {"true": "end", "false": "end"}},
		  {"id": "end", "type": "end"}]}`, condition)), &payload))
		return payload
	}
	for _, tc := range []struct{ condition, limit string }{
		{"${s}.matches('a{1000}a{1000}a{1000}a{1000}a{1000}x')", "limits.regexProgramSize"},
		{"${s}.matches('a{1000}x')", "limits.regexProgramSize"},
		{"${s}.matches('a{500}x')", "limits.conditionCost"},
	} {
		for _, path := range []string{"/api/v1/workflow/validate", "/api/v1/workflow/definitions"} {
			r := b.do(t, call{method: http.MethodPost, path: path, body: envelope(definition(tc.condition))})
			require.Equal(t, http.StatusBadRequest, r.status, "%s %s: %s", path, tc.condition, r.raw)
			require.Equal(t, "workflow.define.validation_error", r.errorCode())
			problems := r.errorDetails()["problems"].([]any)
			require.Len(t, problems, 1, "%s", r.raw)
			problem := problems[0].(map[string]any)
			require.Equal(t, "check", problem["node_id"])
			require.Equal(t, "condition", problem["field"])
			require.True(t, strings.Contains(problem["message"].(string), tc.limit), "%s does not name %s", r.raw, tc.limit)
		}
	}
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM workflow_definition`).Scan(&n))
	require.Zero(t, n, "a refused definition was stored")

	// One within the limits is stored.
	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/definitions", body: envelope(definition("${s}.matches('^[a-z]+-[0-9]+$')"))})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)
}
