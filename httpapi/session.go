package httpapi

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// Console sessions (docs/console.md, "Signing in"). A browser signs in once
// with an API token; Baton stores a session in PostgreSQL (console_session)
// with the token's tenant and scopes and answers with a cookie that holds
// only the session's id: 32 random bytes. The row is keyed by the id's
// HMAC under a key derived from the JWT secret, so the table holds no
// usable cookie, an API token is never a valid cookie nor the reverse, and
// a server with another secret knows no session. Every request made with
// the cookie reads its row by primary key, in whatever baton process it
// reaches, so a sign-out (which revokes the row) ends the session
// everywhere at once. The cookie is HttpOnly, SameSite=Strict, Secure when
// the browser reached Baton over TLS (the request did, or a trusted proxy
// says so), and never outlives the token it came from. Requests that
// change something must also carry the session's CSRF token in
// X-CSRF-Token, which the console's pages hold and a cross-site page
// cannot read.
const (
	// SessionCookie is the name of the console's session cookie.
	SessionCookie = "baton_session"
	// CSRFHeader carries a cookie-authenticated request's CSRF token.
	CSRFHeader = "X-CSRF-Token"
	// MaxSessionLifetime is the longest a console session lives; a token
	// that expires sooner ends its session sooner.
	MaxSessionLifetime = 12 * time.Hour
)

// sessionIDBytes is the length of a session's random id, the cookie's
// value (base64url, unpadded).
const sessionIDBytes = 32

// sessionLookupTimeout bounds each read or write of a session row.
const sessionLookupTimeout = 5 * time.Second

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

// allScopes are the scopes of an insecure server's sessions.
var allScopes = []string{ScopeWorkflowsRead, ScopeWorkflowsWrite, ScopeMonitorRead, ScopeMonitorWrite}

// sessionKey derives the key session ids are keyed with in the database.
// An insecure server has no secret: its key is random, so its sessions end
// with it.
func sessionKey(secret []byte) []byte {
	if len(secret) == 0 {
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		return key
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("baton console session id v2"))
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

// StartSession stores a session, with a fresh CSRF token, and sets its
// cookie; it returns the session as stored.
func (s *Server) StartSession(w http.ResponseWriter, r *http.Request, sess Session) (Session, error) {
	id, err := randomToken(sessionIDBytes)
	if err != nil {
		return Session{}, err
	}
	if sess.CSRF, err = randomToken(24); err != nil {
		return Session{}, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), sessionLookupTimeout)
	defer cancel()
	err = s.q.ConsoleSessionInsert(ctx, s.pool, &dbsqlc.ConsoleSessionInsertParams{ID: s.sessionRowID(id), TenantID: sess.TenantID,
		Subject: sess.Subject, Scopes: sess.Scopes, Csrf: sess.CSRF, ExpiresAt: sess.Expires})
	if err != nil {
		return Session{}, fmt.Errorf("storing the console session: %w", err)
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: id, Path: "/", Expires: sess.Expires,
		HttpOnly: true, Secure: s.overTLS(r), SameSite: http.SameSiteStrictMode})
	return sess, nil
}

// EndSession ends the request's session, for every process, and clears
// its cookie. When the session cannot be revoked (the database is
// unavailable) it returns the error and leaves the cookie: the session
// has not ended.
func (s *Server) EndSession(w http.ResponseWriter, r *http.Request) error {
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
		if id, ok := s.cookieRowID(c.Value); ok {
			ctx, cancel := context.WithTimeout(r.Context(), sessionLookupTimeout)
			defer cancel()
			if _, err := s.q.ConsoleSessionRevoke(ctx, s.pool, &dbsqlc.ConsoleSessionRevokeParams{ID: id}); err != nil {
				return fmt.Errorf("ending the console session: %w", err)
			}
		}
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: s.overTLS(r), SameSite: http.SameSiteStrictMode})
	return nil
}

// ErrNoSession is Session's error for a request without a session cookie.
var ErrNoSession = errors.New("no console session")

// ErrSessionRefused is matched (errors.Is) by Session's error for a cookie
// that stands for no live session: malformed, forged, expired, or ended by
// a sign-out. Any other error of Session's is the database's: whether the
// session lives is unknown.
var ErrSessionRefused = errors.New("console session refused")

// refusedSession is Session's 401 for a cookie that stands for no live
// session.
type refusedSession struct{ *apiError }

func (e refusedSession) Unwrap() error        { return e.apiError }
func (e refusedSession) Is(target error) bool { return target == ErrSessionRefused }

func sessionRefused() error {
	return refusedSession{newAPIError(http.StatusUnauthorized, "workflow.access.unauthorized",
		"the console session is invalid, has expired or was ended: sign in again")}
}

// Session returns the request's console session, read from the database:
// ErrNoSession without a cookie, an error that matches ErrSessionRefused
// for a cookie that stands for no live session, and the database's error
// when it cannot be read.
func (s *Server) Session(r *http.Request) (Session, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return Session{}, ErrNoSession
	}
	id, ok := s.cookieRowID(c.Value)
	if !ok {
		return Session{}, sessionRefused()
	}
	ctx, cancel := context.WithTimeout(r.Context(), sessionLookupTimeout)
	defer cancel()
	row, err := s.q.ConsoleSessionGetLive(ctx, s.pool, &dbsqlc.ConsoleSessionGetLiveParams{ID: id})
	if errors.Is(err, pgx.ErrNoRows) {
		return Session{}, sessionRefused()
	}
	if err != nil {
		return Session{}, fmt.Errorf("reading the console session: %w", err)
	}
	_, notOperator := s.OperatorSession(r)
	return Session{TenantID: row.TenantID, Subject: row.Subject, Scopes: row.Scopes, Expires: row.ExpiresAt, CSRF: row.Csrf,
		Operator: notOperator == nil}, nil
}

// randomToken is n random bytes, base64url without padding.
func randomToken(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// sessionRowID is the primary key of a session's row: the HMAC-SHA256 of
// its cookie value under the session key.
func (s *Server) sessionRowID(cookie string) []byte {
	mac := hmac.New(sha256.New, s.sessionKey)
	mac.Write([]byte(cookie))
	return mac.Sum(nil)
}

// cookieRowID is the row id of a cookie's value, and false for a value no
// session has (not 32 bytes of base64url), which needs no database read.
func (s *Server) cookieRowID(cookie string) ([]byte, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(cookie)
	if err != nil || len(raw) != sessionIDBytes {
		return nil, false
	}
	return s.sessionRowID(cookie), true
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

// overTLS reports whether the browser reached Baton over TLS: the request
// itself came over TLS, or it came from a trusted proxy
// (Config.TrustedProxies) whose X-Forwarded-Proto says https. Of a list
// ("https, http", written by a chain of proxies) the first value counts:
// the scheme the first proxy was reached by.
func (s *Server) overTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if len(s.trustedProxies) == 0 {
		return false
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	addr := peer.Addr().Unmap()
	if !slices.ContainsFunc(s.trustedProxies, func(p netip.Prefix) bool { return p.Contains(addr) }) {
		return false
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
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
