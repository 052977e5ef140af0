package httpapi

import (
	"container/list"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Rate-limit classes: every authenticated API request counts against its
// tenant's bucket of one class.
const (
	// RateClassWrite is POST, PUT and DELETE under /api/v1.
	RateClassWrite = "write"
	// RateClassRead is GET under /api/v1, the stream aside.
	RateClassRead = "read"
	// RateClassStream is opening GET /api/v1/ws (each open may replay
	// events from since); messages on an open stream are not counted.
	RateClassStream = "stream"
)

// RateLimit is one class's token bucket, one per tenant.
type RateLimit struct {
	// Rate is how many requests a tenant's bucket gains per second. Zero
	// (the default) leaves the class unlimited.
	Rate float64
	// Burst is the bucket's size: how many requests a tenant that has been
	// quiet may send at once. Zero means Rate rounded up (at least 1).
	Burst int
}

// RateLimits configures per-tenant rate limits of the API (config file
// rateLimits). The buckets live in this process's memory: with several
// processes behind a load balancer a tenant may send up to the sum of their
// budgets. The zero value limits nothing.
type RateLimits struct {
	// Write, Read and Stream are the classes' buckets (RateClassWrite,
	// RateClassRead, RateClassStream).
	Write, Read, Stream RateLimit
	// MaxBuckets bounds how many buckets the process keeps at once, over
	// every tenant and class. A bucket that has refilled is dropped at once
	// (it is the same as a new one); past the bound the least recently used
	// bucket is dropped too, which lets its tenant start again with a full
	// bucket. Zero means 100,000 (a few tens of MB at most).
	MaxBuckets int
}

// DefaultMaxRateBuckets is RateLimits.MaxBuckets when zero.
const DefaultMaxRateBuckets = 100_000

// maxRateKeyBytes is the longest tenant id kept as it is in a bucket's key;
// a longer one is keyed by its SHA-256, so a bucket's size stays bounded
// whatever the token says.
const maxRateKeyBytes = 128

// rateClass indexes rateClasses and rateLimiter's arrays.
type rateClass int

const (
	classWrite rateClass = iota
	classRead
	classStream
	numRateClasses
)

// rateClasses are the classes' names.
var rateClasses = [numRateClasses]string{RateClassWrite, RateClassRead, RateClassStream}

// rateLimiter holds the token buckets of every tenant and class.
type rateLimiter struct {
	limits     [numRateClasses]RateLimit
	refill     [numRateClasses]time.Duration // an empty bucket's time to fill
	maxBuckets int

	mu      sync.Mutex
	buckets map[rateKey]*list.Element // of *rateBucket
	// recent holds each class's buckets, most recently used first.
	recent [numRateClasses]list.List
}

type rateKey struct {
	class  rateClass
	tenant string
}

type rateBucket struct {
	key     rateKey
	limiter *rate.Limiter
	used    time.Time
}

// newRateLimiter checks cfg and returns its limiter, or nil when cfg limits
// nothing.
func newRateLimiter(cfg RateLimits) (*rateLimiter, error) {
	l := &rateLimiter{maxBuckets: cfg.MaxBuckets, buckets: map[rateKey]*list.Element{}}
	if l.maxBuckets < 0 {
		return nil, errors.New("httpapi: RateLimits.MaxBuckets must not be negative")
	}
	if l.maxBuckets == 0 {
		l.maxBuckets = DefaultMaxRateBuckets
	}
	limited := false
	for i, lim := range [numRateClasses]RateLimit{cfg.Write, cfg.Read, cfg.Stream} {
		if lim.Rate < 0 || math.IsNaN(lim.Rate) || math.IsInf(lim.Rate, 0) || lim.Burst < 0 {
			return nil, fmt.Errorf("httpapi: the %s rate limit needs a finite rate and a burst, neither negative", rateClasses[i])
		}
		if lim.Rate == 0 {
			continue
		}
		if lim.Burst == 0 {
			lim.Burst = max(1, int(math.Ceil(lim.Rate)))
		}
		l.limits[i] = lim
		l.refill[i] = time.Duration(float64(lim.Burst) / lim.Rate * float64(time.Second))
		limited = true
	}
	if !limited {
		return nil, nil
	}
	return l, nil
}

// classOf is a REST request's class, by its method.
func classOf(r *http.Request) rateClass {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return classRead
	}
	return classWrite
}

