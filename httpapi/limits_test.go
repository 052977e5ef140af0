package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/engine/workflow"
)

// limitedTables are the tables a refused request must leave as they were.
var limitedTables = []string{"workflow_definition", "agent_execution", "thread", "thread_message",
	"idempotency_key", "inbound_event", "execution_event", "lane"}

// fingerprint is every row of limitedTables, hashed per table.
func (b *testBundle) fingerprint(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, table := range limitedTables {
		var n int
		var sum string
		require.NoError(t, b.pool.QueryRow(context.Background(), fmt.Sprintf(
			`SELECT count(*), coalesce(md5(string_agg(x::text, '|' ORDER BY x::text)), '') FROM %s x`, table)).Scan(&n, &sum))
		out[table] = fmt.Sprintf("%d %s", n, sum)
	}
	return out
}

// errorDetails returns the error envelope's details.
func (r *response) errorDetails() map[string]any {
	e, _ := r.body["error"].(map[string]any)
	d, _ := e["details"].(map[string]any)
	return d
}

// A workflow whose ids are all at the 255-byte limit.
var (
	idAtLimit   = strings.Repeat("a", 255)
	idOverLimit = strings.Repeat("x", 300_000)
)

const limitsSimple = `{"workflow_id": "simple", "version": "1", "nodes": [
  {"id": "start", "type": "start", "next": "end"}, {"id": "end", "type": "end"}]}`

