package console_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/console"
	"github.com/batonrun/baton/httpapi"
	"github.com/batonrun/baton/internal/pgtest"
)

// operatorToken mints an operator token for the sites' operator secret.
func operatorToken(t *testing.T) string {
	t.Helper()
	tok, err := httpapi.MintOperatorToken(operatorSecret, "ops-alice", time.Hour)
	require.NoError(t, err)
	return tok
}

// signJWT signs claims with key by HS256.
func signJWT(t *testing.T, key []byte, claims jwt.MapClaims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(key)
	require.NoError(t, err)
	return tok
}

// operatorSignIn posts a token to River UI's operator sign-in, from the
// console's origin.
func (b *browser) operatorSignIn(token string) page {
	b.t.Helper()
	return b.do(http.MethodPost, console.JobsPrefix+"/signin", url.Values{"token": {token}}, map[string]string{"Origin": b.site.server.URL})
}

// jobsRefused checks that a browser cannot open River UI: its page sends
// it to the operator sign-in, its API answers 403.
func jobsRefused(t *testing.T, b *browser, why string) {
	t.Helper()
	p := b.get("/console/jobs/")
	require.Equal(t, http.StatusFound, p.status, why)
	require.Equal(t, "/console/jobs/signin?next="+url.QueryEscape("/console/jobs/"), p.header.Get("Location"), why)
	p = b.get("/console/jobs/api/jobs?state=available")
	require.Equal(t, http.StatusForbidden, p.status, why)
	require.Contains(t, p.body, "baton token --operator", why)
}

