package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
	"github.com/batonrun/baton/internal/openapitest"
	"github.com/batonrun/baton/internal/pgtest"
)

// setupAuth is a server with no workers whose Config edit may change.
func setupAuth(t *testing.T, edit func(*httpapi.Config)) *testBundle {
	t.Helper()
	pool := pgtest.NewPool(t)
	eng, err := engine.New(engine.Config{Pool: pool, Channel: &engine.MemoryChannel{}})
	require.NoError(t, err)
	cfg := httpapi.Config{Engine: eng, Pool: pool, JWTSecret: secret}
	if edit != nil {
		edit(&cfg)
	}
	api, err := httpapi.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	tenant := fmt.Sprintf("auth-%d", tenantSeq.Add(1))
	return &testBundle{pool: pool, engine: eng, server: srv, validator: openapitest.New(t, httpapi.OpenAPIDocument),
		tenant: tenant, token: mint(t, tenant)}
}

// signed signs claims with the test secret, for tokens MintToken does not
// make.
func signed(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	require.NoError(t, err)
	return tok
}

// A token in the query string is refused on every REST route, even beside a
// valid Authorization header; the WebSocket takes it.
func TestAccessTokenOnlyOnTheStream(t *testing.T) {
	t.Parallel()
	p := newProcess(t, pgtest.NewDatabase(t), processOpts{})
	tenant := fmt.Sprintf("qs-%d", tenantSeq.Add(1))
	tok := mint(t, tenant)
	get := func(path string, header bool) (int, string) {
		req, err := http.NewRequest(http.MethodGet, p.server.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("X-Tenant-ID", tenant)
		if header {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	qs := "?access_token=" + url.QueryEscape(tok)
	for _, path := range []string{"/api/v1/workflow/definitions", "/api/v1/workflow/executions", "/api/v1/threads/t1"} {
		status, body := get(path+qs, false)
		require.Equal(t, http.StatusUnauthorized, status, "%s: %s", path, body)
		require.Contains(t, body, `"code":"workflow.access.unauthorized"`)
		require.Contains(t, body, "access_token is accepted only by GET /api/v1/ws")
		status, body = get(path+qs, true)
		require.Equal(t, http.StatusUnauthorized, status, "%s beside a header: %s", path, body)
	}
	status, body := get("/api/v1/workflow/definitions", true)
	require.Equal(t, http.StatusOK, status, "%s", body)

	// The stream takes the token from the query (dial puts it there).
	conn := p.dial(t, tenant, url.Values{}, false)
	require.NotNil(t, conn)
}

func TestTokenLifetimeAudienceIssuer(t *testing.T) {
	t.Parallel()
	now := time.Now()
	b := setupAuth(t, func(c *httpapi.Config) {
		c.Token = httpapi.TokenPolicy{Audience: "baton-api", Issuer: "https://idp.example"}
	})
	claims := func(edit func(jwt.MapClaims)) *string {
		c := jwt.MapClaims{"tenant_id": b.tenant, "sub": "t", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
			"aud": "baton-api", "iss": "https://idp.example"}
		edit(c)
		return ptr(signed(t, c))
	}
	list := func(tok *string) *response {
		return b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/definitions", token: tok})
	}
	r := list(claims(func(jwt.MapClaims) {}))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)

	for name, tc := range map[string]struct {
		edit func(jwt.MapClaims)
		want string
	}{
		// A 3,000-year token, and one a day over the default.
		"3000 years":     {func(c jwt.MapClaims) { c["exp"] = now.AddDate(3000, 0, 0).Unix() }, "longer than the 720h0m0s"},
		"31 days":        {func(c jwt.MapClaims) { c["exp"] = now.Add(31 * 24 * time.Hour).Unix() }, "longer than the 720h0m0s"},
		"no iat":         {func(c jwt.MapClaims) { delete(c, "iat"); c["exp"] = now.Add(31 * 24 * time.Hour).Unix() }, "longer than"},
		"a late iat":     {func(c jwt.MapClaims) { c["iat"] = now.AddDate(1, 0, 0).Unix(); c["exp"] = now.AddDate(1, 0, 1).Unix() }, "longer than"},
		"no audience":    {func(c jwt.MapClaims) { delete(c, "aud") }, "aud"},
		"wrong audience": {func(c jwt.MapClaims) { c["aud"] = "other-api" }, "aud"},
		"no issuer":      {func(c jwt.MapClaims) { delete(c, "iss") }, "iss"},
		"wrong issuer":   {func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }, "iss"},
	} {
		r := list(claims(tc.edit))
		require.Equal(t, http.StatusUnauthorized, r.status, "%s: %s", name, r.raw)
		require.Equal(t, "workflow.access.unauthorized", r.errorCode(), name)
		require.Contains(t, string(r.raw), tc.want, name)
	}
	// 30 days is within the default.
	r = list(claims(func(c jwt.MapClaims) { c["exp"] = now.Add(30*24*time.Hour - time.Minute).Unix() }))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)

	// MintToken sets the audience and issuer it is given.
	tok, err := httpapi.MintToken(secret, b.tenant, "t", nil, time.Hour, httpapi.WithAudience("baton-api"), httpapi.WithIssuer("https://idp.example"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, list(&tok).status)
	require.Equal(t, http.StatusUnauthorized, list(&b.token).status, "a token without aud and iss")
}

func TestMaxTokenLifetimeConfigured(t *testing.T) {
	t.Parallel()
	b := setupAuth(t, func(c *httpapi.Config) { c.Token.MaxLifetime = time.Hour })
	ok, err := httpapi.MintToken(secret, b.tenant, "t", nil, 59*time.Minute)
	require.NoError(t, err)
	long, err := httpapi.MintToken(secret, b.tenant, "t", nil, 2*time.Hour)
	require.NoError(t, err)
	r := b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/definitions", token: &ok})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/definitions", token: &long})
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.raw)
	require.Contains(t, string(r.raw), "longer than the 1h0m0s")
}

func TestShortJWTSecretRefused(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	eng, err := engine.New(engine.Config{Pool: pool})
	require.NoError(t, err)
	_, err = httpapi.New(httpapi.Config{Engine: eng, Pool: pool, JWTSecret: []byte(strings.Repeat("k", 31))})
	require.ErrorContains(t, err, "at least 32")
	_, err = httpapi.New(httpapi.Config{Engine: eng, Pool: pool, JWTSecret: []byte(strings.Repeat("k", 32))})
	require.NoError(t, err)
	_, err = httpapi.New(httpapi.Config{Engine: eng, Pool: pool, Insecure: true})
	require.NoError(t, err, "insecure mode has no secret")
}
