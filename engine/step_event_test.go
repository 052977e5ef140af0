package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/benchkit"
)

// TestStepUpdatePayloads pins every key of the workflow.step_update
// payloads of a five-node run and of a wait: what clients of the event
// stream and of GET …/logs read.
func TestStepUpdatePayloads(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, benchkit.FiveNodeWorkflow)
	b.define(t, benchkit.WaitWorkflow)
	steps := func(x *engine.Execution) []map[string]any {
		t.Helper()
		logs, err := b.engine.Logs(context.Background(), b.pool, b.tenant, x.ExecutionID, 0, 100)
		require.NoError(t, err)
		var out []map[string]any
		for _, l := range logs {
			if l.Action == engine.EventStepUpdate {
				// How long a node took varies; that it is there does not.
				require.IsType(t, float64(0), l.Payload["duration_ms"], "%s", l.Payload["step_id"])
				delete(l.Payload, "duration_ms")
				out = append(out, l.Payload)
			}
		}
		return out
	}
	progress := func(step, total int, pct float64) map[string]any {
		return map[string]any{"current_step": float64(step), "total_steps": float64(total), "percentage": pct}
	}
	step := func(id, nodeType, next string, step, total int, pct float64) map[string]any {
		p := map[string]any{
			"step_id": id, "node_type": nodeType, "status": "completed", "next_node": next,
			"completed_steps": float64(step), "total_steps": float64(total), "progress_percentage": pct,
			"progress": progress(step, total, pct),
		}
		if next == "" {
			p["next_node"] = nil
		}
		return p
	}
	with := func(p map[string]any, kv ...any) map[string]any {
		for i := 0; i < len(kv); i += 2 {
			p[kv[i].(string)] = kv[i+1]
		}
		return p
	}

	x := b.start(t, engine.StartParams{WorkflowID: "bench", Input: benchkit.FiveNodeInput()})
	got := steps(b.waitFor(t, x.ExecutionID, terminal))
	require.Len(t, got, 5)
	message := got[3]["step_result"].(map[string]any)["message_id"]
	require.IsType(t, "", message)
	require.Equal(t, []map[string]any{
		step("start", "start", "remember", 1, 4, 25),
		with(step("remember", "action", "check", 2, 4, 50),
			"action_type", "set_variables", "step_result", map[string]any{"greeting": "Hola Ana"}),
		with(step("check", "decision", "send", 3, 5, 60),
			"decision_made", "The condition '${visits} > 1' evaluated to true", "step_result", map[string]any{"value": true}),
		with(step("send", "action", "end", 4, 5, 80),
			"action_type", "send_message", "step_result", map[string]any{"queued": false, "message_id": message}),
		step("end", "end", "", 5, 5, 100),
	}, got)

	w := b.start(t, engine.StartParams{WorkflowID: "bench-wait"})
	got = steps(b.waitFor(t, w.ExecutionID, func(x *engine.Execution) bool { return x.Status == engine.StatusWaiting }))
	require.Equal(t, []map[string]any{
		step("start", "start", "wait", 1, 4, 25),
		with(step("wait", "action", "note", 2, 4, 50), "action_type", "wait_for_event", "waiting_for", "event"),
	}, got)
}
