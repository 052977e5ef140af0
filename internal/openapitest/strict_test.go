package openapitest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/openapitest"
)

// objectOrNullDoc is a document whose GET /thing answers {"step": <step>},
// where <step> is an object or null written as stepSchema.
func objectOrNullDoc(stepSchema, example string) []byte {
	return fmt.Appendf(nil, `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /thing:
    get:
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {$ref: '#/components/schemas/Thing'}
components:
  schemas:
    Step:
      type: object
      required: [id]
      properties:
        id: {type: string}
    NullValue:
      type: object
      nullable: true
      enum: [null]
    Thing:
      type: object
      required: [step, note]
      properties:
        note: {type: string, nullable: true}
        step:
%s
      example: %s
`, stepSchema, example)
}

// newFails reports whether New fails the test for doc.
func newFails(t *testing.T, doc []byte) bool {
	ft := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		openapitest.New(ft, doc)
	}()
	return ft.failed
}

func validateThing(v *openapitest.Validator, body string) error {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return v.ValidateResponse(httptest.NewRequest(http.MethodGet, "/thing", nil), http.StatusOK, h, []byte(body))
}

// TestNullableWithoutTypeIsRejected: `nullable: true` beside `allOf` and
// no `type` (what the served document once had on Execution's
// current_step, waiting, result and error) allows no null in OpenAPI 3.0,
// so a document with it does not load.
func TestNullableWithoutTypeIsRejected(t *testing.T) {
	t.Parallel()
	doc := objectOrNullDoc(`          nullable: true
          allOf: [{$ref: '#/components/schemas/Step'}]`, `{step: {id: a}, note: null}`)
	require.True(t, newFails(t, doc))
}

// TestExamplesAreReadStrictly: an example with null where only the lenient
// reading of `nullable` allows it makes the document fail to load.
func TestExamplesAreReadStrictly(t *testing.T) {
	t.Parallel()
	doc := objectOrNullDoc(`          type: object
          nullable: true
          allOf: [{$ref: '#/components/schemas/Step'}]`, `{step: null, note: null}`)
	require.True(t, newFails(t, doc))
}

// TestResponsesAreReadStrictly: `type: object, nullable: true` beside an
// `allOf` passes the linters, and kin-openapi accepts null for it, but in
// OpenAPI 3.0.3 the allOf still rejects null. The validator reads the
// document as strict validators do. The oneOf with a null-only schema is
// the form that allows null.
func TestResponsesAreReadStrictly(t *testing.T) {
	t.Parallel()

	lenient := openapitest.New(t, objectOrNullDoc(`          type: object
          nullable: true
          allOf: [{$ref: '#/components/schemas/Step'}]`, `{step: {id: a}, note: null}`))
	require.NoError(t, validateThing(lenient, `{"step": {"id": "a"}, "note": null}`))
	err := validateThing(lenient, `{"step": null, "note": "x"}`)
	require.ErrorContains(t, err, "strict OpenAPI 3.0")

	strict := openapitest.New(t, objectOrNullDoc(`          oneOf:
            - $ref: '#/components/schemas/Step'
            - $ref: '#/components/schemas/NullValue'`, `{step: null, note: null}`))
	for body, ok := range map[string]bool{
		`{"step": null, "note": null}`:              true,
		`{"step": {"id": "a"}, "note": "x"}`:        true,
		`{"step": {}, "note": null}`:                false,
		`{"step": "a", "note": null}`:               false,
		`{"step": {"id": "a"}, "note": 3}`:          false,
		`{"step": {"id": "a"}}`:                     false,
		`{"step": {"id": null}, "note": "ok"}`:      false,
		`{"step": {"id": "a"}, "note": "", "x": 1}`: true,
	} {
		err := validateThing(strict, body)
		if ok {
			require.NoError(t, err, body)
		} else {
			require.Error(t, err, body)
		}
	}
}

// TestValidateSchema checks a document against one component schema, as
// WebSocket messages are.
func TestValidateSchema(t *testing.T) {
	t.Parallel()

	v := setup(t)
	completed := `{"event_id": 1, "type": {"domain": "workflow", "action": "completed"}, "created_at": "2025-06-03T17:15:45Z",
		"tenant_id": "acme", "source_service": "baton", "correlation_id": null,
		"metadata": {"workflow_id": "w", "execution_id": "x", "session_id": null},
		"payload": {"status": "successful", "error": null, "result_summary": null}}`
	require.NoError(t, v.ValidateSchema("WebSocketEvent", []byte(completed)))
	require.Error(t, v.ValidateSchema("WebSocketEvent", []byte(`{"event_id": 1}`)))
	require.Error(t, v.ValidateSchema("NoSuchSchema", []byte(`{}`)))
}
