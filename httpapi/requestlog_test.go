package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// uuidV4 is a UUID of version 4 and the RFC 4122 variant, as text.
var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// The request and correlation ids Baton makes up are UUIDs of version 4
// and the RFC 4122 variant: in the headers and envelopes of answers and
// errors, and when an over-long X-Correlation-ID is replaced.
func TestGeneratedIDsAreUUIDv4(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	check := func(r *response) {
		t.Helper()
		for _, h := range []string{"X-Request-ID", "X-Correlation-ID"} {
			require.Regexp(t, uuidV4, r.header.Get(h), h)
		}
		require.Equal(t, r.header.Get("X-Request-ID"), r.body["request_id"])
		require.Equal(t, r.header.Get("X-Correlation-ID"), r.body["correlation_id"])
	}
	// Each id has a one in 16 chance of a 4 in its version digit by luck,
	// and 4 in 16 of a variant digit in 8, 9, a or b: 20 answers leave no
	// chance for ids that are merely random.
	for range 10 {
		r := b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/definitions"})
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		check(r)
		r = b.do(t, call{method: http.MethodGet, path: "/api/v1/threads/nobody"})
		require.Equal(t, http.StatusNotFound, r.status, "%s", r.raw)
		check(r)
	}
	r := b.do(t, call{method: http.MethodGet, path: "/api/v1/threads/nobody", headers: map[string]string{"X-Correlation-ID": strings.Repeat("c", 300)}})
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.raw)
	check(r)
}

// logRecords is a slog handler that keeps every record.
type logRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}

func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

// find returns the records with this message, and those at level or above.
func (l *logRecords) find(message string, level slog.Level) (matching, atLevel []slog.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.records {
		if r.Message == message {
			matching = append(matching, r)
		}
		if r.Level >= level {
			atLevel = append(atLevel, r)
		}
	}
	return matching, atLevel
}

// A client that hangs up while its request waits is logged at INFO, not as
// a server error, and its request changes nothing.
func TestClientHangUpIsNotAnError(t *testing.T) {
	t.Parallel()
	logs := &logRecords{}
	b := setup(t, setupOpts{logger: slog.New(logs)})
	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/threads", body: envelope(map[string]any{"thread_id": "q", "channel": "web", "contact": "q"})})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)

	// The thread's row is held, so that PUT …/queue waits for it.
	ctx := context.Background()
	holder, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `SELECT 1 FROM thread WHERE thread_id = 'q' FOR UPDATE`)
	require.NoError(t, err)

	reqCtx, hangUp := context.WithCancel(ctx)
	defer hangUp()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPut, b.server.URL+"/api/v1/threads/q/queue", strings.NewReader(`{"payload": {"cap": 3}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant-ID", b.tenant)
	req.Header.Set("X-Request-ID", "hung-up-1")
	req.Header.Set("Authorization", "Bearer "+b.token)
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		done <- err
	}()
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
		return waiting == 1
	}, 10*time.Second, 10*time.Millisecond, "the request waits for the thread's row")
	hangUp()
	require.ErrorIs(t, <-done, context.Canceled)

	require.Eventually(t, func() bool {
		gone, _ := logs.find("client closed the request before its answer", slog.LevelInfo)
		return len(gone) == 1
	}, 10*time.Second, 10*time.Millisecond, "the hang-up is logged")
	gone, errs := logs.find("client closed the request before its answer", slog.LevelWarn)
	require.Empty(t, errs, "a hang-up is not a server error")
	require.Equal(t, slog.LevelInfo, gone[0].Level)
	attrs := map[string]string{}
	gone[0].Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	require.Equal(t, "hung-up-1", attrs["request_id"])
	require.Equal(t, "/api/v1/threads/q/queue", attrs["path"])

	require.NoError(t, holder.Rollback(ctx))
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/threads/q"})
	require.Equal(t, "default", r.data()["queue"].(map[string]any)["sources"].(map[string]any)["cap"], "the hung-up request stored nothing")
}