// Every id and name a tenant sends, every queue setting and wait timeout,
// and an execution's input and context are bounded: over the limit is a 400
// envelope naming the field, and the database is left exactly as it was;
// just at the limit still works.
func TestHostileInputs(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{limits: workflow.Limits{VariablesBytes: 64 << 10, DefinitionBytes: 32 << 10}})
	b.define(t, limitsSimple)
	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/threads", body: envelope(map[string]any{
		"thread_id": "th", "channel": "whatsapp", "contact": "+5215550001", "default_workflow_id": "simple"})})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)

	execute := func(payload map[string]any) map[string]any {
		p := map[string]any{"workflow_id": "simple"}
		for k, v := range payload {
			p[k] = v
		}
		return envelope(p)
	}
	bigObject := map[string]any{"k": strings.Repeat("v", 64<<10)}
	hugeName := map[string]any{}
	require.NoError(t, json.Unmarshal([]byte(limitsSimple), &hugeName))
	hugeName["name"] = strings.Repeat("n", 32<<10)
	withMeta := func(env map[string]any, meta map[string]any) map[string]any {
		env["metadata"] = meta
		return env
	}
	withEnv := func(env map[string]any, k string, v any) map[string]any {
		env[k] = v
		return env
	}
	wait := map[string]any{"wait_for_completion": true}
	const (
		executePath = "/api/v1/workflow/execute"
		eventsPath  = "/api/v1/events"
		threadsPath = "/api/v1/threads"
		inboundPath = "/api/v1/threads/th/messages"
		queuePath   = "/api/v1/threads/th/queue"
	)
	cases := []struct {
		name         string
		method, path string
		body         any
		headers      map[string]string
		code, field  string
	}{
		{"execute execution_id", http.MethodPost, executePath, execute(map[string]any{"execution_id": idOverLimit}), nil, "workflow.execute.invalid_request", "payload.execution_id"},
		{"execute thread_id", http.MethodPost, executePath, execute(map[string]any{"thread_id": idOverLimit}), nil, "workflow.execute.invalid_request", "payload.thread_id"},
		{"execute conversation_id", http.MethodPost, executePath, withMeta(execute(nil), map[string]any{"conversation_id": idOverLimit}), nil, "workflow.execute.invalid_request", "metadata.conversation_id"},
		{"execute workflow_id", http.MethodPost, executePath, execute(map[string]any{"workflow_id": idOverLimit}), nil, "workflow.execute.invalid_request", "payload.workflow_id"},
		{"execute version", http.MethodPost, executePath, execute(map[string]any{"version": idOverLimit}), nil, "workflow.execute.invalid_request", "payload.version"},
		{"execute lane", http.MethodPost, executePath, execute(map[string]any{"lane": idOverLimit}), nil, "workflow.execute.invalid_request", "payload.lane"},
		{"envelope message_id", http.MethodPost, executePath, withEnv(execute(nil), "message_id", idOverLimit), nil, "workflow.execute.invalid_request", "message_id"},
		{"envelope correlation_id", http.MethodPost, executePath, withEnv(execute(nil), "correlation_id", idOverLimit), nil, "workflow.execute.invalid_request", "correlation_id"},
		{"X-Correlation-ID", http.MethodPost, executePath, execute(nil), map[string]string{"X-Correlation-ID": strings.Repeat("c", 256)}, "workflow.execute.invalid_request", "X-Correlation-ID"},
		{"X-Tenant-ID", http.MethodPost, executePath, execute(nil), map[string]string{"X-Tenant-ID": strings.Repeat("t", 256)}, "workflow.access.invalid_tenant", "X-Tenant-ID"},
		{"execute input", http.MethodPost, executePath, execute(map[string]any{"input": bigObject}), nil, "workflow.execute.invalid_request", "payload.input"},
		{"execute context", http.MethodPost, executePath, execute(map[string]any{"context": bigObject}), nil, "workflow.execute.invalid_request", "payload.context"},
		{"timeout_ms over", http.MethodPost, executePath, withMeta(execute(map[string]any{"execution_options": wait}), map[string]any{"timeout_ms": 120_001}), nil, "workflow.execute.invalid_request", "metadata.timeout_ms"},
		{"timeout_ms huge", http.MethodPost, executePath, withMeta(execute(map[string]any{"execution_options": wait}), map[string]any{"timeout_ms": 9e18}), nil, "workflow.execute.invalid_request", "metadata.timeout_ms"},
		{"timeout_ms zero", http.MethodPost, executePath, withMeta(execute(map[string]any{"execution_options": wait}), map[string]any{"timeout_ms": 0}), nil, "workflow.execute.invalid_request", "metadata.timeout_ms"},
		{"timeout_ms text", http.MethodPost, executePath, withMeta(execute(map[string]any{"execution_options": wait}), map[string]any{"timeout_ms": "soon"}), nil, "workflow.execute.invalid_request", "metadata.timeout_ms"},
		{"definition payload", http.MethodPost, "/api/v1/workflow/definitions", envelope(hugeName), nil, "workflow.define.validation_error", "payload"},
		{"validate payload", http.MethodPost, "/api/v1/workflow/validate", envelope(hugeName), nil, "workflow.define.validation_error", "payload"},
		{"event event_type", http.MethodPost, eventsPath, envelope(map[string]any{"event_type": idOverLimit, "event_id": "e1", "thread_id": "th"}), nil, "event.publish.invalid_request", "payload.event_type"},
		{"event event_id", http.MethodPost, eventsPath, envelope(map[string]any{"event_type": "MESSAGE_RECEIVED", "event_id": idOverLimit, "thread_id": "th", "data": map[string]any{"text": "hi"}}), nil, "event.publish.invalid_request", "payload.event_id"},
		{"event execution_id", http.MethodPost, eventsPath, envelope(map[string]any{"event_type": "USER_INPUT", "event_id": "e1", "execution_id": idOverLimit}), nil, "event.publish.invalid_request", "payload.execution_id"},
		{"event thread_id", http.MethodPost, eventsPath, envelope(map[string]any{"event_type": "MESSAGE_RECEIVED", "event_id": "e1", "thread_id": idOverLimit, "data": map[string]any{"text": "hi"}}), nil, "event.publish.invalid_request", "payload.thread_id"},
		{"event data.channel", http.MethodPost, eventsPath, envelope(map[string]any{"event_type": "MESSAGE_RECEIVED", "event_id": "e1", "thread_id": "th", "data": map[string]any{"text": "hi", "channel": idOverLimit}}), nil, "event.publish.invalid_request", "payload.data.channel"},
		{"inbound message_id", http.MethodPost, inboundPath, envelope(map[string]any{"text": "hi", "message_id": idOverLimit}), nil, "thread.inbound.invalid_request", "payload.message_id"},
		{"inbound channel", http.MethodPost, inboundPath, envelope(map[string]any{"text": "hi", "channel": idOverLimit}), nil, "thread.inbound.invalid_request", "payload.channel"},
		{"inbound text too large a run", http.MethodPost, inboundPath, envelope(map[string]any{"text": strings.Repeat("t", 40<<10)}), nil, "thread.inbound.invalid_request", "payload.text"},
		{"event text too large a run", http.MethodPost, eventsPath, envelope(map[string]any{"event_type": "MESSAGE_RECEIVED", "event_id": "e1", "thread_id": "th", "data": map[string]any{"text": strings.Repeat("t", 40<<10)}}), nil, "event.publish.invalid_request", "payload.data.text"},
		{"/queue cap over", http.MethodPost, inboundPath, envelope(map[string]any{"text": "/queue collect cap:1001"}), nil, "thread.inbound.invalid_request", "payload.text"},
		{"/queue cap zero", http.MethodPost, inboundPath, envelope(map[string]any{"text": "/queue cap:0"}), nil, "thread.inbound.invalid_request", "payload.text"},
		{"/queue cap text", http.MethodPost, inboundPath, envelope(map[string]any{"text": "/queue cap:ten"}), nil, "thread.inbound.invalid_request", "payload.text"},
		{"/queue debounce 9e18", http.MethodPost, inboundPath, envelope(map[string]any{"text": "/queue debounce:9e18"}), nil, "thread.inbound.invalid_request", "payload.text"},
		{"/queue debounce ms over", http.MethodPost, inboundPath, envelope(map[string]any{"text": "/queue debounce:9223372036854775807"}), nil, "thread.inbound.invalid_request", "payload.text"},
		{"/queue debounce over", http.MethodPost, inboundPath, envelope(map[string]any{"text": "/queue debounce:61m"}), nil, "thread.inbound.invalid_request", "payload.text"},
		{"/queue debounce negative", http.MethodPost, inboundPath, envelope(map[string]any{"text": "/queue debounce:-1s"}), nil, "thread.inbound.invalid_request", "payload.text"},
		{"/queue mode", http.MethodPost, inboundPath, envelope(map[string]any{"text": "/queue " + idOverLimit}), nil, "thread.inbound.invalid_request", "payload.text"},
		{"/queue as event", http.MethodPost, eventsPath, envelope(map[string]any{"event_type": "MESSAGE_RECEIVED", "event_id": "e1", "thread_id": "th", "data": map[string]any{"text": "/queue cap:5000"}}), nil, "event.publish.invalid_request", "payload.data.text"},
		{"thread thread_id", http.MethodPost, threadsPath, envelope(map[string]any{"thread_id": idOverLimit, "channel": "sms", "contact": "1"}), nil, "thread.upsert.invalid_request", "payload.thread_id"},
		{"thread channel", http.MethodPost, threadsPath, envelope(map[string]any{"channel": idOverLimit, "contact": "1"}), nil, "thread.upsert.invalid_request", "payload.channel"},
		{"thread contact", http.MethodPost, threadsPath, envelope(map[string]any{"channel": "sms", "contact": idOverLimit}), nil, "thread.upsert.invalid_request", "payload.contact"},
		{"thread default_workflow_id", http.MethodPost, threadsPath, envelope(map[string]any{"channel": "sms", "contact": "1", "default_workflow_id": idOverLimit}), nil, "thread.upsert.invalid_request", "payload.default_workflow_id"},
		{"thread queue mode", http.MethodPost, threadsPath, envelope(map[string]any{"channel": "sms", "contact": "1", "queue": map[string]any{"mode": idOverLimit}}), nil, "thread.upsert.invalid_request", "payload.queue.mode"},
		{"thread queue drop", http.MethodPost, threadsPath, envelope(map[string]any{"channel": "sms", "contact": "1", "queue": map[string]any{"drop": idOverLimit}}), nil, "thread.upsert.invalid_request", "payload.queue.drop"},
		{"thread queue cap", http.MethodPost, threadsPath, envelope(map[string]any{"channel": "sms", "contact": "1", "queue": map[string]any{"cap": 1001}}), nil, "thread.upsert.invalid_request", "payload.queue.cap"},
		{"thread queue debounce", http.MethodPost, threadsPath, envelope(map[string]any{"channel": "sms", "contact": "1", "queue": map[string]any{"debounce_ms": 3_600_001}}), nil, "thread.upsert.invalid_request", "payload.queue.debounce_ms"},
		{"update queue on existing thread", http.MethodPost, threadsPath, envelope(map[string]any{"channel": "whatsapp", "contact": "+5215550001", "queue": map[string]any{"cap": 1001}}), nil, "thread.upsert.invalid_request", "payload.queue.cap"},
		{"PUT queue cap", http.MethodPut, queuePath, envelope(map[string]any{"cap": 1001}), nil, "thread.queue.invalid_request", "payload.cap"},
		{"PUT queue debounce huge", http.MethodPut, queuePath, envelope(map[string]any{"debounce_ms": 9_000_000_000_000_000_000}), nil, "thread.queue.invalid_request", "payload.debounce_ms"},
		{"PUT queue debounce negative", http.MethodPut, queuePath, envelope(map[string]any{"debounce_ms": -1}), nil, "thread.queue.invalid_request", "payload.debounce_ms"},
		{"PUT queue mode", http.MethodPut, queuePath, envelope(map[string]any{"mode": idOverLimit}), nil, "thread.queue.invalid_request", "payload.mode"},
		{"input node_id", http.MethodPost, "/api/v1/workflow/executions/nope/input", envelope(map[string]any{"input_data": map[string]any{}, "node_id": idOverLimit}), nil, "workflow.input.invalid_request", "payload.node_id"},
		{"cancel cancelled_by", http.MethodPost, "/api/v1/workflow/executions/nope/cancel", envelope(map[string]any{"cancelled_by": idOverLimit}), nil, "workflow.cancel.invalid_request", "payload.cancelled_by"},
		{"path execution_id", http.MethodGet, "/api/v1/workflow/executions/" + idOverLimit, nil, nil, "workflow.status.invalid_request", "execution_id"},
		{"path execution_id on input", http.MethodPost, "/api/v1/workflow/executions/" + idOverLimit + "/input", envelope(map[string]any{"input_data": map[string]any{}}), nil, "workflow.input.invalid_request", "execution_id"},
		{"path thread_id", http.MethodGet, "/api/v1/threads/" + idOverLimit, nil, nil, "thread.get.invalid_request", "thread_id"},
		{"path thread_id on inbound", http.MethodPost, "/api/v1/threads/" + idOverLimit + "/messages", envelope(map[string]any{"text": "hi"}), nil, "thread.inbound.invalid_request", "thread_id"},
		{"path thread_id on queue", http.MethodPut, "/api/v1/threads/" + idOverLimit + "/queue", envelope(map[string]any{"cap": 2}), nil, "thread.queue.invalid_request", "thread_id"},
		{"path workflow_id", http.MethodGet, "/api/v1/workflow/definitions/" + idOverLimit, nil, nil, "workflow.get.invalid_request", "workflow_id"},
		{"query version", http.MethodGet, "/api/v1/workflow/definitions/simple?version=" + idOverLimit, nil, nil, "workflow.get.invalid_request", "version"},
		{"query workflow_id", http.MethodGet, "/api/v1/workflow/executions?workflow_id=" + idOverLimit, nil, nil, "workflow.list_executions.invalid_request", "workflow_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := b.fingerprint(t)
			r := b.do(t, call{method: tc.method, path: tc.path, body: tc.body, headers: tc.headers})
			require.Equal(t, http.StatusBadRequest, r.status, "%.2000s", r.raw)
			require.Equal(t, tc.code, r.errorCode(), "%.2000s", r.raw)
			msg := r.body["error"].(map[string]any)["message"].(string)
			require.Less(t, len(msg), 1000, "the message does not echo the value")
			if tc.code == "workflow.define.validation_error" {
				problems := r.errorDetails()["problems"].([]any)
				require.Equal(t, tc.field, problems[0].(map[string]any)["field"])
				require.Contains(t, msg, "limits.definitionBytes")
			} else {
				require.Equal(t, tc.field, r.errorDetails()["field"], "%.2000s", r.raw)
				require.Contains(t, msg, tc.field, "the message names the field")
			}
			require.LessOrEqual(t, len(r.header.Get("X-Correlation-ID")), 255)
			require.Equal(t, before, b.fingerprint(t), "a refused request changed the database")
		})
	}

	// Just at the limits, everything works.
	atLimit := map[string]any{}
	require.NoError(t, json.Unmarshal([]byte(limitsSimple), &atLimit))
	atLimit["workflow_id"], atLimit["version"] = idAtLimit, strings.Repeat("v", 255)
	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/definitions", body: envelope(atLimit)})
	require.Equal(t, http.StatusCreated, r.status, "%.2000s", r.raw)
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/definitions/" + idAtLimit + "?version=" + strings.Repeat("v", 255)})
	require.Equal(t, http.StatusOK, r.status, "%.2000s", r.raw)

	input := map[string]any{"k": ""}
	input["k"] = strings.Repeat("i", 64<<10-len(`{"k":""}`))
	raw, _ := json.Marshal(input)
	require.Len(t, raw, 64<<10)
	env := execute(map[string]any{"workflow_id": idAtLimit, "version": strings.Repeat("v", 255), "execution_id": strings.Repeat("e", 255),
		"thread_id": strings.Repeat("t", 255), "lane": strings.Repeat("l", 255), "input": input, "context": input, "execution_options": wait})
	env["message_id"], env["correlation_id"] = strings.Repeat("m", 255), strings.Repeat("c", 255)
	env["metadata"] = map[string]any{"timeout_ms": 120_000}
	r = b.do(t, call{method: http.MethodPost, path: executePath, body: env})
	require.Equal(t, http.StatusOK, r.status, "%.2000s", r.raw)
	require.Equal(t, "completed", r.data()["status"], "%.2000s", r.raw)
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/executions/" + strings.Repeat("e", 255)})
	require.Equal(t, http.StatusOK, r.status, "%.2000s", r.raw)

	r = b.do(t, call{method: http.MethodPost, path: threadsPath, body: envelope(map[string]any{
		"thread_id": strings.Repeat("T", 255), "channel": strings.Repeat("C", 255), "contact": strings.Repeat("P", 255),
		"default_workflow_id": idAtLimit, "queue": map[string]any{"mode": "collect", "cap": 1000, "debounce_ms": 3_600_000}})})
	require.Equal(t, http.StatusCreated, r.status, "%.2000s", r.raw)
	require.Equal(t, float64(1000), r.data()["queue"].(map[string]any)["cap"])
	r = b.do(t, call{method: http.MethodPut, path: queuePath, body: envelope(map[string]any{"cap": 1000, "debounce_ms": 0})})
	require.Equal(t, http.StatusOK, r.status, "%.2000s", r.raw)
	r = b.do(t, call{method: http.MethodPost, path: inboundPath, body: envelope(map[string]any{"text": "/queue collect cap:1000 debounce:1h", "message_id": idAtLimit})})
	require.Equal(t, http.StatusAccepted, r.status, "%.2000s", r.raw)
	require.Equal(t, engine.OutcomeCommand, r.data()["outcome"])
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/threads/th"})
	require.Equal(t, http.StatusOK, r.status, "%.2000s", r.raw)
	queue := r.data()["queue"].(map[string]any)
	require.Equal(t, float64(1000), queue["cap"])
	require.Equal(t, float64(3_600_000), queue["debounce_ms"])
	r = b.do(t, call{method: http.MethodPost, path: eventsPath, body: envelope(map[string]any{"event_type": "MESSAGE_RECEIVED",
		"event_id": strings.Repeat("E", 255), "thread_id": "th", "data": map[string]any{"text": "/queue reset", "channel": strings.Repeat("W", 255)}})})
	require.Equal(t, http.StatusAccepted, r.status, "%.2000s", r.raw)
}