// allow takes a token from the tenant's bucket of class at now, or answers
// the 429 to send. A nil limiter allows everything.
func (l *rateLimiter) allow(class rateClass, tenant string, now time.Time) *apiError {
	if l == nil || l.limits[class].Rate == 0 {
		return nil
	}
	if len(tenant) > maxRateKeyBytes {
		sum := sha256.Sum256([]byte(tenant))
		tenant = string(sum[:])
	}
	key := rateKey{class, tenant}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evictRefilled(now)
	var b *rateBucket
	if e, ok := l.buckets[key]; ok {
		b = e.Value.(*rateBucket)
		l.recent[class].MoveToFront(e)
	} else {
		l.makeRoom()
		lim := l.limits[class]
		b = &rateBucket{key: key, limiter: rate.NewLimiter(rate.Limit(lim.Rate), lim.Burst)}
		l.buckets[key] = l.recent[class].PushFront(b)
	}
	b.used = now
	if b.limiter.AllowN(now, 1) {
		return nil
	}
	lim := l.limits[class]
	wait := time.Duration((1 - b.limiter.TokensAt(now)) / lim.Rate * float64(time.Second))
	return rateLimited(rateClasses[class], lim, wait)
}

// evictRefilled drops the buckets that have refilled since their last use:
// a full bucket is the same as a new one, so nothing is lost. Each class's
// list is in order of use, so this looks only at what it drops and one
// more. The mutex is held.
func (l *rateLimiter) evictRefilled(now time.Time) {
	for c := range numRateClasses {
		for e := l.recent[c].Back(); e != nil; e = l.recent[c].Back() {
			if now.Sub(e.Value.(*rateBucket).used) < l.refill[c] {
				break
			}
			l.drop(e)
		}
	}
}

// makeRoom drops the least recently used buckets, of any class, until a
// new one fits under maxBuckets. The mutex is held.
func (l *rateLimiter) makeRoom() {
	for len(l.buckets) >= l.maxBuckets {
		var oldest *list.Element
		for c := range numRateClasses {
			if e := l.recent[c].Back(); e != nil && (oldest == nil || e.Value.(*rateBucket).used.Before(oldest.Value.(*rateBucket).used)) {
				oldest = e
			}
		}
		l.drop(oldest)
	}
}

func (l *rateLimiter) drop(e *list.Element) {
	b := e.Value.(*rateBucket)
	l.recent[b.key.class].Remove(e)
	delete(l.buckets, b.key)
}

// rateLimited is the 429 of a tenant over its budget: retryable, with
// retry_after_ms the time until its bucket holds a token again (at least
// 1 ms) and the Retry-After header in whole seconds (at least 1).
func rateLimited(class string, lim RateLimit, wait time.Duration) *apiError {
	ms := max(1, (wait + time.Millisecond - 1).Milliseconds())
	e := newAPIError(http.StatusTooManyRequests, "workflow.service.rate_limited",
		"the tenant is over its %s rate limit on this server (%g requests a second, burst %d); try again in %d ms", class, lim.Rate, lim.Burst, ms)
	e.retryable, e.retryAfterMS = true, &ms
	return e.with("class", class).with("rate", lim.Rate).with("burst", lim.Burst)
}

// limitStream counts an authenticated GET /api/v1/ws against its tenant's
// stream bucket before next serves it; a request that does not authenticate
// goes on to next, which answers it.
func (s *Server) limitStream(next http.HandlerFunc) http.HandlerFunc {
	if s.limiter == nil || s.limiter.limits[classStream].Rate == 0 {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if p, err := s.authenticateTenant(r, true); err == nil {
			if ae := s.limiter.allow(classStream, p.tenantID, time.Now()); ae != nil {
				s.writeError(w, newRequestContext(w, r), "stream", "events", ae)
				return
			}
		}
		next(w, r)
	}
}

// RateLimited is the answer to a request over its tenant's rate limit.
type RateLimited struct {
	// RetryAfter is when the tenant's bucket holds a token again.
	RetryAfter time.Duration
	// Message says which limit and by how much.
	Message string
}

func (e *RateLimited) Error() string { return e.Message }

// Allow takes a token from the tenant's bucket for a request that is not
// an API request but costs as much as one (a console page): the read class
// for GET and HEAD, the write class otherwise. It returns a *RateLimited
// when the tenant is over its limit, nil otherwise.
func (s *Server) Allow(r *http.Request, tenant string) error {
	ae := s.limiter.allow(classOf(r), tenant, time.Now())
	if ae == nil {
		return nil
	}
	var wait time.Duration
	if ae.retryAfterMS != nil {
		wait = time.Duration(*ae.retryAfterMS) * time.Millisecond
	}
	return &RateLimited{RetryAfter: wait, Message: ae.message}
}
