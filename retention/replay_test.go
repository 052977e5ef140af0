package retention_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
	"github.com/batonrun/baton/retention"
)

// ageRows moves created_at of the tenant's rows of table back by ago.
func (b *bundle) ageRows(t *testing.T, table string, ago time.Duration) {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), `UPDATE `+table+` SET created_at = created_at - make_interval(secs => $2) WHERE tenant_id = $1`,
		b.tenant, ago.Seconds())
	require.NoError(t, err)
}

// execute posts workflow.execute with a message_id and returns the
// execution id and whether the answer was a replay.
func (b *bundle) execute(t *testing.T, url, messageID string) (string, bool) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"message_id": messageID, "payload": map[string]any{"workflow_id": "talk"}})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url+"/api/v1/workflow/execute", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant-ID", b.tenant)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var env struct {
		Data struct {
			ExecutionID string `json:"execution_id"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&env))
	return env.Data.ExecutionID, resp.Header.Get("X-Idempotent-Replay") == "true"
}

// A request's message_id replays the first answer inside the replay window,
// sweeps included, and is forgotten after it: the same request is new.
func TestRequestMessageIDReplaysInsideTheWindowOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, talk)
	api, err := httpapi.New(httpapi.Config{Engine: b.engine, Pool: b.pool, Insecure: true})
	require.NoError(t, err)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)

	first, replay := b.execute(t, srv.URL, "req-1")
	require.False(t, replay)
	b.ageRows(t, "idempotency_key", day-time.Hour)
	require.Zero(t, b.sweep(t, retention.Config{}).Removed[retention.TableIdempotencyKeys])
	again, replay := b.execute(t, srv.URL, "req-1")
	require.True(t, replay)
	require.Equal(t, first, again)

	b.ageRows(t, "idempotency_key", 2*time.Hour)
	require.EqualValues(t, 1, b.sweep(t, retention.Config{}).Removed[retention.TableIdempotencyKeys])
	fresh, replay := b.execute(t, srv.URL, "req-1")
	require.False(t, replay)
	require.NotEqual(t, first, fresh)
	fresher, replay := b.execute(t, srv.URL, "req-1")
	require.True(t, replay, "the new request starts a window of its own")
	require.Equal(t, fresh, fresher)
}

// An inbound message_id replays the router's first answer inside the
// window and is forgotten after it: the same message starts a new run.
func TestInboundMessageIDReplaysInsideTheWindowOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, talk)
	b.thread(t, "th", "talk")

	first := b.inbound(t, "th", "hola", "wamid-1")
	require.Equal(t, engine.OutcomeStarted, first.Outcome)
	b.waitFor(t, *first.ExecutionID, terminal)
	b.ageRows(t, "thread_message", day-time.Hour)
	require.Zero(t, b.sweep(t, retention.Config{}).Removed[retention.MessageIDs])
	require.Equal(t, first, b.inbound(t, "th", "hola", "wamid-1"))

	b.ageRows(t, "thread_message", 2*time.Hour)
	require.EqualValues(t, 1, b.sweep(t, retention.Config{}).Removed[retention.MessageIDs])
	fresh := b.inbound(t, "th", "hola", "wamid-1")
	require.Equal(t, engine.OutcomeStarted, fresh.Outcome)
	require.NotEqual(t, *first.ExecutionID, *fresh.ExecutionID)
	require.True(t, b.exists(t, *first.ExecutionID), "the first run and its message stay: only the message_id is forgotten")
	require.Equal(t, fresh, b.inbound(t, "th", "hola", "wamid-1"))
}

// An event_id replays its first answer inside the window and is forgotten
// after it: the same event resumes the execution's next wait.
func TestEventIDReplaysInsideTheWindowOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, `{"workflow_id": "twice", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "w1"},
	  {"id": "w1", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "go"}, "next": "w2"},
	  {"id": "w2", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "go"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	x := b.waitFor(t, b.start(t, engine.StartParams{WorkflowID: "twice"}).ExecutionID, waiting)
	publish := func() *engine.EventResult {
		res, err := b.engine.PublishEvent(context.Background(), engine.PublishEventParams{TenantID: b.tenant, EventType: engine.EventTypeEventCompleted,
			EventID: "ev-1", ExecutionID: x.ExecutionID, Data: map[string]any{"event_id": "go"}})
		require.NoError(t, err)
		return res
	}
	require.Equal(t, []string{x.ExecutionID}, publish().Resumed)
	b.waitFor(t, x.ExecutionID, func(x *engine.Execution) bool { return waiting(x) && *x.CurrentNodeID == "w2" })
	b.ageRows(t, "inbound_event", day-time.Hour)
	require.Zero(t, b.sweep(t, retention.Config{}).Removed[retention.TableInboundEvents])
	require.Equal(t, []string{x.ExecutionID}, publish().Resumed)
	require.Equal(t, "w2", *b.get(t, x.ExecutionID).CurrentNodeID, "a replay resumes nothing")

	b.ageRows(t, "inbound_event", 2*time.Hour)
	require.EqualValues(t, 1, b.sweep(t, retention.Config{}).Removed[retention.TableInboundEvents])
	require.Equal(t, []string{x.ExecutionID}, publish().Resumed)
	done := b.waitFor(t, x.ExecutionID, terminal)
	require.Equal(t, []string{"start", "w1", "w2", "end"}, done.NodePath)
}
