package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

// A callback receiver that answers 500 to the first two deliveries of every
// message still ends with exactly one verified result per execution, in the
// shape of the result callback (docs/api.md, "Callbacks").
func TestCallbackRetriedUntilAccepted(t *testing.T) {
	t.Parallel()
	const secret = "callback-secret-of-32-bytes-long"
	var (
		mu       sync.Mutex
		tries    = map[string]int{}              // message_id → deliveries seen
		accepted = map[string][]map[string]any{} // execution_id → accepted envelopes
		badSig   int
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if engine.VerifySignature([]byte(secret), r.Header.Get(engine.SignatureHeader), body, 0, time.Now()) != nil {
			badSig++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var env map[string]any
		require.NoError(t, json.Unmarshal(body, &env))
		id := env["message_id"].(string)
		tries[id]++
		if tries[id] <= 2 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if tries[id] == 3 { // a receiver dedupes by message_id
			execID := env["metadata"].(map[string]any)["execution_id"].(string)
			accepted[execID] = append(accepted[execID], env)
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(recv.Close)

	b := setup(t, setupOpts{allowHosts: []string{recv.Listener.Addr().String()}, secret: secret})
	b.define(t, greetingWorkflow)
	var ids []string
	for i := 0; i < 3; i++ {
		x := b.start(t, engine.StartParams{WorkflowID: "greeting", CallbackURL: recv.URL + "/callback", CorrelationID: "corr-1",
			Input: map[string]any{"name": "Ana", "score": 7, "customer": map[string]any{"tier": "gold"}}})
		ids = append(ids, x.ExecutionID)
	}
	for _, id := range ids {
		b.waitFor(t, id, terminal)
	}
	require.Eventually(t, func() bool {
		return countRows(t, b.pool, `SELECT count(*) FROM river_job WHERE kind = 'workflow.callback' AND state = 'completed'`) == 3
	}, 30*time.Second, 50*time.Millisecond)

	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, badSig)
	require.Len(t, accepted, 3)
	for _, id := range ids {
		require.Len(t, accepted[id], 1, "execution %s", id)
		env := accepted[id][0]
		require.Equal(t, "completed", env["status"])
		require.Equal(t, map[string]any{"domain": "workflow", "action": "result"}, env["type"])
		require.Equal(t, "corr-1", env["correlation_id"])
		require.Equal(t, b.tenant, env["tenant_id"])
		details := env["payload"].(map[string]any)["execution_details"].(map[string]any)
		require.Equal(t, []any{"start", "set", "decide", "vip", "end"}, details["node_path"])
		require.Equal(t, float64(5), details["steps_completed"])
		require.Nil(t, details["error"])
		require.Equal(t, 3, tries[env["message_id"].(string)])
	}
	require.Equal(t, 3, countRows(t, b.pool, `SELECT count(*) FROM river_job WHERE kind = 'workflow.callback' AND queue = 'low'`))
}

// A callback_url whose host or port is not allowed is refused when the
// execution starts, and nothing is stored. A host alone allows ports 80 and
// 443; host:port that port only.
func TestCallbackHostNotAllowed(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{insertOnly: true, allowHosts: []string{"hooks.example.com", "*.trusted.test:9000", "127.0.0.1:6000"}})
	b.define(t, greetingWorkflow)
	for raw, ok := range map[string]bool{
		"https://hooks.example.com/cb":      true,
		"http://hooks.example.com/cb":       true,
		"https://hooks.example.com:443/cb":  true,
		"http://a.trusted.test:9000/cb":     true,
		"http://127.0.0.1:6000/cb":          true,
		"https://evil.example.com/cb":       false,
		"http://169.254.169.254/latest":     false,
		"ftp://hooks.example.com/cb":        false,
		"https://hooks.example.com.evil":    false,
		"https://hooks.example.com:8443/cb": false,
		"http://hooks.example.com:5432/":    false,
		"https://a.trusted.test/cb":         false,
		"http://127.0.0.1:5432/":            false,
		"http://127.0.0.1:6379/":            false,
		"http://127.0.0.1/cb":               false,
		"http://hooks.example.com:0/cb":     false,
	} {
		err := b.engine.WithTx(t.Context(), func(tx pgx.Tx) error {
			_, err := b.engine.StartExecution(t.Context(), tx, engine.StartParams{TenantID: b.tenant, WorkflowID: "greeting", CallbackURL: raw})
			return err
		})
		if ok {
			require.NoError(t, err, raw)
			continue
		}
		var ie *engine.InputError
		require.ErrorAs(t, err, &ie, raw)
		require.Equal(t, "payload.execution_options.callback_url", ie.Field)
	}
	require.Equal(t, 5, countRows(t, b.pool, `SELECT count(*) FROM agent_execution WHERE tenant_id = $1`, b.tenant))
}

// An execution that asks for input calls back with the input request, then,
// once answered and ended, with its result.
func TestInputRequestCallback(t *testing.T) {
	t.Parallel()
	const secret = "callback-secret-of-32-bytes-long"
	var (
		mu  sync.Mutex
		got []map[string]any
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if engine.VerifySignature([]byte(secret), r.Header.Get(engine.SignatureHeader), body, 0, time.Now()) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var env map[string]any
		_ = json.Unmarshal(body, &env)
		env["X-Domain-Action"] = r.Header.Get("X-Domain-Action")
		mu.Lock()
		got = append(got, env)
		mu.Unlock()
	}))
	t.Cleanup(recv.Close)
	b := setup(t, setupOpts{allowHosts: []string{recv.Listener.Addr().String()}, secret: secret})
	b.define(t, `{"workflow_id": "ask", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "confirm"},
	  {"id": "confirm", "type": "action", "actionType": "request_input",
	   "parameters": {"prompt": "¿Desea continuar?", "input_type": "confirm", "timeout": "5m"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	x := b.start(t, engine.StartParams{WorkflowID: "ask", CallbackURL: recv.URL + "/cb"})
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 }, 20*time.Second, 20*time.Millisecond)
	mu.Lock()
	req := got[0]
	mu.Unlock()
	require.Equal(t, "workflow.input_request", req["X-Domain-Action"])
	require.Equal(t, map[string]any{"domain": "workflow", "action": "input_request"}, req["type"])
	data := req["data"].(map[string]any)
	require.Equal(t, x.ExecutionID, data["execution_id"])
	require.Equal(t, "¿Desea continuar?", data["prompt"])
	require.Equal(t, "confirm", data["input_type"])
	require.Equal(t, "confirm", data["step_id"])
	require.Equal(t, float64(5*time.Minute/time.Millisecond), data["timeout_ms"])
	// data.request_id names the input request, the one the execution shows
	// and an answer may quote; the envelope's request_id is the callback's.
	requestID, _ := data["request_id"].(string)
	require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, requestID)
	require.NotEqual(t, req["request_id"], requestID)
	var waiting map[string]any
	require.NoError(t, json.Unmarshal(b.get(t, x.ExecutionID).WaitingData, &waiting))
	require.Equal(t, requestID, waiting["request_id"])

	answer := func(id string) error {
		return b.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
			_, err := b.engine.ProvideInputTx(context.Background(), tx, engine.InputParams{TenantID: b.tenant, ExecutionID: x.ExecutionID,
				InputRequestID: id, Input: map[string]any{"user_confirmation": true}})
			return err
		})
	}
	var conflict *engine.ConflictError
	require.ErrorAs(t, answer("00000000-0000-4000-8000-000000000000"), &conflict)
	require.Equal(t, "workflow.input.not_waiting", conflict.Code)
	require.Equal(t, engine.StatusWaiting, b.get(t, x.ExecutionID).Status)
	require.NoError(t, answer(requestID))
	require.Equal(t, engine.StatusCompleted, b.waitFor(t, x.ExecutionID, terminal).Status)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 2 }, 20*time.Second, 20*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, "workflow.result", got[1]["X-Domain-Action"])
}

// A callback whose allowed host answers 301, 302, 307 or 308 towards a port
// or a host outside callbacks.allowHosts (or anywhere else) is not
// followed: the target gets nothing, the redirect is a refused delivery
// (the job is cancelled, not retried), and Baton's POST reached only the
// allowed host, once.
func TestCallbackRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	target := newCountingServer(t, nil)
	var (
		mu        sync.Mutex
		first     = map[string]int{} // callback path → POSTs
		elsewhere int
	)
	redirector := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/elsewhere" {
			elsewhere++
			return
		}
		first[r.URL.Path]++
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		http.Redirect(w, r, r.URL.Query().Get("to"), code)
	})
	b := setup(t, setupOpts{allowHosts: []string{"127.0.0.1:" + redirector.port()}, secret: "callback-secret-of-32-bytes-long"})
	b.define(t, greetingWorkflow)
	targets := map[string]string{
		"port": "http://127.0.0.1:" + target.port() + "/stolen", // allowed host, port outside the list
		"host": "http://localhost:" + target.port() + "/stolen", // a host outside the list
		"same": redirector.URL + "/elsewhere",                   // allowed, and still not followed
	}
	var ids []string
	for _, code := range []int{301, 302, 307, 308} {
		for name, to := range targets {
			cb := fmt.Sprintf("%s/cb-%d-%s?code=%d&to=%s", redirector.URL, code, name, code, url.QueryEscape(to))
			x := b.start(t, engine.StartParams{WorkflowID: "greeting", CallbackURL: cb,
				Input: map[string]any{"name": "Ana", "score": 7, "customer": map[string]any{"tier": "gold"}}})
			ids = append(ids, x.ExecutionID)
		}
	}
	for _, id := range ids {
		b.waitFor(t, id, terminal)
	}
	require.Eventually(t, func() bool {
		return countRows(t, b.pool, `SELECT count(*) FROM river_job WHERE kind = 'workflow.callback' AND state = 'cancelled'`) == len(ids)
	}, 30*time.Second, 50*time.Millisecond)
	require.Zero(t, target.requests.Load())
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, elsewhere)
	require.Len(t, first, len(ids))
	for path, n := range first {
		require.Equal(t, 1, n, path)
	}
}
