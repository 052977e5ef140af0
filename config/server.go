package config

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Auth configures how the API checks tokens (besides their HS256
// signature with BATON_JWT_SECRET and their exp).
type Auth struct {
	// MaxTokenLifetime is the longest a token may live, from its iat (or
	// from now, when that is later) to its exp; a longer-lived token is
	// refused with 401. Default 720h (30 days).
	MaxTokenLifetime Duration `json:"maxTokenLifetime"`
	// Audience, when set, must be one of a token's aud values.
	// BATON_JWT_AUDIENCE overrides it. Default: none checked.
	Audience string `json:"audience"`
	// Issuer, when set, must be a token's iss. BATON_JWT_ISSUER overrides
	// it. Default: none checked.
	Issuer string `json:"issuer"`
}

// HTTP configures the API's HTTP server.
type HTTP struct {
	// ReadTimeout bounds reading a whole request, body included, so a body
	// sent a byte at a time cannot hold a connection. Default 30s.
	ReadTimeout Duration `json:"readTimeout"`
	// WriteTimeout bounds a request from the end of its headers to the end
	// of its answer. It must be longer than limits.waitTimeoutMs, which a
	// wait_for_completion request may be held for. Default
	// limits.waitTimeoutMs + 30s (150s). The WebSocket stream is exempt:
	// each of its writes has its own 10s bound.
	WriteTimeout Duration `json:"writeTimeout"`
	// IdleTimeout is how long a keep-alive connection may wait for its next
	// request. Default 120s.
	IdleTimeout Duration `json:"idleTimeout"`
	// TrustedProxies are the reverse proxies whose X-Forwarded-Proto Baton
	// believes, as CIDR prefixes ("10.0.0.0/8") or single addresses
	// ("127.0.0.1", "::1"): a request whose peer address is among them and
	// whose X-Forwarded-Proto says https gets a Secure console session
	// cookie, as a request that came over TLS does. Default: none, so the
	// header is ignored.
	TrustedProxies []string `json:"trustedProxies"`
}

// TrustedProxyPrefixes parses TrustedProxies; a single address is a
// prefix of its full length.
func (h HTTP) TrustedProxyPrefixes() ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(h.TrustedProxies))
	for _, s := range h.TrustedProxies {
		p, err := parseProxy(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("http.trustedProxies: %q is neither a CIDR prefix nor an IP address", s)
		}
		out = append(out, p)
	}
	return out, nil
}

// parseProxy parses one trusted proxy: a prefix, or an address. IPv4
// addresses written in IPv6 form (::ffff:10.0.0.1) are read as IPv4, as
// peers' addresses are.
func parseProxy(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			return netip.PrefixFrom(a.Unmap(), p.Bits()-96).Masked(), nil
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// writeTimeoutMargin is what the default write timeout adds to the longest
// wait_for_completion hold.
const writeTimeoutMargin = 30 * time.Second

// applyServerDefaults fills auth and http; it runs after the limits have
// their defaults.
func (c *Config) applyServerDefaults() {
	if c.Auth.MaxTokenLifetime == 0 {
		c.Auth.MaxTokenLifetime = Duration(30 * 24 * time.Hour)
	}
	if c.HTTP.ReadTimeout == 0 {
		c.HTTP.ReadTimeout = Duration(30 * time.Second)
	}
	if c.HTTP.WriteTimeout == 0 {
		c.HTTP.WriteTimeout = Duration(c.waitHold() + writeTimeoutMargin)
	}
	if c.HTTP.IdleTimeout == 0 {
		c.HTTP.IdleTimeout = Duration(120 * time.Second)
	}
}

// waitHold is the longest a wait_for_completion request may be held.
func (c *Config) waitHold() time.Duration {
	return time.Duration(c.Limits.WaitTimeoutMS) * time.Millisecond
}

// validateServer checks auth and http.
func (c *Config) validateServer() []string {
	var problems []string
	if c.Auth.MaxTokenLifetime < 0 {
		problems = append(problems, "auth.maxTokenLifetime must not be negative")
	}
	if c.HTTP.ReadTimeout < 0 || c.HTTP.WriteTimeout < 0 || c.HTTP.IdleTimeout < 0 {
		problems = append(problems, "http timeouts must not be negative")
	}
	if _, err := c.HTTP.TrustedProxyPrefixes(); err != nil {
		problems = append(problems, err.Error())
	}
	if hold := c.waitHold(); c.HTTP.WriteTimeout > 0 && time.Duration(c.HTTP.WriteTimeout) <= hold {
		problems = append(problems, fmt.Sprintf("http.writeTimeout (%s) must be longer than limits.waitTimeoutMs (%s): a wait_for_completion request would be cut off",
			time.Duration(c.HTTP.WriteTimeout), hold))
	}
	return problems
}
