package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
	"github.com/batonrun/baton/internal/openapitest"
)

// messages lists a thread's messages with the given query.
func (b *testBundle) messages(t *testing.T, thread, query string) []map[string]any {
	t.Helper()
	r := b.do(t, call{method: http.MethodGet, path: "/api/v1/threads/" + thread + "/messages?" + query})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	var out []map[string]any
	for _, it := range r.data()["items"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

// An inbound message is listed under the message_id its sender gave (or
// the one Baton answered with when it gave none), beside Baton's own id;
// an outbound message's message_id is its id.
func TestThreadMessagesCarryTheSendersMessageID(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, `{"workflow_id": "echo", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "say"},
	  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "recibido"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/threads", body: envelope(map[string]any{
		"thread_id": "ana", "channel": "web", "contact": "ana", "default_workflow_id": "echo"})})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)

	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/threads/ana/messages", body: envelope(map[string]any{"text": "hola", "message_id": "wa-123"})})
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	require.Equal(t, "wa-123", r.data()["message_id"])
	r = b.do(t, call{method: http.MethodPost, path: "/api/v1/threads/ana/messages", body: envelope(map[string]any{"text": "sin id"})})
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	generated := r.data()["message_id"].(string)

	in := b.messages(t, "ana", "direction=in")
	require.Len(t, in, 2)
	require.Equal(t, "wa-123", in[0]["message_id"])
	require.Equal(t, "hola", in[0]["text"])
	require.Equal(t, generated, in[1]["message_id"])
	require.NotEqual(t, in[0]["id"], in[1]["id"])

	var out []map[string]any
	require.Eventually(t, func() bool {
		out = b.messages(t, "ana", "direction=out&status=delivered")
		return len(out) > 0
	}, 10*time.Second, 20*time.Millisecond)
	for _, m := range out {
		require.Equal(t, m["id"], m["message_id"])
		require.Equal(t, "delivered", m["status"])
	}
}

// ?status= and ?direction= take only the values a message can have: any
// other is a 400 naming the parameter.
func TestThreadMessagesFilters(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/threads", body: envelope(map[string]any{"thread_id": "f", "channel": "web", "contact": "f"})})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)
	for _, tc := range []struct{ query, field string }{
		{"status=bogus", "status"},
		{"direction=bogus", "direction"},
		{"direction=in&status=steered", "status"},
	} {
		r := b.do(t, call{method: http.MethodGet, path: "/api/v1/threads/f/messages?" + tc.query})
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", tc.query, r.raw)
		require.Equal(t, "thread.messages.invalid_request", r.errorCode())
		require.Equal(t, tc.field, r.body["error"].(map[string]any)["details"].(map[string]any)["field"], tc.query)
	}
	for _, status := range engine.MessageStatuses {
		require.Empty(t, b.messages(t, "f", "status="+status))
	}
}

// The thread.message_queued and thread.message_delivered events carry
// message_id as a string (as do send_message's step results), the one the
// thread's message list shows.
func TestThreadMessageEventsCarryStringIDs(t *testing.T) {
	t.Parallel()
	release := map[string]chan struct{}{"first": make(chan struct{}), "second": make(chan struct{})}
	entered := make(chan string, 2)
	b := setup(t, setupOpts{stream: true, tools: map[string]engine.ToolFunc{
		"block": func(ctx context.Context, call engine.ToolCall) (map[string]any, error) {
			key, _ := call.Inputs["key"].(string)
			entered <- key
			select {
			case <-release[key]:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return map[string]any{}, nil
		},
	}})
	b.define(t, holdWorkflow)
	conn := dialStream(t, b.server.URL, b.tenant, url.Values{"thread_id": {"juan"}}, false)

	// first holds the thread; second's message queues behind it.
	for _, text := range []string{"first", "second"} {
		r := b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/execute", body: envelope(map[string]any{
			"workflow_id": "hold", "execution_id": text, "thread_id": "juan", "input": map[string]any{"text": text}})})
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
		require.Equal(t, text, <-entered)
	}
	close(release["first"])
	close(release["second"])

	delivered := func(evs []wsEvent) bool {
		n := 0
		for _, e := range evs {
			if e.action() == engine.EventMessageDelivered {
				n++
			}
		}
		return n == 2
	}
	evs := readUntil(t, conn, both(has("thread.message_queued"), delivered))
	payloadSchema := openapitest.New(t, httpapi.OpenAPIDocument).Doc.Components.Schemas["ThreadEventPayload"].Value
	ids := map[string][]any{}
	steps := 0
	for _, e := range evs {
		switch {
		case e.Type.Domain == "thread":
			require.NoError(t, payloadSchema.VisitJSON(map[string]any(e.Payload)), "%s: %v", e.action(), e.Payload)
			if id, ok := e.Payload["message_id"]; ok {
				require.IsType(t, "", id, "%s", e.action())
				ids[e.action()+" "+e.Metadata.ExecutionID] = append(ids[e.action()+" "+e.Metadata.ExecutionID], id)
			}
		case e.action() == engine.EventStepUpdate && e.Payload["step_id"] == "say":
			result := e.Payload["step_result"].(map[string]any)
			require.IsType(t, "", result["message_id"], "step_result: %v", result)
			steps++
		}
	}
	require.Equal(t, 2, steps, "each execution's send_message step")

	out := b.messages(t, "juan", "direction=out")
	require.Len(t, out, 2)
	byExecution := map[string]any{}
	for _, m := range out {
		byExecution[m["execution_id"].(string)] = m["message_id"]
	}
	require.Equal(t, []any{byExecution["second"]}, ids["thread.message_queued second"])
	require.Equal(t, []any{byExecution["first"]}, ids["thread.message_delivered first"])
	require.Equal(t, []any{byExecution["second"]}, ids["thread.message_delivered second"])
}
