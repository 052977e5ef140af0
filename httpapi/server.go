package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/live"
)

// Config configures a Server.
type Config struct {
	// Engine does the work. Required.
	Engine *engine.Engine
	// Pool is the database pool. Required.
	Pool *pgxpool.Pool
	// JWTSecret verifies API tokens (HS256): at least MinJWTSecretBytes
	// (32) bytes. Empty requires Insecure.
	JWTSecret []byte
	// Token holds the checks a token must pass besides its signature and
	// expiry: its longest lifetime and, optionally, its audience and issuer.
	Token TokenPolicy
	// OperatorSecret verifies operator tokens (HS256; httpapi/operator.go),
	// which open River UI and name no tenant: at least MinJWTSecretBytes
	// (32) bytes, and not JWTSecret. Empty takes no operator tokens. Unused
	// when Insecure.
	OperatorSecret []byte
	// Insecure serves without authentication: X-Tenant-ID alone names the
	// tenant. Only for local development.
	Insecure bool
	// Logger receives request errors. Nil discards them.
	Logger *slog.Logger
	// RequestTimeout bounds a request's work; wait_for_completion requests
	// get their own timeout on top. Zero means 30 seconds.
	RequestTimeout time.Duration
	// Hub streams live events to GET /api/v1/ws. Nil answers that endpoint
	// with 503.
	Hub *live.Hub
	// StreamWriteTimeout bounds one WebSocket write; a client that does not
	// take a message for that long is disconnected. Zero means 10 seconds.
	StreamWriteTimeout time.Duration
	// Metrics serves GET /metrics (Prometheus). Nil answers it with 404.
	Metrics http.Handler
	// MetricsToken, when set, is the bearer token GET /metrics requires
	// (Authorization: Bearer <it>); a scrape without it is answered 401.
	// Empty serves /metrics to anyone who can reach it.
	MetricsToken string
	// TrustedProxies are the reverse proxies whose X-Forwarded-Proto is
	// believed: a request whose peer address is in one of these prefixes
	// and whose X-Forwarded-Proto says https gets a Secure console session
	// cookie, as a request that came over TLS does. Empty (the default)
	// believes no proxy.
	TrustedProxies []netip.Prefix
	// RateLimits are per-tenant token buckets, kept in this process: a
	// tenant over its budget is answered 429 workflow.service.rate_limited.
	// The zero value (the default) limits nothing.
	RateLimits RateLimits
}