// A tenant's token, whatever its scopes (the operator scope included),
// does not open River UI, which sees and acts on every tenant's jobs; an
// operator token, signed with the operator secret and naming no tenant,
// does. Forged operator credentials are refused: operator claims signed
// with the tenant secret, a tenant token signed with the operator secret,
// an operator token naming a tenant, one for another audience, an expired
// one, an unsigned one, and cookies made of a token or a tenant session.
func TestRiverUIIsForOperatorsOnly(t *testing.T) {
	s := newSite(t, siteOpts{jobs: true})
	tenant := newTenant()

	tenantBrowser := s.browser(t)
	withOperatorScope := s.token(t, tenant, httpapi.ScopeWorkflowsRead, httpapi.ScopeWorkflowsWrite, httpapi.ScopeMonitorRead, "operator")
	require.Equal(t, http.StatusSeeOther, tenantBrowser.signIn(withOperatorScope).status)
	jobsRefused(t, tenantBrowser, "a tenant session with the operator scope")
	require.NotContains(t, tenantBrowser.get("/console/executions").body, `href="/console/jobs/"`, "no Jobs link for a tenant")

	now := time.Now()
	forged := map[string]string{
		"a tenant token with the operator scope": withOperatorScope,
		"operator claims signed with the tenant secret": func() string {
			tok, err := httpapi.MintOperatorToken(secret, "mallory", time.Hour)
			require.NoError(t, err)
			return tok
		}(),
		"a tenant token signed with the operator secret": func() string {
			tok, err := httpapi.MintToken(operatorSecret, tenant, "mallory", []string{"operator"}, time.Hour)
			require.NoError(t, err)
			return tok
		}(),
		"an operator token naming a tenant": signJWT(t, operatorSecret, jwt.MapClaims{"sub": "mallory", "aud": "baton-operator",
			"tenant_id": tenant, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}),
		"an operator token with a scope": signJWT(t, operatorSecret, jwt.MapClaims{"sub": "mallory", "aud": "baton-operator",
			"scope": "operator", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}),
		"an operator token for another audience": signJWT(t, operatorSecret, jwt.MapClaims{"sub": "mallory", "aud": "baton-console",
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}),
		"an expired operator token": signJWT(t, operatorSecret, jwt.MapClaims{"sub": "mallory", "aud": "baton-operator",
			"iat": now.Add(-2 * time.Hour).Unix(), "exp": now.Add(-time.Hour).Unix()}),
		"an unsigned operator token": func() string {
			tok, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "mallory", "aud": "baton-operator",
				"exp": now.Add(time.Hour).Unix()}).SignedString(jwt.UnsafeAllowNoneSignatureType)
			require.NoError(t, err)
			return tok
		}(),
	}
	for why, tok := range forged {
		b := s.browser(t)
		p := b.operatorSignIn(tok)
		require.Equal(t, http.StatusUnauthorized, p.status, why)
		require.NotContains(t, p.header.Get("Set-Cookie"), httpapi.OperatorCookie, why)
		jobsRefused(t, b, why)
	}

	// Cookies an attacker could make: a token (operator or tenant) as the
	// operator cookie, the tenant's session cookie renamed, a session
	// signed with the operator secret itself rather than the key derived
	// from it.
	var tenantSession string
	for _, c := range tenantBrowser.client.Jar.Cookies(mustURL(t, s.server.URL+"/console/")) {
		if c.Name == httpapi.SessionCookie {
			tenantSession = c.Value
		}
	}
	require.NotEmpty(t, tenantSession)
	for why, value := range map[string]string{
		"an operator token": operatorToken(t),
		"a tenant token":    withOperatorScope,
		"a tenant session":  tenantSession,
		"a session signed with the operator secret": signJWT(t, operatorSecret, jwt.MapClaims{"sub": "mallory", "aud": "baton-operator-session",
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}),
	} {
		b := s.browser(t)
		b.client.Jar.SetCookies(mustURL(t, s.server.URL+"/console/"), []*http.Cookie{{Name: httpapi.OperatorCookie, Value: value, Path: "/console/"}})
		jobsRefused(t, b, "cookie: "+why)
	}

	// An operator token opens River UI. The operator is no tenant: the
	// console's tenant pages still ask for a tenant's sign-in.
	op := s.browser(t)
	p := op.get("/console/jobs/signin")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, `id="operator-token"`)
	p = op.operatorSignIn(operatorToken(t))
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.Equal(t, "/console/jobs/", p.header.Get("Location"))
	setCookie := p.header.Get("Set-Cookie")
	require.Contains(t, setCookie, httpapi.OperatorCookie+"=")
	require.Contains(t, setCookie, "HttpOnly")
	require.Contains(t, setCookie, "SameSite=Strict")
	require.Contains(t, setCookie, "Path=/console/")
	p = op.get("/console/jobs/")
	require.Equal(t, http.StatusOK, p.status)
	require.Equal(t, "no-store", p.header.Get("Cache-Control"))
	require.Equal(t, http.StatusOK, op.get("/console/jobs/api/jobs?state=available").status)
	require.Contains(t, op.get("/console/jobs/signin").body, "ops-alice")
	require.Equal(t, http.StatusFound, op.get("/console/executions").status, "an operator is not signed in as a tenant")

	// An operator token is not an API token.
	req, err := http.NewRequest(http.MethodGet, s.server.URL+"/api/v1/workflow/definitions", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+operatorToken(t))
	req.Header.Set("X-Tenant-ID", tenant)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// An operator also signed in as a tenant gets the console's links into
	// River UI.
	require.Equal(t, http.StatusSeeOther, op.signIn(s.token(t, tenant, httpapi.ScopeWorkflowsRead)).status)
	require.Contains(t, op.get("/console/executions").body, `href="/console/jobs/"`)

	// A sign-in or sign-out posted from another site does nothing.
	p = op.do(http.MethodPost, console.JobsPrefix+"/signout", nil, map[string]string{"Origin": "https://evil.example"})
	require.Equal(t, http.StatusForbidden, p.status)
	require.Equal(t, http.StatusOK, op.get("/console/jobs/").status)
	other := s.browser(t)
	p = other.do(http.MethodPost, console.JobsPrefix+"/signin", url.Values{"token": {operatorToken(t)}}, map[string]string{"Origin": "https://evil.example"})
	require.Equal(t, http.StatusForbidden, p.status)
	jobsRefused(t, other, "a sign-in from another site")

	// Signing out closes River UI again.
	p = op.do(http.MethodPost, console.JobsPrefix+"/signout", nil, map[string]string{"Origin": s.server.URL})
	require.Equal(t, http.StatusSeeOther, p.status)
	jobsRefused(t, op, "signed out")

	// baton dev's browser is an operator.
	dev := newSite(t, siteOpts{devTenant: "dev", jobs: true}).browser(t)
	require.Equal(t, http.StatusOK, dev.get("/console/jobs/").status, "baton dev's browser is an operator")
}

