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
