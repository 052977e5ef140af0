package httpapi

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Scopes a token may carry (docs/api.md, "Conventions").
const (
	ScopeWorkflowsRead  = "workflows:read"
	ScopeWorkflowsWrite = "workflows:write"
	ScopeMonitorRead    = "monitor:read"
	ScopeMonitorWrite   = "monitor:write"
)

// MinJWTSecretBytes is the shortest HS256 secret Baton verifies tokens
// with: 32 bytes, the size of the HMAC-SHA256 output (RFC 7518, 3.2). A
// shorter secret can be guessed offline from any one token.
const MinJWTSecretBytes = 32

// DefaultMaxTokenLifetime is TokenPolicy.MaxLifetime's default: 30 days.
const DefaultMaxTokenLifetime = 30 * 24 * time.Hour

// TokenPolicy is what an API token must satisfy besides a valid HS256
// signature and an exp claim in the future.
type TokenPolicy struct {
	// MaxLifetime is the longest a token may live: a token whose exp is
	// further than that from its iat, or from now, is refused. Zero means
	// DefaultMaxTokenLifetime (30 days).
	MaxLifetime time.Duration
	// Audience, when set, must be one of the token's aud values. Empty
	// checks no audience.
	Audience string
	// Issuer, when set, must be the token's iss. Empty checks no issuer.
	Issuer string
}

func (p TokenPolicy) validate() error {
	if p.MaxLifetime < 0 {
		return fmt.Errorf("httpapi: Token.MaxLifetime must not be negative")
	}
	return nil
}

func (p TokenPolicy) withDefaults() TokenPolicy {
	if p.MaxLifetime == 0 {
		p.MaxLifetime = DefaultMaxTokenLifetime
	}
	return p
}

// parserOptions are the JWT checks of the policy.
func (p TokenPolicy) parserOptions() []jwt.ParserOption {
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired()}
	if p.Audience != "" {
		opts = append(opts, jwt.WithAudience(p.Audience))
	}
	if p.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(p.Issuer))
	}
	return opts
}

// checkLifetime refuses a token that lives longer than MaxLifetime,
// counted from its iat or from now, whichever is earlier: a token cannot
// pass by claiming a late iat.
func (p TokenPolicy) checkLifetime(c *tokenClaims, now time.Time) error {
	exp := c.ExpiresAt.Time
	lifetime := exp.Sub(now)
	if c.IssuedAt != nil {
		lifetime = max(lifetime, exp.Sub(c.IssuedAt.Time))
	}
	if lifetime > p.MaxLifetime {
		return newAPIError(http.StatusUnauthorized, "workflow.access.unauthorized",
			"invalid token: it lives %s, longer than the %s this server accepts (auth.maxTokenLifetime)",
			lifetime.Round(time.Second), p.MaxLifetime)
	}
	return nil
}

// TokenOption sets an optional claim of a minted token.
type TokenOption func(*tokenClaims)

// WithAudience sets the token's aud claim.
func WithAudience(aud string) TokenOption {
	return func(c *tokenClaims) { c.Audience = jwt.ClaimStrings{aud} }
}

// WithIssuer sets the token's iss claim.
func WithIssuer(iss string) TokenOption {
	return func(c *tokenClaims) { c.Issuer = iss }
}

// defaultScopes are a token's scopes when it names none.
var defaultScopes = []string{ScopeWorkflowsRead, ScopeWorkflowsWrite}

// tokenClaims are the claims of Baton's API tokens.
type tokenClaims struct {
	TenantID string `json:"tenant_id,omitempty"`
	Scope    string `json:"scope,omitempty"`
	jwt.RegisteredClaims
}

// principal is who a request acts as.
type principal struct {
	tenantID string
	subject  string
	scopes   []string
}

func (p *principal) has(scope string) bool { return slices.Contains(p.scopes, scope) }

