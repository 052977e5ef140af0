package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

const callbackSecret = "callback-secret-of-32-bytes-long"

// callbackReceiver answers 500 to the first delivery of every callback,
// then keeps each verified callback once (by message_id), by execution.
type callbackReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	tries map[string]int
	got   map[string][]map[string]any
}

func newCallbackReceiver(t *testing.T) *callbackReceiver {
	t.Helper()
	r := &callbackReceiver{tries: map[string]int{}, got: map[string][]map[string]any{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if engine.VerifySignature([]byte(callbackSecret), req.Header.Get(engine.SignatureHeader), body, 0, time.Now()) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var env map[string]any
		if err := json.Unmarshal(body, &env); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		id, _ := env["message_id"].(string)
		if id == "" {
			id, _ = env["request_id"].(string) // an input request's
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.tries[id]++
		switch r.tries[id] {
		case 1:
			w.WriteHeader(http.StatusInternalServerError)
			return
		case 2:
			env["X-Domain-Action"] = req.Header.Get("X-Domain-Action")
			execID := req.Header.Get("X-Correlation-ID")
			r.got[execID] = append(r.got[execID], env)
		}
	}))
	t.Cleanup(r.Close)
	return r
}

// callbacks returns what the receiver kept for the execution whose
// correlation id is corr, by X-Domain-Action, each list in created_at
// order.
func (r *callbackReceiver) callbacks(corr string) map[string][]map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]map[string]any{}
	for _, env := range r.got[corr] {
		action := env["X-Domain-Action"].(string)
		out[action] = append(out[action], env)
	}
	for _, list := range out {
		sort.SliceStable(list, func(i, j int) bool {
			a, _ := time.Parse(time.RFC3339Nano, list[i]["created_at"].(string))
			b, _ := time.Parse(time.RFC3339Nano, list[j]["created_at"].(string))
			return a.Before(b)
		})
	}
	return out
}

func (r *callbackReceiver) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := ""
	for corr, envs := range r.got {
		for _, env := range envs {
			p, _ := env["payload"].(map[string]any)
			out += fmt.Sprintf("%s %v %v %v\n", corr, env["X-Domain-Action"], p["status"], env["created_at"])
		}
	}
	return out
}

func statuses(envs []map[string]any) []string {
	var out []string
	for _, env := range envs {
		out = append(out, env["payload"].(map[string]any)["status"].(string))
	}
	return out
}

// callbackEventsWorkflows: confirm waits for input, broken fails at its
// tool, flaky's tool fails once and then answers.
const flakyWorkflow = `{"workflow_id": "flaky", "version": "1", "nodes": [
  {"id": "start", "type": "start", "next": "call"},
  {"id": "call", "type": "task", "task": "flaky", "retry": {"max": 2, "backoff": "linear", "delay_ms": 100}, "next": "end"},
  {"id": "end", "type": "end"}]}`

