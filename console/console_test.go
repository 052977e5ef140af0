package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/console"
	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
)

const waitWorkflow = `{"workflow_id":"waiter","version":"1.0.0","nodes":[
 {"id":"start","type":"start","next":"hello"},
 {"id":"hello","type":"action","actionType":"send_message","parameters":{"message":"Hola {{name}}"},"next":"wait"},
 {"id":"wait","type":"action","actionType":"request_document","parameters":{"documents":["INE"],"timeout":"7d"},"next":"end"},
 {"id":"end","type":"end","result":{"summary":"done"}}]}`

func TestSignInRedirectsSetsTheCookieAndGoesBack(t *testing.T) {
	s := newSite(t, siteOpts{})
	tenant := newTenant()
	b := s.browser(t)

	p := b.get("/console/threads")
	require.Equal(t, http.StatusFound, p.status)
	require.Equal(t, "/console/signin?next="+url.QueryEscape("/console/threads"), p.header.Get("Location"))

	p = b.signIn("not a token")
	require.Equal(t, http.StatusUnauthorized, p.status)
	require.Contains(t, p.body, "invalid token")

	p = b.do(http.MethodPost, "/console/signin", url.Values{"token": {s.token(t, tenant)}}, map[string]string{"Origin": "https://evil.example"})
	require.Equal(t, http.StatusForbidden, p.status, "a sign-in posted from another site")

	p = b.do(http.MethodPost, "/console/signin", url.Values{"token": {s.token(t, tenant)}, "next": {"//evil.example/x"}},
		map[string]string{"Origin": s.server.URL})
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Equal(t, "/console/executions", p.header.Get("Location"), "next may only name a console page")
	setCookie := p.header.Get("Set-Cookie")
	require.Contains(t, setCookie, httpapi.SessionCookie+"=")
	require.Contains(t, setCookie, "HttpOnly")
	require.Contains(t, setCookie, "SameSite=Strict")

	p = b.get("/console/executions")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, tenant)
	require.Contains(t, p.header.Get("Content-Security-Policy"), "script-src 'self'")
	require.Equal(t, "no-store", p.header.Get("Cache-Control"))

	p = b.do(http.MethodPost, "/console/signout", nil, map[string]string{"Origin": s.server.URL})
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Equal(t, http.StatusFound, b.get("/console/executions").status, "signed out")
}

func TestPagesShowTheSignedInTenantOnly(t *testing.T) {
	s := newSite(t, siteOpts{})
	mine, theirs := newTenant(), newTenant()
	s.define(t, mine, waitWorkflow)
	s.define(t, theirs, waitWorkflow)
	myRun := s.start(t, engine.StartParams{TenantID: mine, WorkflowID: "waiter", ThreadID: "whatsapp:+1", Input: map[string]any{"name": "Ana"}})
	theirRun := s.start(t, engine.StartParams{TenantID: theirs, WorkflowID: "waiter", ThreadID: "whatsapp:+2", Input: map[string]any{"name": "Bo"}})
	b := s.browser(t)
	require.Equal(t, http.StatusSeeOther, b.signIn(s.token(t, mine, httpapi.ScopeWorkflowsRead, httpapi.ScopeMonitorRead)).status)

	p := b.get("/console/executions")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, myRun)
	require.NotContains(t, p.body, theirRun)

	p = b.get("/console/executions/" + myRun)
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "DOCUMENT_UPLOADED", "the wait offers the event that ends it")
	require.Contains(t, p.body, `data-stream="execution_id=`+myRun+`"`)

	for _, path := range []string{"/console/executions/" + theirRun, "/console/threads/" + url.PathEscape("whatsapp:+2")} {
		p = b.get(path)
		require.Equal(t, http.StatusNotFound, p.status, path)
		require.NotContains(t, p.body, "Bo")
	}
	p = b.get("/console/threads/" + url.PathEscape("whatsapp:+1"))
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "Hola Ana")
	require.Contains(t, p.body, myRun, "the lock holder")

	for _, path := range []string{"/console/lanes", "/console/monitor", "/console/definitions", "/console/definitions/waiter", "/console/threads"} {
		p = b.get(path)
		require.Equal(t, http.StatusOK, p.status, path+": "+p.body)
	}
	require.Equal(t, http.StatusNotFound, b.get("/console/definitions/nope").status)
	require.Equal(t, http.StatusNotFound, b.get("/console/nope").status)
	require.Equal(t, http.StatusBadRequest, b.get("/console/executions?status=bogus").status)
}

