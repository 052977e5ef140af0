package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// maxBodyBytes is the largest request body accepted: 1 MiB.
const maxBodyBytes = 1 << 20

// schemaVersion is the envelope schema version Baton speaks.
const schemaVersion = "1.0"

// messageType is the {domain, action} pair naming a message.
type messageType struct {
	Domain string `json:"domain"`
	Action string `json:"action"`
}

// requestEnvelope is the request envelope (docs/api.md, "Conventions").
// Only the fields Baton reads are decoded; others are accepted and ignored.
type requestEnvelope struct {
	MessageID     string          `json:"message_id"`
	CorrelationID string          `json:"correlation_id"`
	Type          *messageType    `json:"type"`
	Priority      *int            `json:"priority"`
	Metadata      map[string]any  `json:"metadata"`
	Payload       json.RawMessage `json:"payload"`
}

// successEnvelope is a successful answer.
type successEnvelope struct {
	RequestID     string      `json:"request_id"`
	CorrelationID string      `json:"correlation_id"`
	Type          messageType `json:"type"`
	SchemaVersion string      `json:"schema_version"`
	Status        string      `json:"status"`
	Data          any         `json:"data"`
}

// errorEnvelope is the error structure (docs/api.md, "Conventions").
type errorEnvelope struct {
	Type          messageType `json:"type"`
	Error         errorBody   `json:"error"`
	CorrelationID string      `json:"correlation_id"`
	RequestID     string      `json:"request_id"`
}

type errorBody struct {
	Code         string         `json:"code"`
	HTTPStatus   int            `json:"http_status"`
	Message      string         `json:"message"`
	Details      map[string]any `json:"details"`
	Retryable    bool           `json:"retryable"`
	RetryAfterMS *int64         `json:"retry_after_ms"`
}

// apiError is an error with its HTTP status and code.
type apiError struct {
	status       int
	code         string
	message      string
	details      map[string]any
	retryable    bool
	retryAfterMS *int64
	// cause, when set, is what errors.Is finds under the error.
	cause error
}

func (e *apiError) Error() string { return e.message }

func (e *apiError) Unwrap() error { return e.cause }

func newAPIError(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

func (e *apiError) with(key string, value any) *apiError {
	if e.details == nil {
		e.details = map[string]any{}
	}
	e.details[key] = value
	return e
}

// errBodyUnread marks the answer to a request whose body could not be
// read. net/http ends such a request's context as it does a client that
// hung up, yet the client may still be there, waiting: it gets this answer
// (handle), never an empty 200.
var errBodyUnread = errors.New("request body not read")

// bodyReader records the error, other than io.EOF, that cut a request body
// short, so that it is told from the JSON the body held.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// bodyReadError answers a body that could not be read: 413 over
// maxBodyBytes; 408 request.body.timeout when the server's read deadline
// (http.readTimeout) cut it; 400 request.body.incomplete when it ended
// before its Content-Length or its chunks were malformed. nil when the body
// was read whole.
func bodyReadError(err error) error {
	var (
		tooLarge *http.MaxBytesError
		netErr   net.Error
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooLarge):
		return newAPIError(http.StatusRequestEntityTooLarge, "request.body.too_large",
			"request body is over the limit of %d bytes", maxBodyBytes)
	case errors.As(err, &netErr) && netErr.Timeout():
		ae := newAPIError(http.StatusRequestTimeout, "request.body.timeout",
			"the request body did not arrive within the server's read timeout (http.readTimeout); nothing was done")
		ae.retryable, ae.cause = true, errBodyUnread
		return ae
	default:
		ae := newAPIError(http.StatusBadRequest, "request.body.incomplete",
			"the request body ended before its Content-Length, or its chunked encoding is malformed; nothing was done")
		ae.cause = errBodyUnread
		return ae
	}
}

// decodeEnvelope reads a request envelope: at most 1 MiB, valid JSON, and a
// payload object. A body the connection did not deliver whole is answered
// by bodyReadError.
func decodeEnvelope(w http.ResponseWriter, r *http.Request, domain, action string) (*requestEnvelope, error) {
	body := &bodyReader{r: http.MaxBytesReader(w, r.Body, maxBodyBytes)}
	var env requestEnvelope
	dec := json.NewDecoder(body)
	if err := dec.Decode(&env); err != nil {
		if ae := bodyReadError(body.err); ae != nil {
			return nil, ae
		}
		return nil, newAPIError(http.StatusBadRequest, domain+"."+action+".invalid_request", "request body is not a valid JSON envelope: %v", err)
	}
	// Nothing but white space may follow the envelope: dec.More would let a
	// stray ] or } through, and white space past the limit too.
	if _, err := dec.Token(); err != io.EOF {
		if ae := bodyReadError(body.err); ae != nil {
			return nil, ae
		}
		return nil, newAPIError(http.StatusBadRequest, domain+"."+action+".invalid_request", "request body has data after the JSON envelope")
	}
	if len(env.Payload) == 0 || string(env.Payload) == "null" {
		return nil, newAPIError(http.StatusBadRequest, domain+"."+action+".invalid_request", "payload is required").with("field", "payload")
	}
	if env.Payload[0] != '{' {
		return nil, newAPIError(http.StatusBadRequest, domain+"."+action+".invalid_request", "payload must be a JSON object").with("field", "payload")
	}
	if env.Priority != nil && (*env.Priority < 0 || *env.Priority > 10) {
		return nil, newAPIError(http.StatusBadRequest, domain+"."+action+".invalid_request", "priority must be between 0 and 10").with("field", "priority")
	}
	return &env, nil
}

// decodePayload decodes the payload strictly into v. A field of the wrong
// type or an unknown one is answered with details.field naming it.
func decodePayload(env *requestEnvelope, v any, domain, action string) error {
	dec := json.NewDecoder(bytesReader(env.Payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return newAPIError(http.StatusBadRequest, domain+"."+action+".invalid_request", "invalid payload: %v", err).
			with("field", payloadField(env.Payload, err))
	}
	return nil
}

// payloadField names the field a payload decoding error is about, as
// "payload.<path>"; "payload" when the error does not say which.
func payloadField(payload json.RawMessage, err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return "payload." + typeErr.Field
	}
	// encoding/json names an unknown field but not where it is: it is named
	// when it is one of the payload's own keys.
	quoted, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return "payload"
	}
	name, uqErr := strconv.Unquote(quoted)
	var keys map[string]json.RawMessage
	if uqErr != nil || json.Unmarshal(payload, &keys) != nil {
		return "payload"
	}
	if _, top := keys[name]; !top {
		return "payload"
	}
	return "payload." + name
}
