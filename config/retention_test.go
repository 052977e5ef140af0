package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/config"
	"github.com/batonrun/baton/retention"
)

func TestRetentionDefaults(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`{}`))
	require.NoError(t, err)
	require.Equal(t, retention.Config{
		Default:  retention.Policy{Executions: 7 * 24 * time.Hour, Idempotency: 24 * time.Hour, Inbound: 7 * 24 * time.Hour},
		Interval: time.Minute, Batch: 1000,
	}, c.RetentionConfig())
	require.Equal(t, c.RetentionConfig(), config.Default().RetentionConfig())
	require.Equal(t, config.Duration(24*time.Hour), c.Retention.Jobs, "River's own default")
}

func TestRetentionOfRiverJobs(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`{retention: {jobs: "10m"}}`))
	require.NoError(t, err)
	require.Equal(t, config.Duration(10*time.Minute), c.Retention.Jobs)
}

func TestRetentionPeriodsAndPerTenantOverrides(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`{retention: {
	  executions: "30d", idempotency: "1d12h", inbound: "off", interval: "15s", batch: 200,
	  perTenant: {
	    acme:   { executions: "90d" },
	    globex: { executions: "0", idempotency: 3600000, inbound: "2h" },
	  },
	}}`))
	require.NoError(t, err)
	def := retention.Policy{Executions: 30 * 24 * time.Hour, Idempotency: 36 * time.Hour, Inbound: 0}
	require.Equal(t, retention.Config{
		Default: def,
		PerTenant: map[string]retention.Policy{
			"acme":   {Executions: 90 * 24 * time.Hour, Idempotency: 36 * time.Hour, Inbound: 0},
			"globex": {Executions: 0, Idempotency: time.Hour, Inbound: 2 * time.Hour},
		},
		Interval: 15 * time.Second, Batch: 200,
	}, c.RetentionConfig())
}

func TestDurationsTakeDays(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`{locks: {timeout: "1d"}, auth: {maxTokenLifetime: "0.5d"}}`))
	require.NoError(t, err)
	require.Equal(t, config.Duration(24*time.Hour), c.Locks.Timeout)
	require.Equal(t, config.Duration(12*time.Hour), c.Auth.MaxTokenLifetime)
}

func TestRetentionRefusesBadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ file, want string }{
		{`{retention: {executions: "-1h"}}`, "retention.executions must not be negative"},
		{`{retention: {perTenant: {acme: {inbound: "-5m"}}}}`, "retention.perTenant.acme.inbound must not be negative"},
		{`{retention: {interval: "10ms"}}`, "retention.interval must be at least 1s"},
		{`{retention: {jobs: "10ms"}}`, "retention.jobs must be at least 1s"},
		{`{retention: {batch: -1}}`, "retention.batch must be between 1 and 100000"},
		{`{retention: {batch: 100001}}`, "retention.batch must be between 1 and 100000"},
		{`{retention: {perTenant: {"": {executions: "1d"}}}}`, "retention.perTenant: a tenant id must be 1 to 255 bytes"},
		{`{retention: {executions: "7 days"}}`, `invalid duration "7 days"`},
		{`{retention: {executions: "1dx"}}`, `invalid duration "1dx"`},
		{`{retention: {executions: "-1d"}}`, `invalid duration "-1d"`},
		{`{retention: {keep: "7d"}}`, `unknown field "keep"`},
		{`{retention: {perTenant: {acme: {interval: "1m"}}}}`, `unknown field "interval"`},
	} {
		_, err := config.Parse([]byte(tc.file))
		require.ErrorContains(t, err, tc.want, tc.file)
	}
}
