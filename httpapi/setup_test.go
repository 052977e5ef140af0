package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/engine/workflow"
	"github.com/batonrun/baton/httpapi"
	"github.com/batonrun/baton/internal/openapitest"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/jobs"
	"github.com/batonrun/baton/live"
)

var secret = []byte("test-secret-0123456789-0123456789")

type testBundle struct {
	pool      *pgxpool.Pool
	api       *httpapi.Server
	engine    *engine.Engine
	channel   *engine.MemoryChannel
	server    *httptest.Server
	validator *openapitest.Validator
	tenant    string
	token     string
}

type setupOpts struct {
	tools map[string]engine.ToolFunc
	// lockTimeout overrides the stale-lock age.
	lockTimeout time.Duration
	// limits are the engine's limits; zero fields take the defaults.
	limits workflow.Limits
	// stream serves GET /api/v1/ws from an event hub of the bundle's own.
	stream bool
	// logger receives the server's log; nil discards it.
	logger *slog.Logger
}

var tenantSeq atomic.Int64

func setup(t *testing.T, opts setupOpts) *testBundle {
	t.Helper()
	pool := pgtest.NewPool(t)
	tools := engine.NewTools()
	for name, fn := range opts.tools {
		tools.Register(name, fn)
	}
	channel := &engine.MemoryChannel{}
	eng, err := engine.New(engine.Config{Pool: pool, Tools: tools, Channel: channel, LockTimeout: opts.lockTimeout, Limits: opts.limits})
	require.NoError(t, err)
	// Tests with a short lock timeout clear stale locks themselves: the
	// periodic reaper would race them.
	reap := time.Duration(0)
	if opts.lockTimeout > 0 {
		reap = -1
	}
	client, err := jobs.NewClient(pool, jobs.Config{Engine: eng, LockReapInterval: reap})
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(ctx)
	})
	t.Cleanup(eng.DeliverPromptly(8))
	var hub *live.Hub
	if opts.stream {
		hub, err = live.NewHub(live.Config{Pool: pool})
		require.NoError(t, err)
		hub.Start()
		t.Cleanup(hub.Stop)
	}
	api, err := httpapi.New(httpapi.Config{Engine: eng, Pool: pool, JWTSecret: secret, Hub: hub, Logger: opts.logger})
	require.NoError(t, err)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	tenant := fmt.Sprintf("tenant-%d", tenantSeq.Add(1))
	return &testBundle{
		pool: pool, api: api, engine: eng, channel: channel, server: srv,
		validator: openapitest.New(t, httpapi.OpenAPIDocument),
		tenant:    tenant, token: mint(t, tenant),
	}
}

func mint(t *testing.T, tenant string, scopes ...string) string {
	t.Helper()
	tok, err := httpapi.MintToken(secret, tenant, "test", scopes, time.Hour)
	require.NoError(t, err)
	return tok
}

// call is one API request.
type call struct {
	method, path string
	body         any
	// raw, when set, is sent as the body instead of body.
	raw     []byte
	tenant  *string
	token   *string
	headers map[string]string
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

// data returns the success envelope's data object.
func (r *response) data() map[string]any {
	d, _ := r.body["data"].(map[string]any)
	return d
}

// errorCode returns the error envelope's code.
func (r *response) errorCode() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// do sends the request and checks the answer against the OpenAPI document.
func (b *testBundle) do(t *testing.T, c call) *response {
	t.Helper()
	var reader io.Reader
	switch {
	case c.raw != nil:
		reader = bytes.NewReader(c.raw)
	case c.body != nil:
		buf, err := json.Marshal(c.body)
		require.NoError(t, err)
		reader = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(c.method, b.server.URL+c.path, reader)
	require.NoError(t, err)
	if reader != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	tenant, token := b.tenant, b.token
	if c.tenant != nil {
		tenant = *c.tenant
	}
	if c.token != nil {
		token = *c.token
	}
	if tenant != "" {
		req.Header.Set("X-Tenant-ID", tenant)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := &response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 && resp.Header.Get("Content-Type") == "application/json" {
		require.NoError(t, json.Unmarshal(raw, &out.body), "body: %s", raw)
	}
	vreq, err := http.NewRequest(c.method, b.server.URL+c.path, nil)
	require.NoError(t, err)
	for k, v := range req.Header {
		vreq.Header[k] = v
	}
	b.validator.Check(t, vreq, resp.StatusCode, resp.Header, raw)
	return out
}

func envelope(payload any) map[string]any { return map[string]any{"payload": payload} }

func ptr[T any](v T) *T { return &v }

func (b *testBundle) define(t *testing.T, definition string) {
	t.Helper()
	var payload map[string]any
	require.NoError(t, json.Unmarshal([]byte(definition), &payload))
	r := b.do(t, call{method: http.MethodPost, path: "/api/v1/workflow/definitions", body: envelope(payload)})
	require.Equal(t, http.StatusCreated, r.status, "%s", r.raw)
}

func (b *testBundle) waitTerminal(t *testing.T, executionID string) map[string]any {
	t.Helper()
	var last map[string]any
	require.Eventually(t, func() bool {
		r := b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/executions/" + executionID})
		last = r.data()
		switch last["status"] {
		case "completed", "failed", "timeout", "cancelled":
			return true
		}
		return false
	}, 20*time.Second, 25*time.Millisecond)
	return last
}
