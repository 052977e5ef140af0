package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/config"
)

func TestRateLimits(t *testing.T) {
	t.Parallel()

	t.Run("OffByDefault", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, config.RateLimits{}, config.Default().RateLimits)
		c, err := config.Parse([]byte(`{}`))
		require.NoError(t, err)
		require.Equal(t, config.RateLimits{}, c.RateLimits)
	})

	t.Run("Parsed", func(t *testing.T) {
		t.Parallel()
		c, err := config.Parse([]byte(`{
		  rateLimits: {
		    write:  { rate: 50, burst: 100 },
		    read:   { rate: 200.5 },          // burst: rate rounded up
		    stream: { rate: 0.5, burst: 5 },
		    maxBuckets: 5000,
		  },
		}`))
		require.NoError(t, err)
		require.Equal(t, config.RateLimits{
			Write:      config.RateLimit{Rate: 50, Burst: 100},
			Read:       config.RateLimit{Rate: 200.5},
			Stream:     config.RateLimit{Rate: 0.5, Burst: 5},
			MaxBuckets: 5000,
		}, c.RateLimits)
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		for raw, want := range map[string]string{
			`{rateLimits: {write: {rate: -1}}}`:          "rateLimits.write: rate and burst must not be negative",
			`{rateLimits: {read: {rate: 1, burst: -2}}}`: "rateLimits.read: rate and burst must not be negative",
			`{rateLimits: {stream: {burst: 3}}}`:         "rateLimits.stream: a burst needs a rate",
			`{rateLimits: {maxBuckets: -1}}`:             "rateLimits.maxBuckets must not be negative",
			`{rateLimits: {write: {perMinute: 5}}}`:      "unknown field",
			`{rateLimits: {admin: {rate: 5}}}`:           "unknown field",
		} {
			_, err := config.Parse([]byte(raw))
			require.ErrorContains(t, err, want, raw)
		}
	})
}
