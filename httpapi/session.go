package httpapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Console sessions (docs/console.md, "Signing in"). A browser signs in once
// with an API token; Baton answers with a session cookie that stands for
// the token's tenant and scopes. The cookie is itself an HS256 token,
// signed with a key derived from the JWT secret (so every process of a
// deployment accepts it, and an API token is never a valid cookie nor the
// reverse), HttpOnly, SameSite=Strict, and never outlives the token it came
// from. Requests that change something must also carry the session's CSRF
// token in X-CSRF-Token, which the console's pages hold and a cross-site
// page cannot read.
const (
	// SessionCookie is the name of the console's session cookie.
	SessionCookie = "baton_session"
	// CSRFHeader carries a cookie-authenticated request's CSRF token.
	CSRFHeader = "X-CSRF-Token"
	// MaxSessionLifetime is the longest a console session lives; a token
	// that expires sooner ends its session sooner.
	MaxSessionLifetime = 12 * time.Hour
)

// sessionAudience marks a session cookie's claims.
const sessionAudience = "baton-console"

// Session is who a console session acts as.
type Session struct {
	// TenantID is the tenant the session is bound to.
	TenantID string
	// Subject is the token's subject.
	Subject string
	// Scopes are the token's scopes.
	Scopes []string
	// Expires is when the session ends: never later than its token.
	Expires time.Time
	// CSRF is the token requests that change something send in
	// X-CSRF-Token.
	CSRF string
	// Operator reports whether the request that carried the session also
	// carried a valid operator session (OperatorSession), so that the
	// console links it to River UI. It is not part of the session cookie:
	// a tenant's session never makes anyone an operator.
	Operator bool
}

// Has reports whether the session carries a scope.
func (s Session) Has(scope string) bool { return slices.Contains(s.Scopes, scope) }

// sessionClaims are a session cookie's claims.
type sessionClaims struct {
	TenantID string `json:"tenant_id"`
	Scope    string `json:"scope,omitempty"`
	CSRF     string `json:"csrf"`
	jwt.RegisteredClaims
}

// allScopes are the scopes of an insecure server's sessions.
var allScopes = []string{ScopeWorkflowsRead, ScopeWorkflowsWrite, ScopeMonitorRead, ScopeMonitorWrite}

// sessionKey derives the key session cookies are signed with. An insecure
// server has no secret: its key is random, so its sessions end with it.
func sessionKey(secret []byte) []byte {
	if len(secret) == 0 {
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		return key
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("baton console session v1"))
	return mac.Sum(nil)
}

// SessionFromToken checks an API token exactly as a request's bearer token
// is checked and returns the session it opens, ending when the token does
// or after MaxSessionLifetime.
func (s *Server) SessionFromToken(raw string) (Session, error) {
	if s.secret == nil {
		return Session{}, newAPIError(http.StatusBadRequest, "workflow.access.unauthorized", "this server runs without authentication: sign in with a tenant, not a token")
	}
	claims, err := s.parseToken(strings.TrimSpace(raw))
	if err != nil {
		return Session{}, err
	}
	scopes := strings.Fields(claims.Scope)
	if len(scopes) == 0 {
		scopes = defaultScopes
	}
	return Session{TenantID: claims.TenantID, Subject: claims.Subject, Scopes: scopes,
		Expires: minTime(claims.ExpiresAt.Time, time.Now().Add(MaxSessionLifetime))}, nil
}

// InsecureSession is a session for a tenant with every scope, for a server
// that runs without authentication (baton dev signs in with it); it fails
// on a server that checks tokens.
func (s *Server) InsecureSession(tenant string) (Session, error) {
	if s.secret != nil {
		return Session{}, newAPIError(http.StatusUnauthorized, "workflow.access.unauthorized", "sign in with an API token")
	}
	if err := s.engine.Limits().CheckID("tenant", tenant); err != nil || tenant == "" {
		return Session{}, newAPIError(http.StatusBadRequest, "workflow.access.invalid_tenant", "the tenant must be 1 to %d bytes", s.engine.Limits().IDBytes)
	}
	return Session{TenantID: tenant, Subject: "insecure", Scopes: allScopes, Expires: time.Now().Add(MaxSessionLifetime)}, nil
}

