package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/engine/workflow"
)

// toAPIError maps domain errors to API errors; nil means the error is not
// one a client should see.
func toAPIError(err error, domain, action string) *apiError {
	prefix := domain + "." + action
	var (
		ae *apiError
		ve *workflow.ValidationError
		ie *engine.InputError
		ce *engine.ConflictError
		te *engine.TransitionError
		le *workflow.LimitError
		pe *pgconn.PgError
	)
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &ve):
		problems := ve.Problems
		if problems == nil {
			problems = []workflow.Problem{}
		}
		return newAPIError(http.StatusBadRequest, "workflow.define.validation_error", "%s", ve.Error()).with("problems", problems)
	case errors.As(err, &ie):
		return newAPIError(http.StatusBadRequest, prefix+".invalid_request", "%s", ie.Error()).with("field", ie.Field)
	case errors.As(err, &le):
		// A limit met while the request is carried out, such as a
		// tenant's lanes (limits.lanesPerTenant).
		return newAPIError(http.StatusBadRequest, prefix+".invalid_request", "%s", le.Error()).
			with("field", le.Field).with("limit", le.Limit).with("max", le.Max)
	case errors.Is(err, engine.ErrNotFound):
		return newAPIError(http.StatusNotFound, prefix+".not_found", "%s", err.Error())
	case errors.As(err, &ce):
		ae := newAPIError(http.StatusConflict, ce.Code, "%s", ce.Message)
		for k, v := range ce.Details {
			ae = ae.with(k, v)
		}
		return ae
	case errors.As(err, &te):
		return newAPIError(http.StatusConflict, prefix+".invalid_state", "%s", te.Error()).with("status", string(te.Status))
	case errors.As(err, &pe) && (pe.Code == "22021" || pe.Code == "22P05"):
		// Text Postgres cannot store, such as a NUL byte in an id.
		return newAPIError(http.StatusBadRequest, prefix+".invalid_request", "the request contains characters that are not valid text")
	case errors.Is(err, context.DeadlineExceeded):
		return unavailable("the request timed out; try again")
	case engine.IsUnavailable(err):
		// An outage (the database restarting, failing over, refusing
		// connections, read-only) or a conflict that outlived withTx's
		// retries: the same request may succeed in a moment.
		return unavailable("the service is unavailable for a moment; try again")
	}
	return nil
}

// retryAfterMS is the retry_after_ms (and Retry-After) of a 503
// workflow.service.unavailable.
const retryAfterMS = 1000

// unavailable returns a retryable 503 workflow.service.unavailable.
func unavailable(message string) *apiError {
	retry := int64(retryAfterMS)
	e := newAPIError(http.StatusServiceUnavailable, "workflow.service.unavailable", "%s", message)
	e.retryable, e.retryAfterMS = true, &retry
	return e
}