// Without an operator secret no token opens River UI: the sign-in says
// so, and refuses even a well-made operator token.
func TestRiverUIClosedWithoutAnOperatorSecret(t *testing.T) {
	s := newSite(t, siteOpts{jobs: true, noOperators: true})
	b := s.browser(t)
	p := b.get("/console/jobs/signin")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, "takes no operator tokens")
	require.NotContains(t, p.body, `id="operator-token"`)
	p = b.operatorSignIn(operatorToken(t))
	require.Equal(t, http.StatusUnauthorized, p.status)
	jobsRefused(t, b, "no operator secret")
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u
}

// operatorCookie is the browser's operator session cookie.
func (b *browser) operatorCookie() *http.Cookie {
	b.t.Helper()
	for _, c := range b.client.Jar.Cookies(mustURL(b.t, b.site.server.URL+"/console/")) {
		if c.Name == httpapi.OperatorCookie {
			return c
		}
	}
	b.t.Fatal("the browser holds no operator session cookie")
	return nil
}

// An operator's sign-out ends the operator session in every baton process
// at once: a saved copy of its cookie no longer opens River UI, its pages
// nor its API, on the site signed out of nor on another site of the same
// database. Before the sign-out the copy opens River UI on both.
func TestOperatorSignOutEndsTheSessionInEveryProcess(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	one, two := newSite(t, siteOpts{pool: pool, jobs: true}), newSite(t, siteOpts{pool: pool, jobs: true})
	b := one.browser(t)
	p := b.operatorSignIn(operatorToken(t))
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	saved := b.operatorCookie()

	for _, s := range []*site{one, two} {
		status, _ := s.replay(t, saved, "/console/jobs/")
		require.Equal(t, http.StatusOK, status, "the saved cookie opens River UI")
		status, body := s.replay(t, saved, "/console/jobs/api/jobs?state=available")
		require.Equal(t, http.StatusOK, status, body)
	}

	p = b.do(http.MethodPost, console.JobsPrefix+"/signout", nil, map[string]string{"Origin": one.server.URL})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.Contains(t, p.header.Get("Set-Cookie"), httpapi.OperatorCookie+"=;", "the browser's cookie is cleared")
	jobsRefused(t, b, "signed out")

	for _, s := range []*site{one, two} {
		status, _ := s.replay(t, saved, "/console/jobs/")
		require.Equal(t, http.StatusFound, status, "River UI sends the saved cookie to the operator sign-in")
		status, body := s.replay(t, saved, "/console/jobs/api/jobs?state=available")
		require.Equal(t, http.StatusForbidden, status, body)
		status, body = s.replay(t, saved, "/console/jobs/signin")
		require.Equal(t, http.StatusOK, status)
		require.NotContains(t, body, "ops-alice", "the sign-in names no operator session")
	}
	var revoked bool
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT revoked_at IS NOT NULL FROM operator_session").Scan(&revoked))
	require.True(t, revoked)
}

// The operator cookie is 32 random bytes, not a token; the table holds its
// HMAC under a key derived from the operator secret, so neither the
// cookie nor its id under the tenant sessions' key is a row's key, and no
// console_session row is written for an operator.
func TestOperatorCookieHoldsOnlyARandomID(t *testing.T) {
	t.Parallel()
	s := newSite(t, siteOpts{jobs: true})
	b := s.browser(t)
	require.Equal(t, http.StatusSeeOther, b.operatorSignIn(operatorToken(t)).status)
	cookie := b.operatorCookie()
	id, err := base64.RawURLEncoding.DecodeString(cookie.Value)
	require.NoError(t, err)
	require.Len(t, id, 32)
	require.NotContains(t, cookie.Value, ".", "not a JWT")

	var (
		subject  string
		stored   []byte
		lifetime time.Duration
		tenants  int
	)
	require.NoError(t, s.pool.QueryRow(context.Background(),
		"SELECT subject, id, expires_at - created_at FROM operator_session").Scan(&subject, &stored, &lifetime))
	require.Equal(t, "ops-alice", subject)
	require.Len(t, stored, 32)
	require.NotEqual(t, id, stored)
	require.NotEqual(t, []byte(cookie.Value), stored)
	require.LessOrEqual(t, lifetime, time.Hour, "no longer than its token")
	require.NoError(t, s.pool.QueryRow(context.Background(), "SELECT count(*) FROM console_session").Scan(&tenants))
	require.Zero(t, tenants)

	// The operator cookie's value as a tenant session cookie opens no
	// console session.
	status, _ := s.replay(t, &http.Cookie{Name: httpapi.SessionCookie, Value: cookie.Value}, "/console/executions")
	require.Equal(t, http.StatusFound, status)
}