// Server serves the REST API.
type Server struct {
	*slog.Logger

	engine *engine.Engine
	pool   *pgxpool.Pool
	q      *dbsqlc.Queries
	secret []byte
	// sessionKey keys console session ids in the database
	// (httpapi/session.go).
	sessionKey []byte
	// operatorSecret verifies operator tokens and operatorSessionKey keys
	// operator session ids in the database (httpapi/operator.go); nil
	// without operator tokens.
	operatorSecret, operatorSessionKey []byte
	token                              TokenPolicy
	timeout                            time.Duration
	mux                                *http.ServeMux
	hub                                *live.Hub
	metrics                            http.Handler
	// metricsToken is the bearer token of GET /metrics; empty means none.
	metricsToken string
	limiter      *rateLimiter // nil: no rate limits
	// streamWriteTimeout bounds one WebSocket write.
	streamWriteTimeout time.Duration
	// trustedProxies are the proxies whose X-Forwarded-Proto is believed.
	trustedProxies []netip.Prefix
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Engine == nil || cfg.Pool == nil {
		return nil, fmt.Errorf("httpapi: Config.Engine and Config.Pool are required")
	}
	if len(cfg.JWTSecret) == 0 && !cfg.Insecure {
		return nil, fmt.Errorf("httpapi: a JWT secret is required unless Insecure is set")
	}
	if !cfg.Insecure && len(cfg.JWTSecret) < MinJWTSecretBytes {
		return nil, fmt.Errorf("httpapi: the JWT secret is %d bytes; it must be at least %d", len(cfg.JWTSecret), MinJWTSecretBytes)
	}
	if err := cfg.Token.validate(); err != nil {
		return nil, err
	}
	if err := checkOperatorSecret(cfg.OperatorSecret, cfg.JWTSecret); err != nil && !cfg.Insecure {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	s := &Server{
		Logger: cfg.Logger, engine: cfg.Engine, pool: cfg.Pool, q: dbsqlc.New(),
		timeout: cfg.RequestTimeout, mux: http.NewServeMux(),
		hub: cfg.Hub, metrics: cfg.Metrics, metricsToken: cfg.MetricsToken, streamWriteTimeout: cfg.StreamWriteTimeout,
		token: cfg.Token.withDefaults(), trustedProxies: cfg.TrustedProxies,
	}
	if s.streamWriteTimeout <= 0 {
		s.streamWriteTimeout = 10 * time.Second
	}
	if !cfg.Insecure {
		s.secret = cfg.JWTSecret
	}
	s.sessionKey = sessionKey(s.secret)
	if s.secret != nil && len(cfg.OperatorSecret) > 0 {
		s.operatorSecret = cfg.OperatorSecret
		s.operatorSessionKey = operatorSessionKey(cfg.OperatorSecret)
	}
	var err error
	if s.limiter, err = newRateLimiter(cfg.RateLimits); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

// Handler returns the HTTP handler of the whole API; every answer it
// gives carries X-Content-Type-Options: nosniff (NoSniff).
func (s *Server) Handler() http.Handler { return NoSniff(s.mux) }

func (s *Server) routes() {
	s.mux.HandleFunc("GET /healthz", withIDs(s.healthz))
	s.mux.HandleFunc("GET /readyz", withIDs(s.readyz))
	s.mux.HandleFunc("GET /api/v1/openapi.yaml", withIDs(s.openapi))
	s.mux.HandleFunc("GET /metrics", s.serveMetrics)
	s.mux.HandleFunc("GET /api/v1/ws", s.limitStream(s.streamEvents))

	s.handle("POST /api/v1/workflow/definitions", endpoint{domain: "workflow", action: "define", scope: ScopeWorkflowsWrite, tx: true, run: s.defineWorkflow})
	s.handle("POST /api/v1/workflow/validate", endpoint{domain: "workflow", action: "validate", scope: ScopeWorkflowsRead, run: s.validateWorkflow})
	s.handle("GET /api/v1/workflow/definitions", endpoint{domain: "workflow", action: "list", scope: ScopeWorkflowsRead, run: s.listDefinitions})
	s.handle("GET /api/v1/workflow/definitions/{workflow_id}", endpoint{domain: "workflow", action: "get", scope: ScopeWorkflowsRead, run: s.getDefinition})
	s.handle("POST /api/v1/workflow/execute", endpoint{domain: "workflow", action: "execute", scope: ScopeWorkflowsWrite, tx: true, run: s.execute, after: s.waitForCompletion})
	s.handle("GET /api/v1/workflow/executions", endpoint{domain: "workflow", action: "list_executions", scope: ScopeWorkflowsRead, run: s.listExecutions})
	s.handle("GET /api/v1/workflow/executions/{execution_id}", endpoint{domain: "workflow", action: "status", scope: ScopeWorkflowsRead, run: s.getExecution})
	s.handle("GET /api/v1/workflow/executions/{execution_id}/logs", endpoint{domain: "workflow", action: "logs", scope: ScopeWorkflowsRead, run: s.executionLogs})
	s.handle("POST /api/v1/workflow/executions/{execution_id}/cancel", endpoint{domain: "workflow", action: "cancel", scope: ScopeWorkflowsWrite, tx: true, run: s.cancelExecution})
	s.handle("POST /api/v1/workflow/executions/{execution_id}/restart", endpoint{domain: "workflow", action: "restart", scope: ScopeWorkflowsWrite, tx: true, run: s.restartExecution})
	s.handle("POST /api/v1/workflow/executions/{execution_id}/input", endpoint{domain: "workflow", action: "input", scope: ScopeWorkflowsWrite, tx: true, run: s.provideInput})
	s.handle("POST /api/v1/events", endpoint{domain: "event", action: "publish", scope: ScopeWorkflowsWrite, tx: true, run: s.publishEvent})
	s.handle("GET /api/v1/monitor/executions/summary", endpoint{domain: "monitor", action: "summary", scope: ScopeMonitorRead, run: s.monitorSummary})
	s.handle("GET /api/v1/monitor/executions/waiting", endpoint{domain: "monitor", action: "waiting", scope: ScopeMonitorRead, run: s.monitorWaiting})
	s.handle("GET /api/v1/monitor/executions/stuck", endpoint{domain: "monitor", action: "stuck", scope: ScopeMonitorRead, run: s.monitorStuck})

	s.handle("POST /api/v1/threads", endpoint{domain: "thread", action: "upsert", scope: ScopeWorkflowsWrite, tx: true, run: s.upsertThread})
	s.handle("GET /api/v1/threads/{thread_id}", endpoint{domain: "thread", action: "get", scope: ScopeWorkflowsRead, run: s.getThread})
	s.handle("GET /api/v1/threads/{thread_id}/messages", endpoint{domain: "thread", action: "messages", scope: ScopeWorkflowsRead, run: s.threadMessages})
	s.handle("POST /api/v1/threads/{thread_id}/messages", endpoint{domain: "thread", action: "inbound", scope: ScopeWorkflowsWrite, tx: true, run: s.threadInbound})
	s.handle("PUT /api/v1/threads/{thread_id}/queue", endpoint{domain: "thread", action: "queue", scope: ScopeWorkflowsWrite, tx: true, run: s.threadQueue(false)})
	s.handle("DELETE /api/v1/threads/{thread_id}/queue", endpoint{domain: "thread", action: "queue", scope: ScopeWorkflowsWrite, tx: true, run: s.threadQueue(true)})

	s.handle("GET /api/v1/monitor/lanes", endpoint{domain: "monitor", action: "lanes", scope: ScopeMonitorRead, run: s.monitorLanes})
	s.handle("GET /api/v1/monitor/locks", endpoint{domain: "monitor", action: "locks", scope: ScopeMonitorRead, run: s.listLocks(false)})
	s.handle("GET /api/v1/monitor/locks/stale", endpoint{domain: "monitor", action: "locks", scope: ScopeMonitorRead, run: s.listLocks(true)})
	s.handle("POST /api/v1/monitor/locks/cleanup", endpoint{domain: "monitor", action: "cleanup", scope: ScopeMonitorWrite, tx: true, run: s.cleanupLocks})

	s.mux.HandleFunc("/", s.noRoute)
}

// routeMethods are the methods a route may serve.
var routeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// noRoute answers a request no route takes: 405 with an Allow header when
// its path is served with other methods, else 404.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	rc := newRequestContext(w, r)
	if allow := s.allowedMethods(r); len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		s.writeError(w, rc, "request", "route", newAPIError(http.StatusMethodNotAllowed, "request.route.method_not_allowed",
			"%s is not served on %s; it takes %s", r.Method, r.URL.Path, strings.Join(allow, ", ")).with("allow", allow))
		return
	}
	s.writeError(w, rc, "request", "route", newAPIError(http.StatusNotFound, "request.route.not_found", "no endpoint %s %s", r.Method, r.URL.Path))
}

