package openapitest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"
)

// Validator checks requests and responses against one OpenAPI document. It is
// safe for concurrent use by parallel tests.
type Validator struct {
	// Doc is the loaded and validated document.
	Doc *openapi3.T

	router routers.Router
	strict *strictSchemas
}

// loaded caches validators by the SHA-256 of their document, so that many
// tests calling New with the same document load and validate it only once.
var loaded sync.Map // [sha256.Size]byte -> *loadResult

type loadResult struct {
	once      sync.Once
	validator *Validator
	err       error
}

// New loads doc (OpenAPI 3 YAML or JSON), validates it and builds a router
// over its paths. It fails the test when the document does not load or is not
// a valid OpenAPI document.
func New(t testing.TB, doc []byte) *Validator {
	t.Helper()
	res, _ := loaded.LoadOrStore(sha256.Sum256(doc), &loadResult{})
	lr := res.(*loadResult)
	lr.once.Do(func() { lr.validator, lr.err = load(doc) })
	require.NoError(t, lr.err)
	return lr.validator
}

func load(data []byte) (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("loading the OpenAPI document: %w", err)
	}
	if err := doc.Validate(loader.Context, documentOptions()...); err != nil {
		return nil, fmt.Errorf("validating the OpenAPI document: %w", err)
	}
	if err := lintNullable(doc); err != nil {
		return nil, fmt.Errorf("validating the OpenAPI document: %w", err)
	}
	strict, err := compileStrict(doc)
	if err != nil {
		return nil, fmt.Errorf("validating the OpenAPI document as strict OpenAPI 3.0: %w", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("building the OpenAPI router: %w", err)
	}
	return &Validator{Doc: doc, router: router, strict: strict}, nil
}

// documentOptions make kin-openapi's document validation strict: every
// error is reported, examples and defaults are checked against their
// schemas, a format OpenAPI does not define is an error, and so is an
// extension beside a $ref (which OpenAPI 3.0 ignores).
func documentOptions() []openapi3.ValidationOption {
	return []openapi3.ValidationOption{
		openapi3.EnableMultiError(),
		openapi3.EnableExamplesValidation(),
		openapi3.EnableSchemaDefaultsValidation(),
		openapi3.EnableSchemaFormatValidation(),
		openapi3.EnableSchemaPatternValidation(),
		openapi3.ProhibitExtensionsWithRef(),
	}
}

// responseOptions validate a response's status, headers and body. Security is
// never looked at by ValidateResponse. Schema errors name the JSON pointer and
// the reason but not the whole schema, which would drown the message.
func responseOptions() *openapi3filter.Options {
	return &openapi3filter.Options{
		IncludeResponseStatus:   true,
		MultiError:              true,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.DisableSchemaErrorDetails()},
	}
}

// requestOptions validate a request's parameters and body, but not its
// credentials, and leave the request as it was (no defaults filled in).
func requestOptions() *openapi3filter.Options {
	return &openapi3filter.Options{
		AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
		SkipSettingDefaults:     true,
		MultiError:              true,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.DisableSchemaErrorDetails()},
	}
}

// Route returns the document's operation for req (by method and path; the
// host is ignored), or an error when the document has none.
func (v *Validator) Route(req *http.Request) (*routers.Route, map[string]string, error) {
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		return nil, nil, fmt.Errorf("no operation in the OpenAPI document for %s %s: %w", req.Method, req.URL.Path, err)
	}
	return route, params, nil
}

// Check fails the test unless a response with this status, header and body
// is one the document allows for req's operation: the status must be
// documented, documented required headers present and valid, and the body
// must have a documented Content-Type and match its schema. req is only
// used to find the operation; its body is not read.
func (v *Validator) Check(t testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	require.NoError(t, v.ValidateResponse(req, status, header, body))
}

