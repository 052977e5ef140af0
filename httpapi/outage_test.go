package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
	"github.com/batonrun/baton/internal/openapitest"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/jobs"
)

// outageBundle builds a server on pool, whose jobs are inserted and never
// worked, so that nothing but the requests touches the database.
func outageBundle(t *testing.T, pool *pgxpool.Pool) *testBundle {
	t.Helper()
	eng, err := engine.New(engine.Config{Pool: pool, Channel: &engine.MemoryChannel{}})
	require.NoError(t, err)
	_, err = jobs.NewClient(pool, jobs.Config{Engine: eng, InsertOnly: true})
	require.NoError(t, err)
	api, err := httpapi.New(httpapi.Config{Engine: eng, Pool: pool, JWTSecret: secret})
	require.NoError(t, err)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	tenant := fmt.Sprintf("tenant-%d", tenantSeq.Add(1))
	return &testBundle{pool: pool, engine: eng, server: srv, validator: openapitest.New(t, httpapi.OpenAPIDocument),
		tenant: tenant, token: mint(t, tenant)}
}

// requireUnavailable checks an outage's answer: 503, the error envelope
// with workflow.service.unavailable, retryable, retry_after_ms, and a
// Retry-After header of whole seconds, at least 1.
func requireUnavailable(t *testing.T, r *response) {
	t.Helper()
	require.Equal(t, http.StatusServiceUnavailable, r.status, "%s", r.raw)
	require.Equal(t, "workflow.service.unavailable", r.errorCode(), "%s", r.raw)
	e := r.body["error"].(map[string]any)
	require.Equal(t, true, e["retryable"], "%s", r.raw)
	require.Equal(t, float64(1000), e["retry_after_ms"], "%s", r.raw)
	require.Equal(t, "1", r.header.Get("Retry-After"))
}

// The requests an outage test sends: a write in a transaction, reads.
func outageCalls(executionID string) []call {
	return []call{
		{method: http.MethodPost, path: "/api/v1/workflow/execute", body: envelope(map[string]any{
			"workflow_id": "hello", "input": map[string]any{"name": "Ana", "visits": 1}})},
		{method: http.MethodGet, path: "/api/v1/workflow/executions/" + executionID},
		{method: http.MethodGet, path: "/api/v1/workflow/definitions"},
	}
}

// A database whose connections are cut and which then refuses new ones is
// an outage: reads and writes are answered 503, retryable, with
// Retry-After, and succeed again once it is back.
func TestOutageLostConnections(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	proxy := startProxy(t, dbURL)
	cfg, err := pgxpool.ParseConfig(dbURL)
	require.NoError(t, err)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = "127.0.0.1", proxy.port(), nil
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := outageBundle(t, pool)
	b.define(t, helloWorkflow)
	r := b.do(t, outageCalls("")[0])
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	id := r.data()["execution_id"].(string)

	proxy.setDown(true)
	for _, c := range outageCalls(id) {
		requireUnavailable(t, b.do(t, c))
	}

	proxy.setDown(false)
	for _, c := range outageCalls(id) {
		r := b.do(t, c)
		require.Less(t, r.status, 300, "%s %s: %s", c.method, c.path, r.raw)
	}
}

// A database that turned read-only (a standby, a primary being demoted)
// answers writes 503 and reads as usual.
func TestOutageReadOnlyDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := outageBundle(t, pool)
	b.define(t, helloWorkflow)
	r := b.do(t, outageCalls("")[0])
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	id := r.data()["execution_id"].(string)

	setReadOnly(t, dbURL, true)
	calls := outageCalls(id)
	requireUnavailable(t, b.do(t, calls[0]))
	for _, c := range calls[1:] {
		r := b.do(t, c)
		require.Equal(t, http.StatusOK, r.status, "%s %s: %s", c.method, c.path, r.raw)
	}

	setReadOnly(t, dbURL, false)
	r = b.do(t, calls[0])
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
}

// setReadOnly makes the database at dbURL read-only for new sessions, or
// writable again, and ends the sessions it has.
func setReadOnly(t *testing.T, dbURL string, on bool) {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(dbURL)
	require.NoError(t, err)
	admin, err := pgx.Connect(ctx, pgtest.ServerURL())
	require.NoError(t, err)
	defer admin.Close(ctx)
	name := pgx.Identifier{cfg.Database}.Sanitize()
	sql := "ALTER DATABASE " + name + " SET default_transaction_read_only = on"
	if !on {
		sql = "ALTER DATABASE " + name + " RESET default_transaction_read_only"
	}
	_, err = admin.Exec(ctx, sql)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", cfg.Database)
	require.NoError(t, err)
}

// proxy forwards TCP connections to a PostgreSQL server; down cuts the
// connections it carries and closes the ones that come while it is down,
// as a server that went away would.
type proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

func startProxy(t *testing.T, dbURL string) *proxy {
	t.Helper()
	cfg, err := pgx.ParseConfig(dbURL)
	require.NoError(t, err)
	require.False(t, strings.HasPrefix(cfg.Host, "/"), "the proxy forwards TCP only, not to %s", cfg.Host)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, target: net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port)), conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.setDown(true)
	})
	return p
}

func (p *proxy) port() uint16 { return uint16(p.ln.Addr().(*net.TCPAddr).Port) }

func (p *proxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(client)
	}
}

func (p *proxy) forward(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
	_ = client.Close()
	_ = server.Close()
}

func (p *proxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			_ = c.Close()
		}
	}
}
