package httpapi_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// readTimeoutServer serves the bundle's API with a short read timeout, as
// baton serve does with http.readTimeout.
func (b *testBundle) readTimeoutServer(t *testing.T, read time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(b.api.Handler())
	srv.Config.ReadTimeout = read
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// rawPost opens a connection and sends a POST's headers, declaring a body
// of declared bytes, and the first bytes of that body.
func (b *testBundle) rawPost(t *testing.T, srv *httptest.Server, path string, declared int, start string) *net.TCPConn {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	// A generous bound: the answer is due after the server's read timeout.
	require.NoError(t, conn.SetDeadline(time.Now().Add(20*time.Second)))
	_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: baton\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"+
		"X-Tenant-ID: %s\r\nAuthorization: Bearer %s\r\n\r\n%s", path, declared, b.tenant, b.token, start)
	require.NoError(t, err)
	return conn.(*net.TCPConn)
}

// readAnswer reads the server's answer on conn and checks it against the
// OpenAPI document.
func (b *testBundle) readAnswer(t *testing.T, conn net.Conn, path string) (*http.Response, map[string]any) {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var body map[string]any
	require.NoError(t, json.Unmarshal(raw, &body), "status %d, body %q", resp.StatusCode, raw)
	req, err := http.NewRequest(http.MethodPost, b.server.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	b.validator.Check(t, req, resp.StatusCode, resp.Header, raw)
	return resp, body
}

// A body sent a byte at a time and cut by the server's read timeout is
// answered 408 request.body.timeout in the error envelope, never 200: the
// request did nothing, and a client must not read it as done.
func TestSlowBodyCutByReadTimeoutIs408(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	srv := b.readTimeoutServer(t, 300*time.Millisecond)
	const path = "/api/v1/workflow/validate"
	conn := b.rawPost(t, srv, path, 1000, `{"payload": `)
	// Drip the rest one byte at a time until the server answers.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	resp, body := b.readAnswer(t, conn, path)
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "%v", body)
	e := body["error"].(map[string]any)
	require.Equal(t, "request.body.timeout", e["code"])
	require.Equal(t, float64(http.StatusRequestTimeout), e["http_status"])
	require.Equal(t, true, e["retryable"])
	require.Equal(t, "error", body["type"].(map[string]any)["action"])
}

// A body that ends before its Content-Length (the client closed its side)
// is answered 400 request.body.incomplete, not 200 and not the JSON
// decoder's complaint.
func TestShortBodyIs400(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	srv := b.readTimeoutServer(t, 10*time.Second)
	const path = "/api/v1/workflow/validate"
	conn := b.rawPost(t, srv, path, 1000, `{"payload": {"workflow_id": "x"`)
	require.NoError(t, conn.CloseWrite())
	resp, body := b.readAnswer(t, conn, path)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%v", body)
	require.Equal(t, "request.body.incomplete", body["error"].(map[string]any)["code"])
}

// Over HTTP/2 (TLS), where the read timeout cuts one stream rather than
// the connection, a stalled body is answered 408 the same way.
func TestSlowBodyOverHTTP2Is408(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	srv := httptest.NewUnstartedServer(b.api.Handler())
	srv.EnableHTTP2 = true
	srv.Config.ReadTimeout = 300 * time.Millisecond
	srv.StartTLS()
	t.Cleanup(srv.Close)
	const path = "/api/v1/workflow/validate"
	body, w := io.Pipe()
	t.Cleanup(func() { _ = w.Close() })
	go func() { _, _ = w.Write([]byte(`{"payload": `)) }() // and nothing more
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path, body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant-ID", b.tenant)
	req.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "HTTP/2.0", resp.Proto)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "%s", raw)
	var got map[string]any
	require.NoError(t, json.Unmarshal(raw, &got))
	require.Equal(t, "request.body.timeout", got["error"].(map[string]any)["code"])
}
