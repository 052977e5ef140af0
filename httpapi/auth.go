package httpapi

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Scopes a token may carry (API.md, "Conventions").
const (
	ScopeWorkflowsRead  = "workflows:read"
	ScopeWorkflowsWrite = "workflows:write"
	ScopeMonitorRead    = "monitor:read"
	ScopeMonitorWrite   = "monitor:write"
)

// defaultScopes are a token's scopes when it names none.
var defaultScopes = []string{ScopeWorkflowsRead, ScopeWorkflowsWrite}

// tokenClaims are the claims of Baton's API tokens.
type tokenClaims struct {
	TenantID string `json:"tenant_id"`
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

// MintToken signs an HS256 API token for a tenant. Empty scopes mean
// "workflows:read workflows:write".
func MintToken(secret []byte, tenantID, subject string, scopes []string, ttl time.Duration) (string, error) {
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
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}

// authenticate checks the request's token and tenant header. With no secret
// (insecure mode) the tenant header alone names the tenant, with every scope.
func (s *Server) authenticate(r *http.Request) (*principal, error) {
	return s.authenticateTenant(r, false)
}

// authenticateTenant is authenticate; with tenantOptional (the WebSocket,
// whose browser clients cannot set headers) a missing X-Tenant-ID means the
// token's tenant.
func (s *Server) authenticateTenant(r *http.Request, tenantOptional bool) (*principal, error) {
	tenant := r.Header.Get("X-Tenant-ID")
	if s.secret == nil {
		if tenant == "" {
			return nil, newAPIError(http.StatusBadRequest, "workflow.access.missing_tenant", "the X-Tenant-ID header is required")
		}
		return &principal{tenantID: tenant, subject: "insecure", scopes: []string{ScopeWorkflowsRead, ScopeWorkflowsWrite, ScopeMonitorRead, ScopeMonitorWrite}}, nil
	}
	raw := ""
	if h := r.Header.Get("Authorization"); h != "" {
		var ok bool
		raw, ok = strings.CutPrefix(h, "Bearer ")
		if !ok {
			return nil, newAPIError(http.StatusUnauthorized, "workflow.access.unauthorized", "the Authorization header must be \"Bearer <token>\"")
		}
	} else if q := r.URL.Query().Get("access_token"); q != "" {
		raw = q
	}
	if raw == "" {
		return nil, newAPIError(http.StatusUnauthorized, "workflow.access.unauthorized", "a bearer token is required")
	}
	var claims tokenClaims
	_, err := jwt.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return s.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired())
	if err != nil {
		return nil, newAPIError(http.StatusUnauthorized, "workflow.access.unauthorized", "invalid token: %v", err)
	}
	if claims.TenantID == "" {
		return nil, newAPIError(http.StatusUnauthorized, "workflow.access.unauthorized", "the token has no tenant_id claim")
	}
	if tenant == "" && tenantOptional {
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
