package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
	"github.com/batonrun/baton/internal/openapitest"
	"github.com/batonrun/baton/internal/pgtest"
)

// A workflow.input_request on the WebSocket names the request (request_id),
// its node (step_id) and how long it waits (timeout_ms), as the
// WorkflowInputRequestPayload schema requires. An answer quoting another
// request as metadata.input_request_id is refused with 409 and changes
// nothing, a metadata.input_request_id that is not a string with 400, and
// one quoting this request resumes the execution.
func TestInputRequestEventNamesTheRequest(t *testing.T) {
	t.Parallel()
	p := newProcess(t, pgtest.NewDatabase(t), processOpts{work: true})
	tenant := fmt.Sprintf("input-%d", tenantSeq.Add(1))
	p.define(t, tenant, waitFlow("ask", `{"id": "w", "type": "action", "actionType": "request_input",
	  "parameters": {"prompt": "¿Formato?", "input_type": "select", "options": [{"value": "pdf", "label": "PDF"}], "timeout": "2m"}, "next": "end"}`))
	conn := p.dial(t, tenant, url.Values{"execution_id": {"x-ask"}}, false)
	p.start(t, engine.StartParams{TenantID: tenant, WorkflowID: "ask", ExecutionID: "x-ask"})

	evs := readUntil(t, conn, has(engine.EventInputRequest))
	payload := evs[len(evs)-1].Payload
	validator := openapitest.New(t, httpapi.OpenAPIDocument)
	schema := validator.Doc.Components.Schemas["WorkflowInputRequestPayload"].Value
	require.NoError(t, schema.VisitJSON(payload), "payload: %v", payload)
	require.Equal(t, "w", payload["step_id"])
	require.Equal(t, "¿Formato?", payload["prompt"])
	require.Equal(t, float64(120000), payload["timeout_ms"])
	requestID, _ := payload["request_id"].(string)
	require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, requestID)

	b := &testBundle{pool: p.pool, engine: p.engine, server: p.server, validator: validator, tenant: tenant, token: mint(t, tenant)}
	answer := func(metadata map[string]any) *response {
		return b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/executions/x-ask/input", body: map[string]any{
			"metadata": metadata, "payload": map[string]any{"input_data": map[string]any{"format": "pdf"}, "node_id": "w"}}})
	}
	r := answer(map[string]any{"input_request_id": 7})
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.raw)
	require.Equal(t, "metadata.input_request_id", r.body["error"].(map[string]any)["details"].(map[string]any)["field"])
	r = answer(map[string]any{"input_request_id": "00000000-0000-4000-8000-000000000000"})
	require.Equal(t, http.StatusConflict, r.status, "%s", r.raw)
	require.Equal(t, "workflow.input.not_waiting", r.errorCode())
	x, err := p.engine.GetExecution(t.Context(), p.pool, tenant, "x-ask")
	require.NoError(t, err)
	require.Equal(t, engine.StatusWaiting, x.Status)

	r = answer(map[string]any{"input_request_id": requestID})
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	done := b.waitTerminal(t, "x-ask")
	require.Equal(t, "completed", done["status"])
	require.Equal(t, "pdf", done["variables"].(map[string]any)["format"])
}
