package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRateLimiterBuckets(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	t.Run("Off", func(t *testing.T) {
		t.Parallel()
		l, err := newRateLimiter(RateLimits{})
		require.NoError(t, err)
		require.Nil(t, l)
		require.Nil(t, l.allow(classWrite, "a", t0), "a nil limiter allows everything")
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		for _, cfg := range []RateLimits{
			{Write: RateLimit{Rate: -1}}, {Read: RateLimit{Rate: 1, Burst: -1}}, {MaxBuckets: -1},
		} {
			_, err := newRateLimiter(cfg)
			require.Error(t, err, "%+v", cfg)
		}
	})

	t.Run("RetryAfter", func(t *testing.T) {
		t.Parallel()
		l, err := newRateLimiter(RateLimits{Write: RateLimit{Rate: 2, Burst: 3}})
		require.NoError(t, err)
		for range 3 {
			require.Nil(t, l.allow(classWrite, "a", t0))
		}
		ae := l.allow(classWrite, "a", t0)
		require.NotNil(t, ae)
		require.Equal(t, http.StatusTooManyRequests, ae.status)
		require.True(t, ae.retryable)
		require.Equal(t, int64(500), *ae.retryAfterMS, "one token at 2 a second")
		ae = l.allow(classWrite, "a", t0.Add(400*time.Millisecond))
		require.Equal(t, int64(100), *ae.retryAfterMS, "a refused request spends nothing")
		require.Nil(t, l.allow(classWrite, "a", t0.Add(500*time.Millisecond)))
		require.Nil(t, l.allow(classRead, "a", t0), "reads are not limited")
	})

	t.Run("DefaultBurst", func(t *testing.T) {
		t.Parallel()
		l, err := newRateLimiter(RateLimits{Read: RateLimit{Rate: 2.5}})
		require.NoError(t, err)
		require.Equal(t, 3, l.limits[classRead].Burst)
		l, err = newRateLimiter(RateLimits{Read: RateLimit{Rate: 0.2}})
		require.NoError(t, err)
		require.Equal(t, 1, l.limits[classRead].Burst)
	})

	t.Run("RefilledBucketsAreDropped", func(t *testing.T) {
		t.Parallel()
		l, err := newRateLimiter(RateLimits{Write: RateLimit{Rate: 10, Burst: 20}, Read: RateLimit{Rate: 100, Burst: 100}})
		require.NoError(t, err)
		for i := range 50 {
			require.Nil(t, l.allow(classWrite, fmt.Sprint("w", i), t0))
			require.Nil(t, l.allow(classRead, fmt.Sprint("r", i), t0))
		}
		require.Len(t, l.buckets, 100)
		// Reads refill in 1 s, writes in 2 s.
		require.Nil(t, l.allow(classWrite, "w0", t0.Add(time.Second)))
		require.Len(t, l.buckets, 50, "the read buckets have refilled and gone")
		require.Nil(t, l.allow(classRead, "r0", t0.Add(2*time.Second)))
		require.Len(t, l.buckets, 2, "w0 was used at 1 s and is not full yet; r0 is new")
	})

	t.Run("MaxBuckets", func(t *testing.T) {
		t.Parallel()
		l, err := newRateLimiter(RateLimits{Write: RateLimit{Rate: 0.001, Burst: 1}, Stream: RateLimit{Rate: 0.001, Burst: 1}, MaxBuckets: 3})
		require.NoError(t, err)
		now := t0
		for i := range 10 {
			now = now.Add(time.Millisecond)
			require.Nil(t, l.allow(rateClass(i%2)*classStream, fmt.Sprint("t", i), now))
			require.LessOrEqual(t, len(l.buckets), 3)
		}
		require.NotNil(t, l.allow(classStream, "t9", now), "a recent bucket is kept")
		require.Nil(t, l.allow(classWrite, "t0", now), "the least recently used went, so t0 starts full")
	})

	t.Run("LongTenantIDs", func(t *testing.T) {
		t.Parallel()
		l, err := newRateLimiter(RateLimits{Write: RateLimit{Rate: 0.001, Burst: 1}})
		require.NoError(t, err)
		long := strings.Repeat("x", 100_000)
		require.Nil(t, l.allow(classWrite, long, t0))
		require.NotNil(t, l.allow(classWrite, long, t0))
		require.Nil(t, l.allow(classWrite, long+"y", t0), "another long tenant has its own bucket")
		for k := range l.buckets {
			require.LessOrEqual(t, len(k.tenant), maxRateKeyBytes)
		}
	})
}