// StartSession sets the session cookie for a session, with a fresh CSRF
// token, and returns the session as the cookie holds it.
func (s *Server) StartSession(w http.ResponseWriter, r *http.Request, sess Session) (Session, error) {
	nonce := make([]byte, 24)
	if _, err := rand.Read(nonce); err != nil {
		return Session{}, err
	}
	sess.CSRF = base64.RawURLEncoding.EncodeToString(nonce)
	claims := sessionClaims{TenantID: sess.TenantID, Scope: strings.Join(sess.Scopes, " "), CSRF: sess.CSRF,
		RegisteredClaims: jwt.RegisteredClaims{Subject: sess.Subject, Audience: jwt.ClaimStrings{sessionAudience},
			IssuedAt: jwt.NewNumericDate(time.Now()), ExpiresAt: jwt.NewNumericDate(sess.Expires)}}
	value, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.sessionKey)
	if err != nil {
		return Session{}, err
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: value, Path: "/", Expires: sess.Expires,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	return sess, nil
}

// EndSession clears the session cookie.
func (s *Server) EndSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

// ErrNoSession is Session's error for a request without a session cookie.
var ErrNoSession = errors.New("no console session")

// Session returns the request's console session: ErrNoSession without a
// cookie, an error for a cookie that is forged, expired or malformed.
func (s *Server) Session(r *http.Request) (Session, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return Session{}, ErrNoSession
	}
	var claims sessionClaims
	_, err = jwt.ParseWithClaims(c.Value, &claims, func(*jwt.Token) (any, error) { return s.sessionKey, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired(), jwt.WithAudience(sessionAudience))
	if err != nil || claims.TenantID == "" || claims.CSRF == "" {
		return Session{}, newAPIError(http.StatusUnauthorized, "workflow.access.unauthorized", "the console session is invalid or has expired: sign in again")
	}
	_, notOperator := s.OperatorSession(r)
	return Session{TenantID: claims.TenantID, Subject: claims.Subject, Scopes: strings.Fields(claims.Scope),
		Expires: claims.ExpiresAt.Time, CSRF: claims.CSRF, Operator: notOperator == nil}, nil
}

// sessionPrincipal authenticates a request by its session cookie. A
// request that may change something must carry the session's CSRF token
// and must not come from another site's page.
func (s *Server) sessionPrincipal(r *http.Request, tenant string) (*principal, error) {
	sess, err := s.Session(r)
	if err != nil {
		return nil, err
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		got := r.Header.Get(CSRFHeader)
		if subtle.ConstantTimeCompare([]byte(got), []byte(sess.CSRF)) != 1 {
			return nil, newAPIError(http.StatusForbidden, "workflow.access.forbidden", "a request made with the console's session needs its %s header", CSRFHeader)
		}
		if crossOrigin.Check(r) != nil {
			return nil, newAPIError(http.StatusForbidden, "workflow.access.forbidden", "a request made with the console's session must come from the console's origin")
		}
	}
	if tenant != "" && tenant != sess.TenantID {
		return nil, newAPIError(http.StatusForbidden, "workflow.access.forbidden", "the console session is not valid for tenant %q", tenant)
	}
	return &principal{tenantID: sess.TenantID, subject: sess.Subject, scopes: sess.Scopes}, nil
}

// crossOrigin refuses a request another site's page makes a browser send:
// by its Sec-Fetch-Site, else its Origin against Host.
var crossOrigin = http.NewCrossOriginProtection()

// hasSessionCookie reports whether a request carries a session cookie.
func hasSessionCookie(r *http.Request) bool {
	c, err := r.Cookie(SessionCookie)
	return err == nil && c.Value != ""
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// ChecksTokens reports whether the server authenticates requests with
// tokens; false for a server that runs without authentication.
func (s *Server) ChecksTokens() bool { return s.secret != nil }
