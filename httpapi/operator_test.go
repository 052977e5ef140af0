package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/httpapi"
)

var operatorSecret = []byte("test-operator-secret-0123456789-0123")

// The operator secret is a secret of its own: at least 32 bytes, and never
// the JWT secret, whose holder signs tenant tokens.
func TestOperatorSecretMustBeItsOwn(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	_, err := httpapi.New(httpapi.Config{Engine: b.engine, Pool: b.pool, JWTSecret: secret, OperatorSecret: secret})
	require.ErrorContains(t, err, "must differ from the JWT secret")
	_, err = httpapi.New(httpapi.Config{Engine: b.engine, Pool: b.pool, JWTSecret: secret, OperatorSecret: []byte("short")})
	require.ErrorContains(t, err, "at least 32")
	api, err := httpapi.New(httpapi.Config{Engine: b.engine, Pool: b.pool, JWTSecret: secret})
	require.NoError(t, err)
	require.False(t, api.ChecksOperators())
	tok, err := httpapi.MintOperatorToken(operatorSecret, "ops", time.Hour)
	require.NoError(t, err)
	_, err = api.OperatorFromToken(tok)
	require.ErrorContains(t, err, "takes no operator tokens")
}

// An operator token opens an operator session and nothing else: it is no
// API token, and a tenant token cannot carry the operator audience. The
// token policy holds for operator tokens too: lifetime and issuer.
func TestOperatorTokensAreNotTenantTokens(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	api, err := httpapi.New(httpapi.Config{Engine: b.engine, Pool: b.pool, JWTSecret: secret, OperatorSecret: operatorSecret,
		Token: httpapi.TokenPolicy{Issuer: "baton-test"}})
	require.NoError(t, err)
	require.True(t, api.ChecksOperators())

	good, err := httpapi.MintOperatorToken(operatorSecret, "ops-alice", time.Hour, httpapi.WithIssuer("baton-test"), httpapi.WithAudience("elsewhere"))
	require.NoError(t, err)
	op, err := api.OperatorFromToken(good)
	require.NoError(t, err)
	require.Equal(t, "ops-alice", op.Subject)
	require.WithinDuration(t, time.Now().Add(time.Hour), op.Expires, time.Minute)

	noIssuer, err := httpapi.MintOperatorToken(operatorSecret, "ops-alice", time.Hour)
	require.NoError(t, err)
	_, err = api.OperatorFromToken(noIssuer)
	require.Error(t, err, "the configured issuer is required")
	tooLong, err := httpapi.MintOperatorToken(operatorSecret, "ops-alice", 40*24*time.Hour, httpapi.WithIssuer("baton-test"))
	require.NoError(t, err)
	_, err = api.OperatorFromToken(tooLong)
	require.ErrorContains(t, err, "longer than")
	tenantTok, err := httpapi.MintToken(secret, b.tenant, "t", nil, time.Hour, httpapi.WithIssuer("baton-test"))
	require.NoError(t, err)
	_, err = api.OperatorFromToken(tenantTok)
	require.Error(t, err, "a tenant token is no operator token")

	// An operator token at the API: 401, whatever tenant the header names.
	r := b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/definitions", token: &good})
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.raw)
	// A tenant token, signed with the JWT secret, carrying the operator
	// audience: 401.
	withOperatorAudience, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"tenant_id": b.tenant, "sub": "t",
		"aud": []string{"baton-operator"}, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
	require.NoError(t, err)
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/definitions", token: &withOperatorAudience})
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.raw)
	require.Contains(t, r.body["error"].(map[string]any)["message"], "operator audience")
	// A tenant token with the operator scope is a tenant token still: the
	// scope grants nothing.
	scoped := mint(t, b.tenant, "workflows:read", "operator")
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/definitions", token: &scoped})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	r = b.do(t, call{method: http.MethodGet, path: "/api/v1/monitor/lanes", token: &scoped})
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.raw)
}
