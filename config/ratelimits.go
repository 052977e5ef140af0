package config

import (
	"fmt"
	"math"
)

// RateLimits is the rateLimits section: per-tenant token buckets of the
// API, one per tenant and class of request, kept in each process's memory
// (docs/configuration.md, "Rate limits"). A class left out, or with rate 0,
// is not limited; without the section nothing is, in serve as in dev.
type RateLimits struct {
	// Write limits POST, PUT and DELETE requests under /api/v1.
	Write RateLimit `json:"write"`
	// Read limits GET requests under /api/v1, the stream aside.
	Read RateLimit `json:"read"`
	// Stream limits opening the WebSocket stream (GET /api/v1/ws).
	Stream RateLimit `json:"stream"`
	// MaxBuckets bounds how many buckets a process keeps, over every tenant
	// and class; past it the least recently used bucket is forgotten (its
	// tenant starts again with a full one). Default 100000.
	MaxBuckets int `json:"maxBuckets"`
}

// RateLimit is one class's bucket.
type RateLimit struct {
	// Rate is how many requests a second a tenant's bucket gains. 0 (the
	// default) leaves the class unlimited.
	Rate float64 `json:"rate"`
	// Burst is the bucket's size: how many requests a quiet tenant may
	// send at once. Default: rate rounded up, at least 1.
	Burst int `json:"burst"`
}

// validateRateLimits checks the rateLimits section.
func (c *Config) validateRateLimits() []string {
	var problems []string
	r := c.RateLimits
	for _, class := range []struct {
		name string
		l    RateLimit
	}{{"write", r.Write}, {"read", r.Read}, {"stream", r.Stream}} {
		name, l := class.name, class.l
		if l.Rate < 0 || math.IsInf(l.Rate, 0) || math.IsNaN(l.Rate) || l.Burst < 0 {
			problems = append(problems, fmt.Sprintf("rateLimits.%s: rate and burst must not be negative", name))
		}
		if l.Rate == 0 && l.Burst > 0 {
			problems = append(problems, fmt.Sprintf("rateLimits.%s: a burst needs a rate (requests a second)", name))
		}
	}
	if r.MaxBuckets < 0 {
		problems = append(problems, "rateLimits.maxBuckets must not be negative")
	}
	return problems
}