func TestMonitorPagesNeedTheMonitorScope(t *testing.T) {
	s := newSite(t, siteOpts{})
	b := s.browser(t)
	require.Equal(t, http.StatusSeeOther, b.signIn(s.token(t, newTenant())).status)
	for _, path := range []string{"/console/lanes", "/console/monitor"} {
		p := b.get(path)
		require.Equal(t, http.StatusForbidden, p.status, path)
		require.Contains(t, p.body, "monitor:read")
	}
}

func TestTenantTextIsEscaped(t *testing.T) {
	s := newSite(t, siteOpts{})
	tenant := newTenant()
	s.define(t, tenant, waitWorkflow)
	hostile := `<script>alert(1)</script><img src=x onerror=alert(2)>`
	id := s.start(t, engine.StartParams{TenantID: tenant, WorkflowID: "waiter", ThreadID: "t-1", Input: map[string]any{"name": hostile, hostile: hostile}})
	b := s.browser(t)
	require.Equal(t, http.StatusSeeOther, b.signIn(s.token(t, tenant)).status)
	for _, path := range []string{"/console/executions/" + id, "/console/threads/t-1"} {
		p := b.get(path)
		require.Equal(t, http.StatusOK, p.status)
		require.NotContains(t, p.body, "<script>alert", path)
		require.NotContains(t, p.body, "<img src=x", path)
		require.Contains(t, p.body, "&lt;script&gt;alert(1)&lt;/script&gt;", path)
	}
}

func TestConsoleFormsNeedTheSessionsCSRFToken(t *testing.T) {
	s := newSite(t, siteOpts{})
	b := s.browser(t)
	require.Equal(t, http.StatusSeeOther, b.signIn(s.token(t, newTenant())).status)
	csrf := csrfOf(t, b.get("/console/definitions").body)
	bad := `{"workflow_id":"w","version":"1","nodes":[{"id":"start","type":"start","next":"ghost"},{"id":"end","type":"end"}]}`

	p := b.do(http.MethodPost, "/console/definitions/validate", url.Values{"definition": {bad}}, nil)
	require.Equal(t, http.StatusForbidden, p.status)
	p = b.do(http.MethodPost, "/console/definitions/validate", url.Values{"definition": {bad}, "csrf": {csrf}}, map[string]string{"Origin": "https://evil.example"})
	require.Equal(t, http.StatusForbidden, p.status)

	p = b.do(http.MethodPost, "/console/definitions/validate", url.Values{"definition": {bad}, "csrf": {csrf}}, nil)
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `id="problems"`)
	require.Contains(t, p.body, "ghost")
	require.Contains(t, p.body, "<svg", "the graph of what was posted")
	require.Contains(t, p.body, `class="node problem"`, "the faulty node is marked")
}

func TestDevSignsTheBrowserInAsItsTenant(t *testing.T) {
	s := newSite(t, siteOpts{devTenant: "dev"})
	b := s.browser(t)
	p := b.get("/console/executions")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.header.Get("Set-Cookie"), httpapi.SessionCookie+"=")
	require.Contains(t, p.body, `<b id="tenant">dev</b>`)
	p = b.get("/console/monitor")
	require.Equal(t, http.StatusOK, p.status, "dev's session has every scope")
}

// startParams starts waitWorkflow for a tenant on thread t-ro.
func startParams(tenant string) engine.StartParams {
	return engine.StartParams{TenantID: tenant, WorkflowID: "waiter", ThreadID: "t-ro", Input: map[string]any{"name": "Ana"}}
}