// conversation_history keeps the newest limits.historyEntries entries.
func TestConversationHistoryIsBounded(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}, 1), make(chan struct{})
	b := setup(t, setupOpts{limits: workflow.Limits{HistoryEntries: 5}, tools: map[string]engine.ToolFunc{
		"gate": func(ctx context.Context, _ engine.ToolCall) (map[string]any, error) {
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return map[string]any{}, nil
		},
	}})
	b.define(t, `{"workflow_id": "agent", "version": "1", "nodes": [
  {"id": "start", "type": "start", "next": "hold"},
  {"id": "hold", "type": "task", "task": "gate", "next": "end"},
  {"id": "end", "type": "end"}]}`)
	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/threads", body: envelope(map[string]any{
		"thread_id": "s", "channel": "whatsapp", "contact": "+5215550001", "default_workflow_id": "agent",
		"queue": map[string]any{"mode": "steer", "debounce_ms": 0}})})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)
	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/threads/s/messages", body: envelope(map[string]any{"text": "hola"})})
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	require.Equal(t, engine.OutcomeStarted, r.data()["outcome"])
	executionID := r.data()["execution_id"].(string)
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the run never reached its tool call")
	}
	_, err := b.pool.Exec(context.Background(), `UPDATE agent_execution SET conversation_history = $2 WHERE execution_id = $1`,
		executionID, `[{"direction": "in", "body": "old1"}, {"direction": "in", "body": "old2"}]`)
	require.NoError(t, err)
	for i := 1; i <= 4; i++ {
		r = b.do(t, call{method: http.MethodPost, path: "/api/v1/threads/s/messages", body: envelope(map[string]any{"text": fmt.Sprintf("s%d", i)})})
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
		require.Equal(t, engine.OutcomeSteered, r.data()["outcome"])
	}
	close(release)
	require.Equal(t, "completed", b.waitTerminal(t, executionID)["status"])
	var history []map[string]any
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT conversation_history FROM agent_execution WHERE execution_id = $1`, executionID).Scan(&history))
	var bodies []string
	for _, h := range history {
		bodies = append(bodies, h["body"].(string))
	}
	require.Equal(t, []string{"old2", "s1", "s2", "s3", "s4"}, bodies, "the oldest entry is dropped, the newest five kept")
}

// A tenant may use at most limits.lanesPerTenant lanes of its own: past
// that, an execute is refused with the limit named, and nothing is written.
func TestLanesPerTenantBound(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{limits: workflow.Limits{LanesPerTenant: 1}})
	b.define(t, limitsSimple)
	execute := func(id, lane string) *response {
		return b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute", body: envelope(map[string]any{
			"workflow_id": "simple", "execution_id": id, "lane": lane})})
	}
	r := execute("x1", "own-1")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	r = execute("x2", "own-2")
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.raw)
	require.Equal(t, "workflow.execute.invalid_request", r.errorCode())
	details := r.body["error"].(map[string]any)["details"].(map[string]any)
	require.Equal(t, "limits.lanesPerTenant", details["limit"])
	require.EqualValues(t, 1, details["max"])
	require.Equal(t, http.StatusOK, b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/executions/x1"}).status)
	require.Equal(t, http.StatusNotFound, b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/executions/x2"}).status, "nothing written")
	r = execute("x3", "own-1")
	require.Equal(t, http.StatusAccepted, r.status, "the tenant's lane still works: %s", r.raw)
	r = execute("x4", "main")
	require.Equal(t, http.StatusAccepted, r.status, "and the shared lanes: %s", r.raw)
}