// allowedMethods are the methods a route serves on r's path: those the mux
// hands to a handler other than the catch-all.
func (s *Server) allowedMethods(r *http.Request) []string {
	var allow []string
	for _, m := range routeMethods {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	return allow
}

// endpoint is one API operation.
type endpoint struct {
	domain, action string
	// scope is the token scope the operation needs.
	scope string
	// tx runs the operation in a transaction that also records the request's
	// message_id, so a repeated message_id replays the first answer.
	tx bool
	// run does the work. db is the transaction when tx is set, else the pool.
	run func(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error)
	// after runs once the transaction has committed and may replace the
	// answer (wait_for_completion).
	after func(ctx context.Context, r *request, status int, data any) (int, any, error)
}

// request is a decoded, authenticated API request.
type request struct {
	*http.Request
	*requestContext
	principal *principal
	envelope  *requestEnvelope
}

type requestContext struct {
	requestID, correlationID string
}

func newRequestContext(w http.ResponseWriter, r *http.Request) *requestContext {
	rc := &requestContext{requestID: r.Header.Get("X-Request-ID"), correlationID: r.Header.Get("X-Correlation-ID")}
	if rc.requestID == "" {
		rc.requestID = uuid.NewString()
	}
	if rc.correlationID == "" {
		rc.correlationID = uuid.NewString()
	}
	w.Header().Set("X-Request-ID", rc.requestID)
	w.Header().Set("X-Correlation-ID", rc.correlationID)
	return rc
}

// withIDs serves a route outside the envelope with the request and
// correlation ids echoed (or generated) in its response headers, as every
// other route answers them.
func withIDs(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		newRequestContext(w, r)
		h(w, r)
	}
}

