package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/batonrun/baton/live"
)

// Close codes of GET /api/v1/ws besides the standard ones.
const (
	// CloseSlowConsumer closes a client that does not read fast enough: its
	// buffer of pending events overflowed. The reason names the last
	// event_id sent; reconnecting with since=<it> loses nothing.
	CloseSlowConsumer websocket.StatusCode = 4000
)

// streamEvents serves GET /api/v1/ws: the tenant's events, filtered,
// replayed from since and then live (docs/api.md, "WebSocket").
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) {
	rc := newRequestContext(w, r)
	const domain, action = "stream", "events"
	p, err := s.authenticateTenant(r, true)
	if err != nil {
		s.writeError(w, rc, domain, action, err)
		return
	}
	if !p.has(ScopeWorkflowsRead) {
		s.writeError(w, rc, domain, action, newAPIError(http.StatusForbidden, "workflow.access.forbidden", "the token lacks the %s scope", ScopeWorkflowsRead))
		return
	}
	query := r.URL.Query()
	since := int64(-1)
	if v := query.Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.writeError(w, rc, domain, action, newAPIError(http.StatusBadRequest, "stream.events.invalid_request", "since must be a non-negative event_id").with("field", "since"))
			return
		}
		since = n
	}
	if s.hub == nil {
		s.writeError(w, rc, domain, action, newAPIError(http.StatusServiceUnavailable, "workflow.service.unavailable", "this server streams no events"))
		return
	}
	filter := live.Filter{
		TenantID: p.tenantID, ExecutionID: query.Get("execution_id"),
		WorkflowID: query.Get("workflow_id"), ThreadID: query.Get("thread_id"),
	}
	subCtx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	sub, err := s.hub.Subscribe(subCtx, filter)
	cancel()
	if err != nil {
		retry := int64(1000)
		ae := newAPIError(http.StatusServiceUnavailable, "workflow.service.unavailable", "the event stream is not available: %v", err)
		ae.retryable, ae.retryAfterMS = true, &retry
		s.writeError(w, rc, domain, action, ae)
		return
	}
	defer sub.Close()
	// The server's read and write timeouts bound requests, not a stream
	// that lives for hours: clear them before the connection is taken over
	// (each write still has streamWriteTimeout). net/http's Hijack clears
	// them too; saying so here keeps the stream from depending on it.
	deadlines := http.NewResponseController(w)
	_ = deadlines.SetReadDeadline(time.Time{})
	_ = deadlines.SetWriteDeadline(time.Time{})
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept has answered the client
	}
	defer func() { _ = conn.CloseNow() }()
	ctx, stop := context.WithCancel(r.Context())
	defer stop()
	// Messages from the client are ignored; reading also answers pings
	// and close frames, and notices a closed connection.
	go func() {
		defer stop()
		for {
			if _, _, err := conn.Read(ctx); err != nil {
				return
			}
		}
	}()
	st := &stream{conn: conn, timeout: s.streamWriteTimeout, last: since}
	if since < 0 {
		st.last = sub.Start
	} else if since < sub.Start {
		if err := s.hub.Replay(ctx, filter, since, sub.Start, st.send(ctx)); err != nil {
			s.streamEnded(ctx, conn, err)
			return
		}
	}
	for {
		ev, err := sub.Next(ctx)
		switch {
		case errors.Is(err, live.ErrLagged):
			_ = conn.Close(CloseSlowConsumer, fmt.Sprintf("slow consumer: reconnect with since=%d", st.last))
			return
		case errors.Is(err, live.ErrStopped):
			_ = conn.Close(websocket.StatusGoingAway, "server stopping")
			return
		case err != nil:
			return // the client went away
		}
		if err := st.send(ctx)(ev); err != nil {
			s.streamEnded(ctx, conn, err)
			return
		}
	}
}

// stream writes events to one client, skipping what it already has.
type stream struct {
	conn    *websocket.Conn
	timeout time.Duration
	last    int64
}

func (st *stream) send(ctx context.Context) func(*live.Event) error {
	return func(ev *live.Event) error {
		if ev.ID <= st.last {
			return nil
		}
		wctx, cancel := context.WithTimeout(ctx, st.timeout)
		defer cancel()
		if err := st.conn.Write(wctx, websocket.MessageText, ev.Message); err != nil {
			return fmt.Errorf("writing event %d: %w", ev.ID, err)
		}
		st.last = ev.ID
		return nil
	}
}

// streamEnded closes a stream after an error: a client that went away or
// stopped reading needs no word; a server-side failure gets 1011.
func (s *Server) streamEnded(ctx context.Context, conn *websocket.Conn, err error) {
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || websocket.CloseStatus(err) != -1 {
		return
	}
	s.Warn("event stream failed", "error", err)
	_ = conn.Close(websocket.StatusInternalError, "internal error")
}

// serveMetrics serves GET /metrics, to holders of the metrics token when
// one is configured.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	rc := newRequestContext(w, r)
	if s.metrics == nil {
		http.NotFound(w, r)
		return
	}
	if s.metricsToken != "" {
		// Hashed first, so that the comparison takes the same time whatever
		// the length of what was sent.
		got, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		gotSum, wantSum := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(s.metricsToken))
		if subtle.ConstantTimeCompare(gotSum[:], wantSum[:]) != 1 || !bearer {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			s.writeError(w, rc, "metrics", "scrape", newAPIError(http.StatusUnauthorized,
				"workflow.access.unauthorized", "/metrics needs \"Authorization: Bearer <BATON_METRICS_TOKEN>\""))
			return
		}
	}
	s.metrics.ServeHTTP(w, r)
}
