package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/config"
)

func TestAuthAndHTTPSections(t *testing.T) {
	t.Parallel()
	c := config.Default()
	require.Equal(t, config.Duration(30*24*time.Hour), c.Auth.MaxTokenLifetime)
	require.Empty(t, c.Auth.Audience)
	require.Empty(t, c.Auth.Issuer)
	require.Equal(t, config.HTTP{
		ReadTimeout:  config.Duration(30 * time.Second),
		WriteTimeout: config.Duration(150 * time.Second), // waitTimeoutMs 120000 + 30 s
		IdleTimeout:  config.Duration(120 * time.Second),
	}, c.HTTP)

	c, err := config.Parse([]byte(`{auth: {maxTokenLifetime: "24h", audience: "baton", issuer: "https://idp"},
	  http: {readTimeout: "5s", idleTimeout: 1000}, limits: {waitTimeoutMs: 600000}}`))
	require.NoError(t, err)
	require.Equal(t, config.Auth{MaxTokenLifetime: config.Duration(24 * time.Hour), Audience: "baton", Issuer: "https://idp"}, c.Auth)
	require.Equal(t, config.HTTP{ReadTimeout: config.Duration(5 * time.Second), WriteTimeout: config.Duration(630 * time.Second),
		IdleTimeout: config.Duration(time.Second)}, c.HTTP)

	for name, tc := range map[string]struct{ raw, want string }{
		"negative lifetime": {`{auth: {maxTokenLifetime: "-1h"}}`, "auth.maxTokenLifetime must not be negative"},
		"negative timeout":  {`{http: {idleTimeout: "-1s"}}`, "http timeouts must not be negative"},
		"write under wait":  {`{http: {writeTimeout: "2m"}}`, "http.writeTimeout (2m0s) must be longer than limits.waitTimeoutMs (2m0s)"},
		"unknown key":       {`{http: {timeout: "1s"}}`, `unknown field "timeout"`},
	} {
		_, err := config.Parse([]byte(tc.raw))
		require.ErrorContains(t, err, tc.want, name)
	}
}

func TestTrustedProxies(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`{http: {trustedProxies: ["10.0.0.0/8", "127.0.0.1", "::1", "fd00::/8", "::ffff:192.168.0.0/112", "10.1.2.3/8"]}}`))
	require.NoError(t, err)
	got, err := c.HTTP.TrustedProxyPrefixes()
	require.NoError(t, err)
	want := []string{"10.0.0.0/8", "127.0.0.1/32", "::1/128", "fd00::/8", "192.168.0.0/16", "10.0.0.0/8"}
	require.Len(t, got, len(want))
	for i, p := range got {
		require.Equal(t, want[i], p.String())
	}

	none, err := config.Default().HTTP.TrustedProxyPrefixes()
	require.NoError(t, err)
	require.Empty(t, none, "no proxy is trusted by default")

	for _, bad := range []string{`"10.0.0.0/33"`, `"localhost"`, `""`, `"10.0.0.1:80"`} {
		_, err := config.Parse([]byte(`{http: {trustedProxies: [` + bad + `]}}`))
		require.ErrorContains(t, err, "http.trustedProxies", bad)
	}
}
