package httpapi

import (
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/batonrun/baton/engine"
)

// The API side of the engine's limits (workflow.Limits, the config file's
// `limits`): every id and name a request carries is at most limits.idBytes
// long, and metadata.timeout_ms at most limits.waitTimeoutMs. A request
// over one is answered 400 <domain>.<action>.invalid_request, with
// details.field naming what is over, details.limit the limit's config key
// and details.max its value, before anything is written.

// idField is an id or name of a request, under the name a client knows it
// by: "payload.execution_id", "message_id", a path parameter's name.
type idField struct{ name, value string }

// checkIDs answers the first of fields longer than limits.idBytes.
func (s *Server) checkIDs(domain, action string, fields ...idField) error {
	l := s.engine.Limits()
	for _, f := range fields {
		if err := l.CheckID(f.name, f.value); err != nil {
			return newAPIError(http.StatusBadRequest, domain+"."+action+".invalid_request", "%s", err.Error()).
				with("field", f.name).with("limit", "limits.idBytes").with("max", l.IDBytes)
		}
	}
	return nil
}

// pathParams are the path parameters of the API's routes.
var pathParams = []string{"workflow_id", "execution_id", "thread_id"}

// checkRequestIDs bounds what every request may carry besides its payload:
// its path parameters, X-Correlation-ID, and the envelope's message_id and
// correlation_id. It runs before the request's message_id is claimed. An
// over-long correlation id is not echoed: the answer gets a fresh one.
func (s *Server) checkRequestIDs(w http.ResponseWriter, req *request, domain, action string) error {
	fields := make([]idField, 0, 6)
	for _, name := range pathParams {
		if v := req.PathValue(name); v != "" {
			fields = append(fields, idField{name, v})
		}
	}
	fields = append(fields, idField{"X-Correlation-ID", req.Header.Get("X-Correlation-ID")})
	if env := req.envelope; env != nil {
		fields = append(fields, idField{"message_id", env.MessageID}, idField{"correlation_id", env.CorrelationID})
	}
	err := s.checkIDs(domain, action, fields...)
	if err != nil && len(req.correlationID) > s.engine.Limits().IDBytes {
		req.correlationID = uuid.NewString()
		w.Header().Set("X-Correlation-ID", req.correlationID)
	}
	return err
}

// waitTimeout is how long wait_for_completion holds an execute request:
// metadata.timeout_ms, 1..limits.waitTimeoutMs, else the default (30 s, or
// the limit when it is lower).
func (s *Server) waitTimeout(r *request) (time.Duration, error) {
	maxMS := s.engine.Limits().WaitTimeoutMS
	raw, ok := r.envelope.Metadata["timeout_ms"]
	if !ok || raw == nil {
		return min(defaultWaitTimeout, time.Duration(maxMS)*time.Millisecond), nil
	}
	ms, isNumber := raw.(float64)
	if !isNumber || ms != math.Trunc(ms) || ms < 1 || ms > float64(maxMS) {
		return 0, newAPIError(http.StatusBadRequest, "workflow.execute.invalid_request",
			"metadata.timeout_ms must be an integer from 1 to %d (limits.waitTimeoutMs)", maxMS).
			with("field", "metadata.timeout_ms").with("limit", "limits.waitTimeoutMs").with("max", maxMS)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// renameField makes an engine.InputError about one of from name to
// instead: the field as the client sent it, when the engine saw it under
// another name.
func renameField(err error, to string, from ...string) {
	var ie *engine.InputError
	if !errors.As(err, &ie) {
		return
	}
	for _, f := range from {
		if ie.Field == f {
			ie.Field = to
			if f == "payload.input" {
				ie.Message = "starts a run whose input " + ie.Message
			}
			return
		}
	}
}