// callback_events chooses the callbacks: status sends one per status the
// execution takes (running, waiting, running again when answered, then its
// end, or cancelled), error one for a tool call that failed and will be
// retried and one for the error an execution failed with, result the
// result envelope; what is not named is not sent (an input request here).
// Each is retried until accepted and carries a stable message_id.
func TestCallbackEventsChooseTheCallbacks(t *testing.T) {
	t.Parallel()
	recv := newCallbackReceiver(t)
	var flakyCalls atomic.Int32
	b := setup(t, setupOpts{allowHosts: []string{recv.Listener.Addr().String()}, secret: callbackSecret, tools: map[string]engine.ToolFunc{
		"boom": func(context.Context, engine.ToolCall) (map[string]any, error) {
			return nil, &engine.ToolError{Class: engine.ClassValidation, Err: errors.New("the document is damaged")}
		},
		"flaky": func(context.Context, engine.ToolCall) (map[string]any, error) {
			if flakyCalls.Add(1) == 1 {
				return nil, errors.New("the first call fails")
			}
			return map[string]any{"ok": true}, nil
		},
	}})
	b.define(t, inputWorkflow)
	b.define(t, brokenWorkflow)
	b.define(t, flakyWorkflow)
	start := func(workflowID, corr string, events ...string) *engine.Execution {
		return b.start(t, engine.StartParams{WorkflowID: workflowID, CorrelationID: corr, CallbackURL: recv.URL + "/cb",
			CallbackEvents: events, Input: map[string]any{"timeout": "1h"}})
	}
	answered := start("confirm", "answered", "status", "error")
	cancelled := start("confirm", "cancelled", "status")
	failed := start("broken", "failed", "error", "result")
	retried := start("flaky", "retried", "error")

	for _, x := range []*engine.Execution{answered, cancelled} {
		b.waitFor(t, x.ExecutionID, func(x *engine.Execution) bool { return x.Status == engine.StatusWaiting })
	}
	require.NoError(t, b.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
		_, err := b.engine.ProvideInputTx(context.Background(), tx, engine.InputParams{TenantID: b.tenant, ExecutionID: answered.ExecutionID, Input: map[string]any{"ok": true}})
		return err
	}))
	_, err := b.engine.Cancel(context.Background(), b.tenant, cancelled.ExecutionID, "user", "")
	require.NoError(t, err)
	for _, x := range []*engine.Execution{answered, cancelled, failed, retried} {
		b.waitFor(t, x.ExecutionID, terminal)
	}
	// Every callback was enqueued before its execution ended; once none is
	// left to deliver, the receiver has them all.
	defer func() {
		if t.Failed() {
			t.Logf("callbacks received:\n%s", recv.summary())
		}
	}()
	require.Eventually(t, func() bool {
		return countRows(t, b.pool, `SELECT count(*) FROM river_job WHERE kind = 'workflow.callback' AND state <> 'completed'`) == 0
	}, 60*time.Second, 50*time.Millisecond)

	got := recv.callbacks("answered")
	require.Equal(t, []string{"workflow.status"}, keys(got))
	require.Equal(t, []string{"running", "waiting", "running", "completed"}, unqueued(t, statuses(got["workflow.status"])))
	first := got["workflow.status"][0]
	require.Equal(t, map[string]any{"domain": "workflow", "action": "status"}, first["type"])
	require.Equal(t, "status_changed", first["event_type"])
	require.Equal(t, answered.ExecutionID, first["task_id"])
	require.Equal(t, answered.ExecutionID, first["metadata"].(map[string]any)["execution_id"])
	require.Equal(t, b.tenant, first["tenant_id"])
	var waiting map[string]any
	for _, env := range got["workflow.status"] {
		if p := env["payload"].(map[string]any); p["status"] == "waiting" {
			waiting = p
		}
	}
	require.Equal(t, "input", waiting["waiting_for"])
	require.Equal(t, "confirm", waiting["step_id"])

	require.Equal(t, []string{"running", "waiting", "cancelled"}, unqueued(t, statuses(recv.callbacks("cancelled")["workflow.status"])))

	got = recv.callbacks("failed")
	require.Equal(t, []string{"workflow.error", "workflow.result"}, keys(got))
	require.Equal(t, "failed", got["workflow.result"][0]["status"])
	failure := got["workflow.error"][0]
	require.Equal(t, map[string]any{"domain": "workflow", "action": "error"}, failure["type"])
	require.Equal(t, "execution_failed", failure["event_type"])
	fe := failure["error"].(map[string]any)
	require.Equal(t, engine.CodeToolFailed, fe["code"])
	require.Equal(t, float64(http.StatusBadRequest), fe["http_status"])
	require.Equal(t, false, fe["retryable"])
	require.Contains(t, fe["message"], "the document is damaged")
	require.Equal(t, "call", fe["details"].(map[string]any)["step_id"])
	require.Equal(t, failed.ExecutionID, fe["details"].(map[string]any)["execution_id"])

	got = recv.callbacks("retried")
	require.Equal(t, []string{"workflow.error"}, keys(got))
	re := got["workflow.error"][0]
	require.Equal(t, "step_failed", re["event_type"])
	rerr := re["error"].(map[string]any)
	require.Equal(t, true, rerr["retryable"])
	require.Equal(t, float64(100), rerr["retry_after_ms"])
	require.Equal(t, "call", rerr["details"].(map[string]any)["step_id"])
	require.Equal(t, float64(1), rerr["details"].(map[string]any)["retry_count"])
	require.Equal(t, engine.StatusCompleted, b.get(t, retried.ExecutionID).Status)
}

// unqueued drops from a status sequence the pending statuses of a run that
// waited for its lane (its lane busy when it started or resumed), checking
// that each is followed by running.
func unqueued(t *testing.T, seq []string) []string {
	t.Helper()
	var out []string
	for i, s := range seq {
		if s == "pending" {
			require.Less(t, i+1, len(seq), "%v", seq)
			require.Equal(t, "running", seq[i+1], "%v", seq)
			continue
		}
		out = append(out, s)
	}
	return out
}

func keys(m map[string][]map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// An unknown callback_events name, or callback_events without a
// callback_url, is refused when the execution starts, naming the field,
// and nothing is stored.
func TestCallbackEventsValidated(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{insertOnly: true, allowHosts: []string{"hooks.example.com"}})
	b.define(t, greetingWorkflow)
	for _, p := range []engine.StartParams{
		{CallbackURL: "https://hooks.example.com/cb", CallbackEvents: []string{"status", "progress"}},
		{CallbackEvents: []string{"status"}},
	} {
		p.TenantID, p.WorkflowID = b.tenant, "greeting"
		err := b.engine.WithTx(t.Context(), func(tx pgx.Tx) error {
			_, err := b.engine.StartExecution(t.Context(), tx, p)
			return err
		})
		var ie *engine.InputError
		require.ErrorAs(t, err, &ie, "%v", p.CallbackEvents)
		require.Equal(t, "payload.execution_options.callback_events", ie.Field)
	}
	require.Zero(t, countRows(t, b.pool, `SELECT count(*) FROM agent_execution WHERE tenant_id = $1`, b.tenant))
}
