package httpapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/httpapi"
)

// Every answer carries X-Content-Type-Options: nosniff — envelopes,
// errors of every kind, the probes, the OpenAPI document and /metrics —
// so that no browser runs a JSON answer holding a tenant's text as
// something else.
func TestEveryAnswerIsNoSniff(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	api, err := httpapi.New(httpapi.Config{Engine: b.engine, Pool: b.pool, JWTSecret: secret, MetricsToken: "scrape-token",
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up 1\n") })})
	require.NoError(t, err)
	metricsSrv := httptest.NewServer(api.Handler())
	t.Cleanup(metricsSrv.Close)

	for _, c := range []struct {
		call   call
		status int
	}{
		{call{method: http.MethodGet, path: "/api/v1/workflow/definitions"}, http.StatusOK},
		{call{method: http.MethodPost, path: "/api/v1/workflow/validate", raw: []byte(`{"payload": 1}`)}, http.StatusBadRequest},
		{call{method: http.MethodGet, path: "/api/v1/workflow/executions/nope"}, http.StatusNotFound},
		{call{method: http.MethodGet, path: "/api/v1/workflow/definitions", token: ptr("")}, http.StatusUnauthorized},
		{call{method: http.MethodGet, path: "/api/v1/monitor/lanes"}, http.StatusForbidden},
		{call{method: http.MethodGet, path: "/healthz"}, http.StatusOK},
		{call{method: http.MethodGet, path: "/readyz"}, http.StatusOK},
		{call{method: http.MethodGet, path: "/api/v1/openapi.yaml"}, http.StatusOK},
	} {
		r := b.do(t, c.call)
		require.Equal(t, c.status, r.status, "%s %s: %s", c.call.method, c.call.path, r.raw)
		require.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"), "%s %s", c.call.method, c.call.path)
	}
	// What the document does not describe: a path no route has, a method
	// a path is not served with, /metrics with and without its token.
	for _, c := range []struct {
		srv          *httptest.Server
		method, path string
		auth         string
		status       int
	}{
		{b.server, http.MethodGet, "/nowhere", "", http.StatusNotFound},
		{b.server, http.MethodDelete, "/api/v1/workflow/definitions", "", http.StatusMethodNotAllowed},
		{metricsSrv, http.MethodGet, "/metrics", "Bearer scrape-token", http.StatusOK},
		{metricsSrv, http.MethodGet, "/metrics", "", http.StatusUnauthorized},
	} {
		req, err := http.NewRequest(c.method, c.srv.URL+c.path, nil)
		require.NoError(t, err)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, c.status, resp.StatusCode, "%s %s", c.method, c.path)
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), "%s %s", c.method, c.path)
	}

	// A body cut by the read timeout is answered nosniff too.
	slow := b.readTimeoutServer(t, 200*time.Millisecond)
	conn := b.rawPost(t, slow, "/api/v1/workflow/validate", 100, "{")
	resp, _ := b.readAnswer(t, conn, "/api/v1/workflow/validate")
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
}