func TestValidateBoxListsButDoesNotDrawAnOversizedDefinition(t *testing.T) {
	s := newSite(t, siteOpts{})
	b := s.browser(t)
	require.Equal(t, http.StatusSeeOther, b.signIn(s.token(t, newTenant())).status)
	csrf := csrfOf(t, b.get("/console/definitions").body)
	var nodes strings.Builder
	nodes.WriteString(`{"id":"start","type":"start","next":"n0"}`)
	for i := range 3000 {
		fmt.Fprintf(&nodes, `,{"id":"n%d","type":"action","actionType":"send_message","parameters":{"message":"x"},"next":"n%d"}`, i, i+1)
	}
	huge := `{"workflow_id":"huge","version":"1","nodes":[` + nodes.String() + `]}`
	p := b.do(http.MethodPost, "/console/definitions/validate", url.Values{"definition": {huge}, "csrf": {csrf}}, nil)
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, `id="problems"`)
	require.NotContains(t, p.body, "<svg", "a definition over limits.nodes is not drawn")
}

func TestPagesShareTheTenantsReadRateLimit(t *testing.T) {
	s := newSite(t, siteOpts{readLimit: httpapi.RateLimit{Rate: 0.01, Burst: 2}})
	busy, quiet := s.browser(t), s.browser(t)
	require.Equal(t, http.StatusSeeOther, busy.signIn(s.token(t, newTenant())).status)
	require.Equal(t, http.StatusSeeOther, quiet.signIn(s.token(t, newTenant())).status)
	require.Equal(t, http.StatusOK, busy.get("/console/executions").status)
	require.Equal(t, http.StatusOK, busy.get("/console/threads").status)
	p := busy.get("/console/executions")
	require.Equal(t, http.StatusTooManyRequests, p.status, "the tenant's burst of 2 is spent")
	require.NotEmpty(t, p.header.Get("Retry-After"))
	require.Equal(t, http.StatusOK, quiet.get("/console/executions").status, "another tenant is not limited")
}

// TestPagesAnswer503DuringAnOutage serves the console over a database
// that goes away after the browser signed in: pages say so with 503 and
// Retry-After, whether the session lives is not guessed (no redirect to
// the sign-in), a sign-out says it did not happen, and nothing panics.
// Once the database is back, the session works again.
func TestPagesAnswer503DuringAnOutage(t *testing.T) {
	pool, proxy := proxiedPool(t)
	eng, err := engine.New(engine.Config{Pool: pool, Channel: &engine.MemoryChannel{}})
	require.NoError(t, err)
	api, err := httpapi.New(httpapi.Config{Engine: eng, Pool: pool, JWTSecret: secret})
	require.NoError(t, err)
	con, err := console.New(console.Config{Engine: eng, Pool: pool, API: api})
	require.NoError(t, err)
	srv := httptest.NewServer(con.Handler())
	t.Cleanup(srv.Close)
	s := &site{pool: pool, engine: eng, api: api, server: srv}

	b := s.browser(t)
	require.Equal(t, http.StatusSeeOther, b.signIn(s.token(t, newTenant(), httpapi.ScopeWorkflowsRead, httpapi.ScopeMonitorRead)).status)
	proxy.setDown(true)
	for _, path := range []string{"/console/executions", "/console/executions/exec-1", "/console/threads/t-1", "/console/lanes", "/console/monitor", "/console/definitions"} {
		p := b.get(path)
		require.Equal(t, http.StatusServiceUnavailable, p.status, path)
		require.Equal(t, "1", p.header.Get("Retry-After"), path)
		require.Contains(t, p.body, "the database is unavailable", path)
	}
	p := b.do(http.MethodPost, "/console/signout", nil, map[string]string{"Origin": s.server.URL})
	require.Equal(t, http.StatusServiceUnavailable, p.status)
	require.Contains(t, p.body, "you are still signed in")
	require.Empty(t, p.header.Values("Set-Cookie"), "the cookie is kept: the session did not end")

	proxy.setDown(false)
	require.Eventually(t, func() bool { return b.get("/console/executions").status == http.StatusOK }, 10*time.Second, 50*time.Millisecond,
		"the session works again once the database is back")
}