func (s *Server) handle(pattern string, ep endpoint) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		rc := newRequestContext(w, r)
		defer func() {
			if p := recover(); p != nil {
				s.ErrorContext(r.Context(), "panic serving request", "panic", p, "stack", string(debug.Stack()), "request_id", rc.requestID)
				s.writeError(w, rc, ep.domain, ep.action, errors.New("panic"))
			}
		}()
		status, data, err := s.serve(w, r, rc, ep)
		if err != nil && r.Context().Err() != nil && !errors.Is(err, errBodyUnread) {
			s.clientGone(r, rc, err)
			return
		}
		if err != nil {
			s.writeError(w, rc, ep.domain, ep.action, err)
			return
		}
		s.writeJSON(w, status, successEnvelope{
			RequestID: rc.requestID, CorrelationID: rc.correlationID,
			Type: messageType{Domain: ep.domain, Action: ep.action}, SchemaVersion: schemaVersion,
			Status: "success", Data: data,
		})
	})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, rc *requestContext, ep endpoint) (int, any, error) {
	if da := r.Header.Get("X-Domain-Action"); da != "" && da != ep.domain+"."+ep.action {
		return 0, nil, newAPIError(http.StatusBadRequest, ep.domain+"."+ep.action+".invalid_request",
			"X-Domain-Action %q does not name this endpoint (%s.%s)", da, ep.domain, ep.action)
	}
	p, err := s.authenticate(r)
	if err != nil {
		return 0, nil, err
	}
	if ae := s.limiter.allow(classOf(r), p.tenantID, time.Now()); ae != nil {
		return 0, nil, ae
	}
	if !p.has(ep.scope) {
		return 0, nil, newAPIError(http.StatusForbidden, "workflow.access.forbidden", "the token lacks the %s scope", ep.scope)
	}
	req := &request{Request: r, requestContext: rc, principal: p}
	if r.Method == http.MethodPost || r.Method == http.MethodPut {
		if req.envelope, err = decodeEnvelope(w, r, ep.domain, ep.action); err != nil {
			return 0, nil, err
		}
		if req.envelope.CorrelationID != "" && r.Header.Get("X-Correlation-ID") == "" {
			rc.correlationID = req.envelope.CorrelationID
			w.Header().Set("X-Correlation-ID", rc.correlationID)
		}
	}
	if err := s.checkRequestIDs(w, req, ep.domain, ep.action); err != nil {
		return 0, nil, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	if !ep.tx {
		return ep.run(ctx, req, s.pool)
	}
	var (
		status int
		data   any
		replay *dbsqlc.IdempotencyKey
	)
	err = s.engine.WithTx(ctx, func(tx pgx.Tx) error {
		status, data, replay = 0, nil, nil // WithTx may run this again
		key := ""
		if req.envelope != nil {
			key = req.envelope.MessageID
		}
		if key != "" {
			claimed, err := s.claimMessageID(ctx, tx, p.tenantID, ep, key)
			if err != nil {
				return err
			}
			if !claimed {
				replay, err = s.q.IdempotencyGet(ctx, tx, &dbsqlc.IdempotencyGetParams{TenantID: p.tenantID, Endpoint: ep.domain + "." + ep.action, MessageID: key})
				return err
			}
		}
		var err error
		status, data, err = ep.run(ctx, req, tx)
		if err != nil || key == "" {
			return err
		}
		body, err := json.Marshal(data)
		if err != nil {
			return fmt.Errorf("encoding answer: %w", err)
		}
		return s.q.IdempotencySetResponse(ctx, tx, &dbsqlc.IdempotencySetResponseParams{
			TenantID: p.tenantID, Endpoint: ep.domain + "." + ep.action, MessageID: key,
			StatusCode: int32(status), Response: body,
		})
	})
	if err != nil {
		return 0, nil, err
	}
	if replay != nil {
		w.Header().Set("X-Idempotent-Replay", "true")
		return int(deref32(replay.StatusCode)), json.RawMessage(replay.Response), nil
	}
	if ep.after != nil {
		return ep.after(r.Context(), req, status, data)
	}
	return status, data, nil
}

// clientGone logs a request that failed because its client hung up before
// the answer: the request's context ended, which cancelled its work. That is
// the client's doing, not a server error, and there is no one to answer.
func (s *Server) clientGone(r *http.Request, rc *requestContext, err error) {
	s.Info("client closed the request before its answer", "method", r.Method, "path", r.URL.Path, "error", err,
		"request_id", rc.requestID, "correlation_id", rc.correlationID)
}

// claimMessageID records a message_id; false means an earlier request with
// it has committed its answer.
func (s *Server) claimMessageID(ctx context.Context, tx pgx.Tx, tenant string, ep endpoint, key string) (bool, error) {
	_, err := s.q.IdempotencyClaim(ctx, tx, &dbsqlc.IdempotencyClaimParams{TenantID: tenant, Endpoint: ep.domain + "." + ep.action, MessageID: key})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claiming message_id: %w", err)
	}
	return true, nil
}