// ValidateResponse is Check returning the error instead of failing a test.
func (v *Validator) ValidateResponse(req *http.Request, status int, header http.Header, body []byte) error {
	route, params, err := v.Route(req)
	if err != nil {
		return err
	}
	if header == nil {
		header = http.Header{}
	}
	opts := responseOptions()
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request:    req,
			PathParams: params,
			Route:      route,
			Options:    opts,
		},
		Status:  status,
		Header:  header,
		Options: opts,
	}
	input.SetBodyBytes(body)
	err = openapi3filter.ValidateResponse(req.Context(), input)
	if err == nil {
		err = v.validateStrictBody(route.Operation, status, header, body)
	}
	if err != nil {
		return fmt.Errorf("response %d to %s %s (operation %s) does not match the OpenAPI document: %w\nheaders: %v\nbody: %s",
			status, req.Method, req.URL.RequestURI(), route.Operation.OperationID, err, header, truncate(body))
	}
	return nil
}

// validateStrictBody checks a JSON body against the strict reading of its
// schema (see strictSchemas).
func (v *Validator) validateStrictBody(op *openapi3.Operation, status int, header http.Header, body []byte) error {
	contentType := header.Get("Content-Type")
	if !isJSON(contentType) {
		return nil
	}
	sch := v.strict.body(op, status, contentType)
	if sch == nil {
		return nil
	}
	if err := validateBody(sch, body); err != nil {
		return fmt.Errorf("under strict OpenAPI 3.0 semantics: %w", err)
	}
	return nil
}

// ValidateSchema checks a JSON document against the component schema name,
// both as kin-openapi reads it and under strict OpenAPI 3.0 semantics.
func (v *Validator) ValidateSchema(name string, doc []byte) error {
	ref := v.Doc.Components.Schemas[name]
	sch := v.strict.components[name]
	if ref == nil || sch == nil {
		return fmt.Errorf("the OpenAPI document has no schema %q", name)
	}
	var value any
	if err := json.Unmarshal(doc, &value); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := ref.Value.VisitJSON(value, openapi3.MultiErrors()); err != nil {
		return fmt.Errorf("%s: %w\ndocument: %s", name, err, truncate(doc))
	}
	if err := validateBody(sch, doc); err != nil {
		return fmt.Errorf("%s, under strict OpenAPI 3.0 semantics: %w\ndocument: %s", name, err, truncate(doc))
	}
	return nil
}

// CheckRecorder is Check for a response recorded by httptest.
func (v *Validator) CheckRecorder(t testing.TB, req *http.Request, rec *httptest.ResponseRecorder) {
	t.Helper()
	v.Check(t, req, rec.Code, rec.Header(), rec.Body.Bytes())
}

// CheckResponse is Check for a response received by an http.Client. It reads
// resp.Body and replaces it with a reader of the same bytes, so the caller can
// still read it.
func (v *Validator) CheckResponse(t testing.TB, resp *http.Response) {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "reading the response body")
	require.NoError(t, resp.Body.Close())
	resp.Body = io.NopCloser(bytes.NewReader(body))
	v.Check(t, resp.Request, resp.StatusCode, resp.Header, body)
}

// CheckRequest fails the test unless req is a request the document allows:
// a documented operation with valid path, query and header parameters and a
// body of a documented Content-Type matching its schema. Credentials are not
// checked. req's body is read and then restored, so req can still be sent.
func (v *Validator) CheckRequest(t testing.TB, req *http.Request) {
	t.Helper()
	require.NoError(t, v.ValidateRequest(req))
}

// ValidateRequest is CheckRequest returning the error instead of failing a
// test.
func (v *Validator) ValidateRequest(req *http.Request) error {
	route, params, err := v.Route(req)
	if err != nil {
		return err
	}
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		if body, err = io.ReadAll(req.Body); err != nil {
			return fmt.Errorf("reading the request body: %w", err)
		}
		_ = req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	// Validate a copy so the validator cannot consume or change req's body.
	clone := req.Clone(req.Context())
	if body != nil {
		clone.Body = io.NopCloser(bytes.NewReader(body))
		clone.ContentLength = int64(len(body))
	}
	input := &openapi3filter.RequestValidationInput{
		Request:    clone,
		PathParams: params,
		Route:      route,
		Options:    requestOptions(),
	}
	if err := openapi3filter.ValidateRequest(req.Context(), input); err != nil {
		return fmt.Errorf("request %s %s (operation %s) does not match the OpenAPI document: %w\nbody: %s",
			req.Method, req.URL.RequestURI(), route.Operation.OperationID, err, truncate(body))
	}
	return nil
}

func truncate(b []byte) string {
	const max = 4096
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
