package console_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/httpapi"
	"github.com/batonrun/baton/internal/pgtest"
)

// sessionCookie is the session cookie the browser holds for the site.
func (b *browser) sessionCookie() *http.Cookie {
	b.t.Helper()
	u, err := url.Parse(b.site.server.URL)
	require.NoError(b.t, err)
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == httpapi.SessionCookie {
			return c
		}
	}
	b.t.Fatal("the browser holds no session cookie")
	return nil
}

// replay sends a GET with a saved session cookie and nothing else (no
// token, no tenant header), as someone who copied the cookie would, and
// returns the status and body.
func (s *site) replay(t *testing.T, cookie *http.Cookie, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.server.URL+path, nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
	client := &http.Client{Transport: s.server.Client().Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(raw)
}

// dialStream opens the event stream with a saved session cookie and
// returns the handshake's status.
func (s *site) dialStream(t *testing.T, cookie *http.Cookie) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(s.server.URL, "http") + "/api/v1/ws"
	header := http.Header{"Cookie": {(&http.Cookie{Name: cookie.Name, Value: cookie.Value}).String()}, "Origin": {s.server.URL}}
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: header})
	if err == nil {
		_ = conn.Close(websocket.StatusNormalClosure, "")
	}
	require.NotNil(t, resp)
	return resp.StatusCode
}

// TestSignOutEndsTheSessionInEveryProcess: two baton processes share a
// database; a browser signs in on one and its cookie works on both, for
// the console, the API and the event stream. Once it signs out, the saved
// cookie is refused by both, everywhere: there is nothing cached to
// outlive the sign-out.
func TestSignOutEndsTheSessionInEveryProcess(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	one, two := newSite(t, siteOpts{pool: pool}), newSite(t, siteOpts{pool: pool})
	tenant := newTenant()
	b := one.browser(t)
	require.Equal(t, http.StatusSeeOther, b.signIn(one.token(t, tenant)).status)
	saved := b.sessionCookie()

	for _, s := range []*site{one, two} {
		status, body := s.replay(t, saved, "/console/executions")
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, body, `<b id="tenant">`+tenant+`</b>`)
		status, body = s.replay(t, saved, "/api/v1/workflow/executions")
		require.Equal(t, http.StatusOK, status, body)
		require.Equal(t, http.StatusSwitchingProtocols, s.dialStream(t, saved))
	}

	p := b.do(http.MethodPost, "/console/signout", nil, map[string]string{"Origin": one.server.URL})
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Contains(t, p.header.Get("Set-Cookie"), httpapi.SessionCookie+"=;", "the browser's cookie is cleared")

	for _, s := range []*site{one, two} {
		status, _ := s.replay(t, saved, "/console/executions")
		require.Equal(t, http.StatusFound, status, "the console sends the saved cookie to the sign-in")
		status, body := s.replay(t, saved, "/api/v1/workflow/executions")
		require.Equal(t, http.StatusUnauthorized, status, body)
		require.Contains(t, body, "workflow.access.unauthorized")
		require.Contains(t, body, "was ended: sign in again")
		require.Equal(t, http.StatusUnauthorized, s.dialStream(t, saved))
	}
	status, _ := one.replay(t, saved, "/console/signin")
	require.Equal(t, http.StatusOK, status, "the sign-in page still opens")
}

// TestSessionCookieHoldsOnlyARandomID: the cookie is 32 random bytes, not
// the token nor a token of its own; what the session may do is in its
// row, keyed by the id's HMAC, so the table holds no cookie.
func TestSessionCookieHoldsOnlyARandomID(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOpts{})
	tenant := newTenant()
	token := s.token(t, tenant, httpapi.ScopeWorkflowsRead, httpapi.ScopeMonitorRead)
	b := s.browser(t)
	require.Equal(t, http.StatusSeeOther, b.signIn(token).status)
	cookie := b.sessionCookie()
	id, err := base64.RawURLEncoding.DecodeString(cookie.Value)
	require.NoError(t, err)
	require.Len(t, id, 32)
	require.NotContains(t, cookie.Value, ".", "not a JWT")

	var (
		rowTenant string
		scopes    []string
		stored    []byte
		lifetime  time.Duration
	)
	require.NoError(t, s.pool.QueryRow(context.Background(),
		"SELECT tenant_id, scopes, id, expires_at - created_at FROM console_session").Scan(&rowTenant, &scopes, &stored, &lifetime))
	require.Equal(t, tenant, rowTenant)
	require.Equal(t, []string{httpapi.ScopeWorkflowsRead, httpapi.ScopeMonitorRead}, scopes)
	require.NotEqual(t, id, stored, "the row is keyed by the id's HMAC, not the id")
	require.NotEqual(t, []byte(cookie.Value), stored)
	require.InDelta(t, time.Hour.Seconds(), lifetime.Seconds(), 5, "the session ends with its token")

	again := s.browser(t)
	require.Equal(t, http.StatusSeeOther, again.signIn(token).status)
	require.NotEqual(t, cookie.Value, again.sessionCookie().Value, "each sign-in is a session of its own")

	// A value that is not a session id, and an id no session has, are
	// refused like an ended session.
	for _, value := range []string{token, base64.RawURLEncoding.EncodeToString(make([]byte, 32))} {
		status, body := s.replay(t, &http.Cookie{Name: httpapi.SessionCookie, Value: value}, "/api/v1/workflow/executions")
		require.Equal(t, http.StatusUnauthorized, status, body)
	}
}