// writeError renders any error as the error envelope. Errors Baton
// does not know become a generic 500 that leaks nothing; an outage of the
// database is logged and answered 503. An error with retry_after_ms also
// gets a Retry-After header, in whole seconds, at least 1.
func (s *Server) writeError(w http.ResponseWriter, rc *requestContext, domain, action string, err error) {
	ae := toAPIError(err, domain, action)
	switch {
	case ae == nil:
		s.Error("request failed", "error", err, "request_id", rc.requestID, "correlation_id", rc.correlationID)
		ae = newAPIError(http.StatusInternalServerError, "workflow.service.internal_error", "internal error; see the server log for request %s", rc.requestID)
	case engine.IsUnavailable(err):
		s.Warn("database unavailable", "error", err, "request_id", rc.requestID, "correlation_id", rc.correlationID)
	}
	if ae.retryAfterMS != nil {
		w.Header().Set("Retry-After", strconv.FormatInt(max(1, (*ae.retryAfterMS+999)/1000), 10))
	}
	details := ae.details
	if details == nil {
		details = map[string]any{}
	}
	s.writeJSON(w, ae.status, errorEnvelope{
		Type: messageType{Domain: domain, Action: "error"},
		Error: errorBody{Code: ae.code, HTTPStatus: ae.status, Message: ae.message, Details: details,
			Retryable: ae.retryable, RetryAfterMS: ae.retryAfterMS},
		CorrelationID: rc.correlationID, RequestID: rc.requestID,
	})
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		s.Error("encoding response", "error", err)
		http.Error(w, `{"error":{"code":"workflow.service.internal_error"}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func deref32(p *int32) int32 {
	if p == nil {
		return http.StatusOK
	}
	return *p
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
