package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/httpapi"
)

// openSession signs in with a token the way the console does and returns
// the session and its cookie.
func openSession(t *testing.T, b *testBundle, token string) (httpapi.Session, *http.Cookie) {
	t.Helper()
	sess, err := b.api.SessionFromToken(token)
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	sess, err = b.api.StartSession(rec, httptest.NewRequest(http.MethodPost, "/console/signin", nil), sess)
	require.NoError(t, err)
	cookies := rec.Result().Cookies()
	require.Len(t, cookies, 1)
	return sess, cookies[0]
}

func TestSessionCookieIsStrictAndEndsWithItsToken(t *testing.T) {
	b := setup(t, setupOpts{})
	sess, cookie := openSession(t, b, b.token)
	require.Equal(t, httpapi.SessionCookie, cookie.Name)
	require.True(t, cookie.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, cookie.SameSite)
	require.Equal(t, "/", cookie.Path)
	require.Equal(t, b.tenant, sess.TenantID)
	require.ElementsMatch(t, []string{httpapi.ScopeWorkflowsRead, httpapi.ScopeWorkflowsWrite}, sess.Scopes)
	require.NotEmpty(t, sess.CSRF)
	// The token lives an hour: so does the session, not the 12 h maximum.
	require.WithinDuration(t, time.Now().Add(time.Hour), sess.Expires, 2*time.Second)
	require.WithinDuration(t, sess.Expires, cookie.Expires, time.Second)

	long, err := httpapi.MintToken(secret, b.tenant, "test", nil, 20*24*time.Hour)
	require.NoError(t, err)
	sess, _ = openSession(t, b, long)
	require.WithinDuration(t, time.Now().Add(httpapi.MaxSessionLifetime), sess.Expires, 2*time.Second)

	for name, bad := range map[string]string{
		"garbage":          "not-a-token",
		"wrong secret":     mustMint(t, []byte("another-secret-0123456789-0123456789"), b.tenant),
		"expired":          mustMintTTL(t, b.tenant, -time.Minute),
		"session as token": cookie.Value,
	} {
		_, err := b.api.SessionFromToken(bad)
		require.Error(t, err, name)
	}
}

func mustMint(t *testing.T, key []byte, tenant string) string {
	t.Helper()
	tok, err := httpapi.MintToken(key, tenant, "test", nil, time.Hour)
	require.NoError(t, err)
	return tok
}

func mustMintTTL(t *testing.T, tenant string, ttl time.Duration) string {
	t.Helper()
	tok, err := httpapi.MintToken(secret, tenant, "test", nil, ttl)
	require.NoError(t, err)
	return tok
}

// cookieCall is an API request that carries a session cookie and no token.
func cookieCall(t *testing.T, b *testBundle, method, path string, cookie *http.Cookie, headers map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, b.server.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(cookie)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(raw)
}

func TestSessionCookieAuthenticatesTheAPIWithCSRF(t *testing.T) {
	b := setup(t, setupOpts{})
	b.define(t, `{"workflow_id":"w","version":"1","nodes":[{"id":"start","type":"start","next":"wait"},
		{"id":"wait","type":"action","actionType":"wait_for_event","parameters":{"event_id":"go","timeout":"1h"},"next":"end"},{"id":"end","type":"end"}]}`)
	sess, cookie := openSession(t, b, b.token)
	start := `{"payload":{"workflow_id":"w"}}`

	status, body := cookieCall(t, b, http.MethodGet, "/api/v1/workflow/executions", cookie, nil, "")
	require.Equal(t, http.StatusOK, status, body)

	status, body = cookieCall(t, b, http.MethodPost, "/api/v1/workflow/execute", cookie, nil, start)
	require.Equal(t, http.StatusForbidden, status, body)
	require.Contains(t, body, httpapi.CSRFHeader)

	status, body = cookieCall(t, b, http.MethodPost, "/api/v1/workflow/execute", cookie, map[string]string{httpapi.CSRFHeader: "stale"}, start)
	require.Equal(t, http.StatusForbidden, status, body)

	status, body = cookieCall(t, b, http.MethodPost, "/api/v1/workflow/execute", cookie,
		map[string]string{httpapi.CSRFHeader: sess.CSRF, "Origin": "https://evil.example"}, start)
	require.Equal(t, http.StatusForbidden, status, body)

	status, body = cookieCall(t, b, http.MethodGet, "/api/v1/workflow/executions", cookie, map[string]string{"X-Tenant-ID": "someone-else"}, "")
	require.Equal(t, http.StatusForbidden, status, body)

	// Nothing was started by the refused requests.
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT count(*) FROM agent_execution").Scan(&n))
	require.Zero(t, n)

	status, body = cookieCall(t, b, http.MethodPost, "/api/v1/workflow/execute", cookie,
		map[string]string{httpapi.CSRFHeader: sess.CSRF, "Origin": b.server.URL}, start)
	require.Equal(t, http.StatusAccepted, status, body)

	// A forged cookie, and an API token put in the cookie, are refused.
	for _, value := range []string{cookie.Value[:len(cookie.Value)-3] + "abc", b.token} {
		forged := &http.Cookie{Name: httpapi.SessionCookie, Value: value}
		status, body = cookieCall(t, b, http.MethodGet, "/api/v1/workflow/executions", forged, nil, "")
		require.Equal(t, http.StatusUnauthorized, status, body)
	}
}

func TestReadOnlySessionIsForbiddenToAct(t *testing.T) {
	b := setup(t, setupOpts{})
	sess, cookie := openSession(t, b, mint(t, b.tenant, httpapi.ScopeWorkflowsRead))
	status, body := cookieCall(t, b, http.MethodPost, "/api/v1/workflow/execute", cookie,
		map[string]string{httpapi.CSRFHeader: sess.CSRF}, `{"payload":{"workflow_id":"w"}}`)
	require.Equal(t, http.StatusForbidden, status, body)
	require.Contains(t, body, "lacks the workflows:write scope")
	status, body = cookieCall(t, b, http.MethodGet, "/api/v1/monitor/lanes", cookie, nil, "")
	require.Equal(t, http.StatusForbidden, status, body)
}

func TestSessionCookieOpensTheStreamFromItsOwnOriginOnly(t *testing.T) {
	b := setup(t, setupOpts{stream: true})
	_, cookie := openSession(t, b, b.token)
	u := "ws" + strings.TrimPrefix(b.server.URL, "http") + "/api/v1/ws"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	header := http.Header{"Cookie": {cookie.String()}, "Origin": {b.server.URL}}
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: header})
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	_ = conn.Close(websocket.StatusNormalClosure, "")

	header = http.Header{"Cookie": {cookie.String()}, "Origin": {"https://evil.example"}}
	_, resp, err = websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: header})
	require.Error(t, err)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	_, resp, err = websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {b.server.URL}}})
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}
