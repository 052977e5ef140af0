package main

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// baton token --operator mints an operator token with BATON_OPERATOR_SECRET
// (no tenant, no scope); the operator scope on a tenant token is refused;
// baton serve refuses an operator secret that is short or is the JWT
// secret.
func TestOperatorTokensAndSecret(t *testing.T) {
	t.Parallel()
	const jwtSecret, opSecret = "operator-test-jwt-secret-0123456789", "operator-test-op-secret-0123456789"
	out, err := runBounded(t, []string{"BATON_JWT_SECRET=" + jwtSecret}, "token", "--operator")
	requireRefused(t, out, err, "baton token: ", "BATON_OPERATOR_SECRET is not set")
	out, err = runBounded(t, []string{"BATON_OPERATOR_SECRET=" + opSecret}, "token", "--operator", "--tenant", "acme")
	requireRefused(t, out, err, "--operator: an operator token names no tenant and no scope")
	out, err = runBounded(t, []string{"BATON_JWT_SECRET=" + jwtSecret}, "token", "--tenant", "acme", "--scope", "workflows:read operator")
	requireRefused(t, out, err, "--scope operator", "baton token --operator")
	out, err = runBounded(t, []string{"BATON_OPERATOR_SECRET=" + opSecret}, "token", "--operator", "--sub", "alice")
	require.NoError(t, err, out)
	require.Len(t, strings.Split(strings.TrimSpace(out), "."), 3)

	for _, c := range []struct{ secret, want string }{
		{strings.Repeat("o", 31), "BATON_OPERATOR_SECRET is 31 bytes: it must be at least 32"},
		{jwtSecret, "BATON_OPERATOR_SECRET must differ from BATON_JWT_SECRET"},
	} {
		out, err := runBounded(t, []string{"DATABASE_URL=" + emptyDatabase(t), "BATON_JWT_SECRET=" + jwtSecret, "BATON_OPERATOR_SECRET=" + c.secret}, "serve")
		requireRefused(t, out, err, "baton serve: ", c.want)
	}
}

// On baton serve, River UI opens to a browser signed in with an operator
// token from baton token --operator, not to a tenant's token; without
// BATON_OPERATOR_SECRET it is not served at all.
func TestServeOpensRiverUIToOperatorsOnly(t *testing.T) {
	t.Parallel()
	const jwtSecret, opSecret = "operator-serve-jwt-secret-0123456789", "operator-serve-op-secret-0123456789"
	signIn := func(t *testing.T, base, token string) (*http.Client, int) {
		t.Helper()
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		req, err := http.NewRequest(http.MethodPost, base+"/console/jobs/signin", strings.NewReader(url.Values{"token": {token}}.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		resp, err := client.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return client, resp.StatusCode
	}
	jobs := func(t *testing.T, client *http.Client, base string) int {
		t.Helper()
		resp, err := client.Get(base + "/console/jobs/api/jobs?state=available")
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	operatorToken, err := runBounded(t, []string{"BATON_OPERATOR_SECRET=" + opSecret}, "token", "--operator", "--sub", "alice")
	require.NoError(t, err, operatorToken)
	tenantToken, err := runBounded(t, []string{"BATON_JWT_SECRET=" + jwtSecret}, "token", "--tenant", "acme", "--scope", "workflows:read monitor:read")
	require.NoError(t, err, tenantToken)

	t.Run("with an operator secret", func(t *testing.T) {
		t.Parallel()
		env, _, _ := serveDatabase(t, `{}`)
		s := startServer(t, append(env, "BATON_JWT_SECRET="+jwtSecret, "BATON_OPERATOR_SECRET="+opSecret), "--insecure-no-auth=false")
		base := "http://" + s.addr
		tenant, status := signIn(t, base, strings.TrimSpace(tenantToken))
		require.Equal(t, http.StatusUnauthorized, status)
		require.Equal(t, http.StatusForbidden, jobs(t, tenant, base))
		op, status := signIn(t, base, strings.TrimSpace(operatorToken))
		require.Equal(t, http.StatusSeeOther, status)
		require.Equal(t, http.StatusOK, jobs(t, op, base))
	})
	t.Run("without one", func(t *testing.T) {
		t.Parallel()
		env, _, _ := serveDatabase(t, `{}`)
		s := startServer(t, append(env, "BATON_JWT_SECRET="+jwtSecret), "--insecure-no-auth=false")
		base := "http://" + s.addr
		op, status := signIn(t, base, strings.TrimSpace(operatorToken))
		require.Equal(t, http.StatusForbidden, status, "no River UI is served")
		require.Equal(t, http.StatusForbidden, jobs(t, op, base))
	})
}