// MintToken signs an HS256 API token for a tenant, issued now and valid for
// ttl. Empty scopes mean "workflows:read workflows:write".
func MintToken(secret []byte, tenantID, subject string, scopes []string, ttl time.Duration, opts ...TokenOption) (string, error) {
	if len(secret) == 0 {
		return "", fmt.Errorf("minting token: the secret is empty")
	}
	if tenantID == "" {
		return "", fmt.Errorf("minting token: the tenant is required")
	}
	now := time.Now()
	claims := tokenClaims{
		TenantID: tenantID,
		Scope:    strings.Join(scopes, " "),
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   subject,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	}
	for _, opt := range opts {
		opt(&claims)
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}

// authenticate checks the request's token and tenant header. With no secret
// (insecure mode) the tenant header alone names the tenant, with every scope.
func (s *Server) authenticate(r *http.Request) (*principal, error) {
	return s.authenticateTenant(r, false)
}

// authenticateTenant is authenticate; with stream (the WebSocket, whose
// browser clients cannot set headers) the token may come as ?access_token=
// and a missing X-Tenant-ID means the token's tenant. Elsewhere a request
// with ?access_token= is refused: a token in a URL ends up in logs and
// browser histories. A request with neither a bearer token nor a tenant
// header but with the console's session cookie acts as that session
// (httpapi/session.go).
func (s *Server) authenticateTenant(r *http.Request, stream bool) (*principal, error) {
	tenant := r.Header.Get("X-Tenant-ID")
	if l := s.engine.Limits(); l.CheckID("X-Tenant-ID", tenant) != nil {
		return nil, newAPIError(http.StatusBadRequest, "workflow.access.invalid_tenant", "X-Tenant-ID is %d bytes, over the limit of %d (limits.idBytes)", len(tenant), l.IDBytes).
			with("field", "X-Tenant-ID").with("limit", "limits.idBytes").with("max", l.IDBytes)
	}
	if s.secret == nil {
		// Without authentication the tenant header names the tenant and
		// any Authorization header is ignored; the console's session
		// stands in for a missing header.
		if tenant == "" && hasSessionCookie(r) {
			return s.sessionPrincipal(r, "")
		}
		if tenant == "" {
			return nil, newAPIError(http.StatusBadRequest, "workflow.access.missing_tenant", "the X-Tenant-ID header is required")
		}
		return &principal{tenantID: tenant, subject: "insecure", scopes: allScopes}, nil
	}
	raw, err := bearerToken(r, stream)
	if err != nil {
		return nil, err
	}
	if raw == "" && hasSessionCookie(r) {
		return s.sessionPrincipal(r, tenant)
	}
	if raw == "" {
		return nil, newAPIError(http.StatusUnauthorized, "workflow.access.unauthorized", "a bearer token is required")
	}
	claims, err := s.parseToken(raw)
	if err != nil {
		return nil, err
	}
	if tenant == "" && stream {
		tenant = claims.TenantID
	}
	if tenant == "" {
		return nil, newAPIError(http.StatusBadRequest, "workflow.access.missing_tenant", "the X-Tenant-ID header is required")
	}
	if tenant != claims.TenantID {
		return nil, newAPIError(http.StatusForbidden, "workflow.access.forbidden", "the token is not valid for tenant %q", tenant)
	}
	scopes := strings.Fields(claims.Scope)
	if len(scopes) == 0 {
		scopes = defaultScopes
	}
	return &principal{tenantID: claims.TenantID, subject: claims.Subject, scopes: scopes}, nil
}

// bearerToken returns the request's token: its Authorization header, or
// on the stream its ?access_token=; empty when it has none.
func bearerToken(r *http.Request, stream bool) (string, error) {
	raw := ""
	if h := r.Header.Get("Authorization"); h != "" {
		var ok bool
		raw, ok = strings.CutPrefix(h, "Bearer ")
		if !ok {
			return "", newAPIError(http.StatusUnauthorized, "workflow.access.unauthorized", "the Authorization header must be \"Bearer <token>\"")
		}
	}
	if r.URL.Query().Has("access_token") {
		if !stream {
			return "", newAPIError(http.StatusUnauthorized, "workflow.access.unauthorized",
				"access_token is accepted only by GET /api/v1/ws; send the token as \"Authorization: Bearer <token>\"")
		}
		if raw == "" {
			raw = r.URL.Query().Get("access_token")
		}
	}
	return raw, nil
}

// parseToken checks an API token's signature, expiry, lifetime, audience
// and issuer, and that it names a tenant.
func (s *Server) parseToken(raw string) (*tokenClaims, error) {
	var claims tokenClaims
	_, err := jwt.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return s.secret, nil }, s.token.parserOptions()...)
	if err != nil {
		return nil, newAPIError(http.StatusUnauthorized, "workflow.access.unauthorized", "invalid token: %v", err)
	}
	if err := s.token.checkLifetime(&claims, time.Now()); err != nil {
		return nil, err
	}
	if claims.TenantID == "" {
		return nil, newAPIError(http.StatusUnauthorized, "workflow.access.unauthorized", "the token has no tenant_id claim")
	}
	if isOperatorAudience(claims.Audience) {
		return nil, newAPIError(http.StatusUnauthorized, "workflow.access.unauthorized", "a tenant token must not carry the operator audience")
	}
	return &claims, nil
}
