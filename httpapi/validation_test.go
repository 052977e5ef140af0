package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

// wrap builds a definition whose nodes are the given JSON list.
func wrap(nodes string) string {
	return `{"workflow_id": "wf", "version": "1", "nodes": [` + nodes + `]}`
}

const okTail = `{"id": "end", "type": "end"}`

// One case per validation rule of docs/workflow-language.md: each is answered
// 400 workflow.define.validation_error naming the node and field at fault.
func TestValidationRules(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{tools: map[string]engine.ToolFunc{
		"document_processor": func(context.Context, engine.ToolCall) (map[string]any, error) { return nil, nil },
	}})
	cases := []struct {
		name, definition, nodeID, field string
	}{
		{"missing start", wrap(`{"id": "a", "type": "action", "actionType": "send_message", "parameters": {"message": "hi"}, "next": "end"}, ` + okTail), "", "nodes"},
		{"unknown next node", wrap(`{"id": "start", "type": "start", "next": "nowhere"}, ` + okTail), "start", "next"},
		{"unknown branch node", wrap(`{"id": "start", "type": "start", "next": "d"}, {"id": "d", "type": "decision", "condition": "x == 1", "branches": {"true": "end", "false": "ghost"}}, ` + okTail), "d", "branches.false"},
		{"duplicate node id", wrap(`{"id": "start", "type": "start", "next": "end"}, ` + okTail + `, ` + okTail), "end", "id"},
		{"unreachable node", wrap(`{"id": "start", "type": "start", "next": "end"}, {"id": "island", "type": "action", "actionType": "send_message", "parameters": {"message": "x"}, "next": "end"}, ` + okTail), "island", "id"},
		{"cycle with no wait", wrap(`{"id": "start", "type": "start", "next": "a"}, {"id": "a", "type": "action", "actionType": "set_variables", "parameters": {"values": {}}, "next": "d"}, {"id": "d", "type": "decision", "condition": "n > 3", "branches": {"true": "end", "false": "a"}}, ` + okTail), "a", "next"},
		{"bad expression", wrap(`{"id": "start", "type": "start", "next": "d"}, {"id": "d", "type": "decision", "condition": "${document.language} === ", "branches": {"true": "end", "false": "end"}}, ` + okTail), "d", "condition"},
		{"unknown tool", wrap(`{"id": "start", "type": "start", "next": "t"}, {"id": "t", "type": "task", "task": "no_such_tool", "next": "end"}, ` + okTail), "t", "task"},
		{"unknown action type", wrap(`{"id": "start", "type": "start", "next": "a"}, {"id": "a", "type": "action", "actionType": "launch_rocket", "next": "end"}, ` + okTail), "a", "actionType"},
		{"unknown node type", wrap(`{"id": "start", "type": "start", "next": "a"}, {"id": "a", "type": "loop", "next": "end"}, ` + okTail), "a", "type"},
		{"response timeout over 7d", wrap(`{"id": "start", "type": "start", "next": "w"}, {"id": "w", "type": "action", "actionType": "wait_for_response", "parameters": {"timeout": "8d"}, "next": "end"}, ` + okTail), "w", "parameters.timeout"},
		{"agent timeout over 24h", wrap(`{"id": "start", "type": "start", "next": "w"}, {"id": "w", "type": "action", "actionType": "trigger_agent", "parameters": {"workflow_id": "x", "waitForCompletion": true, "timeout": "25h"}, "next": "end"}, ` + okTail), "w", "parameters.timeout"},
		{"document timeout over 30d", wrap(`{"id": "start", "type": "start", "next": "w"}, {"id": "w", "type": "action", "actionType": "request_document", "parameters": {"documents": ["INE"], "timeout": "31d"}, "next": "end"}, ` + okTail), "w", "parameters.timeout"},
		{"delay over 30d", wrap(`{"id": "start", "type": "start", "next": "w"}, {"id": "w", "type": "action", "actionType": "delay", "parameters": {"duration": "45d"}, "next": "end"}, ` + okTail), "w", "parameters.duration"},
		{"input timeout over 7d", wrap(`{"id": "start", "type": "start", "next": "w"}, {"id": "w", "type": "action", "actionType": "request_input", "parameters": {"prompt": "?", "timeout": "8d"}, "next": "end"}, ` + okTail), "w", "parameters.timeout"},
		{"bad onTimeout", wrap(`{"id": "start", "type": "start", "next": "w"}, {"id": "w", "type": "action", "actionType": "wait_for_response", "parameters": {"onTimeout": "explode"}, "next": "end"}, ` + okTail), "w", "parameters.onTimeout"},
		{"timeout action that waits", wrap(`{"id": "start", "type": "start", "next": "w"}, {"id": "w", "type": "action", "actionType": "wait_for_response", "parameters": {"timeoutActions": [{"actionType": "delay", "parameters": {"duration": "1m"}}]}, "next": "end"}, ` + okTail), "w", "parameters.timeoutActions[0].actionType"},
		{"missing message", wrap(`{"id": "start", "type": "start", "next": "a"}, {"id": "a", "type": "action", "actionType": "send_message", "parameters": {}, "next": "end"}, ` + okTail), "a", "parameters.message"},
		{"missing next", wrap(`{"id": "start", "type": "start", "next": "a"}, {"id": "a", "type": "action", "actionType": "send_message", "parameters": {"message": "x"}}, ` + okTail), "a", "next"},
		{"decision without branches", wrap(`{"id": "start", "type": "start", "next": "d"}, {"id": "d", "type": "decision", "condition": "true"}, ` + okTail), "d", "branches"},
		{"end with next", wrap(`{"id": "start", "type": "start", "next": "end"}, {"id": "end", "type": "end", "next": "start"}`), "end", "next"},
		{"two starts", wrap(`{"id": "start", "type": "start", "next": "end"}, {"id": "start2", "type": "start", "next": "end"}, ` + okTail), "start2", "type"},
		{"unknown field", wrap(`{"id": "start", "type": "start", "nxt": "end"}, ` + okTail), "start", "nodes[0]"},
		{"missing workflow_id", `{"version": "1", "nodes": [{"id": "start", "type": "start", "next": "end"}, ` + okTail + `]}`, "", "workflow_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var payload map[string]any
			require.NoError(t, json.Unmarshal([]byte(tc.definition), &payload))
			for _, path := range []string{"/api/v1/workflow/definitions", "/api/v1/workflow/validate"} {
				r := b.do(t, call{method: http.MethodPost, path: path, body: envelope(payload)})
				require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", path, r.raw)
				require.Equal(t, "workflow.define.validation_error", r.errorCode())
				details := r.body["error"].(map[string]any)["details"].(map[string]any)
				found := false
				for _, p := range details["problems"].([]any) {
					pm := p.(map[string]any)
					if pm["node_id"] == tc.nodeID && strings.HasPrefix(pm["field"].(string), tc.field) {
						found = true
					}
				}
				require.True(t, found, "no problem for node %q field %q in %s", tc.nodeID, tc.field, r.raw)
			}
		})
	}
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM workflow_definition`).Scan(&n))
	require.Equal(t, 0, n, "an invalid definition was stored")
}