// TestExpiredSessionIsRefused: a session past its expiry is refused by the
// console and the API, whatever the cookie's own expiry says.
func TestExpiredSessionIsRefused(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOpts{})
	b := s.browser(t)
	require.Equal(t, http.StatusSeeOther, b.signIn(s.token(t, newTenant())).status)
	saved := b.sessionCookie()
	status, _ := s.replay(t, saved, "/console/executions")
	require.Equal(t, http.StatusOK, status)

	_, err := s.pool.Exec(context.Background(), "UPDATE console_session SET expires_at = now() - interval '1 second'")
	require.NoError(t, err)
	status, _ = s.replay(t, saved, "/console/executions")
	require.Equal(t, http.StatusFound, status)
	status, body := s.replay(t, saved, "/api/v1/workflow/executions")
	require.Equal(t, http.StatusUnauthorized, status, body)
}

// TestSessionCookieIsSecureOverTLS: the cookie is Secure when the browser
// reached Baton over TLS: the request came over TLS, or from a trusted
// proxy whose X-Forwarded-Proto says https. The header of anyone else is
// ignored.
func TestSessionCookieIsSecureOverTLS(t *testing.T) {
	t.Parallel()
	tls := newSite(t, siteOpts{tls: true})
	b := tls.browser(t)
	p := b.signIn(tls.token(t, newTenant()))
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Contains(t, p.header.Get("Set-Cookie"), "; Secure")
	require.Equal(t, http.StatusOK, b.get("/console/executions").status, "the browser sends it back over TLS")
	p = b.do(http.MethodPost, "/console/signout", nil, map[string]string{"Origin": tls.server.URL})
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Contains(t, p.header.Get("Set-Cookie"), "; Secure", "the cookie that clears it too")

	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	behindProxy := newSite(t, siteOpts{trustedProxies: loopback})
	elsewhere := newSite(t, siteOpts{trustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	plain := newSite(t, siteOpts{})
	for _, tc := range []struct {
		name   string
		site   *site
		proto  string
		secure bool
	}{
		{"a trusted proxy that says https", behindProxy, "https", true},
		{"a trusted proxy that says HTTPS, then http", behindProxy, "HTTPS, http", true},
		{"a trusted proxy that says http", behindProxy, "http", false},
		{"a trusted proxy that says nothing", behindProxy, "", false},
		{"an untrusted peer that says https", elsewhere, "https", false},
		{"no trusted proxy", plain, "https", false},
	} {
		headers := map[string]string{"Origin": tc.site.server.URL}
		if tc.proto != "" {
			headers["X-Forwarded-Proto"] = tc.proto
		}
		p := tc.site.browser(t).do(http.MethodPost, "/console/signin",
			url.Values{"token": {tc.site.token(t, newTenant())}}, headers)
		require.Equal(t, http.StatusSeeOther, p.status, tc.name)
		require.Equal(t, tc.secure, strings.Contains(p.header.Get("Set-Cookie"), "; Secure"), tc.name)
	}
}

// TestSignInsShareTheTenantsWriteRateLimit: each sign-in stores a session,
// so it counts against its tenant's write rate limit; over it, the sign-in
// is answered 429 and stores nothing.
func TestSignInsShareTheTenantsWriteRateLimit(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOpts{writeLimit: httpapi.RateLimit{Rate: 0.01, Burst: 2}})
	busy, quiet := newTenant(), newTenant()
	for range 2 {
		require.Equal(t, http.StatusSeeOther, s.browser(t).signIn(s.token(t, busy)).status)
	}
	p := s.browser(t).signIn(s.token(t, busy))
	require.Equal(t, http.StatusTooManyRequests, p.status)
	require.NotEmpty(t, p.header.Get("Retry-After"))
	require.Empty(t, p.header.Values("Set-Cookie"))
	require.Equal(t, http.StatusSeeOther, s.browser(t).signIn(s.token(t, quiet)).status, "another tenant is not limited")
	var n int
	require.NoError(t, s.pool.QueryRow(context.Background(), "SELECT count(*) FROM console_session").Scan(&n))
	require.Equal(t, 3, n)
}
