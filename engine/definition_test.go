package engine_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

// TestFirstStepSettles: a start can skip its lane only when every path of
// its first step ends the run or makes it wait, with no tool call on the way
// and within the step's node budget.
func TestFirstStepSettles(t *testing.T) {
	tools := engine.NewTools()
	tools.Register("work", nil)
	node := func(id, body string) string { return fmt.Sprintf(`{"id": %q, %s}`, id, body) }
	def := func(nodes ...string) *engine.Definition {
		raw := `{"workflow_id": "w", "version": "1", "nodes": [`
		for i, n := range nodes {
			if i > 0 {
				raw += ","
			}
			raw += n
		}
		d, err := engine.ParseDefinition([]byte(raw + `]}`))
		require.NoError(t, err)
		require.NoError(t, d.Validate(tools))
		return d
	}
	end := node("end", `"type": "end"`)
	straight := def(node("start", `"type": "start", "next": "say"`),
		node("say", `"type": "action", "actionType": "send_message", "parameters": {"message": "hola"}, "next": "end"`), end)
	require.True(t, straight.FirstStepSettles(100))
	require.True(t, straight.FirstStepSettles(3), "three nodes fit a budget of three")
	require.False(t, straight.FirstStepSettles(2), "over the step's node budget")

	waits := def(node("start", `"type": "start", "next": "ask"`),
		node("ask", `"type": "action", "actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "work"`),
		node("work", `"type": "task", "task": "work", "next": "end"`), end)
	require.True(t, waits.FirstStepSettles(100), "the task comes after the wait, in a later step")

	branchTask := def(node("start", `"type": "start", "next": "pick"`),
		node("pick", `"type": "decision", "condition": "${x} > 1", "branches": {"true": "work", "false": "end"}`),
		node("work", `"type": "task", "task": "work", "next": "end"`), end)
	require.False(t, branchTask.FirstStepSettles(100), "one branch calls a tool")

	child := def(node("start", `"type": "start", "next": "kid"`),
		node("kid", `"type": "action", "actionType": "trigger_agent", "parameters": {"workflow_id": "k", "waitForCompletion": true}, "next": "end"`), end)
	require.False(t, child.FirstStepSettles(100), "a child is admitted in the parent's transaction, which must hold its slot")

	loop := def(node("start", `"type": "start", "next": "ask"`),
		node("ask", `"type": "action", "actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "pick"`),
		node("pick", `"type": "decision", "condition": "${done}", "branches": {"true": "end", "false": "ask"}`), end)
	require.True(t, loop.FirstStepSettles(100), "a loop through a wait commits at the wait")
}
