package httpapi

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// Operator tokens (docs/console.md, "River UI"). River UI sees and can
// cancel or delete every tenant's jobs, so what opens it is not a tenant's
// credential with one more scope: it is an operator token, minted only by
// `baton token --operator` and signed with a secret of its own
// (BATON_OPERATOR_SECRET, which must differ from BATON_JWT_SECRET). It
// names no tenant and no scope, and carries the audience "baton-operator".
// No tenant token passes as one, nor the reverse: each is checked with its
// own secret, a tenant token needs a tenant_id an operator token must not
// have, and a tenant token with the operator audience is refused.
//
// A browser signs in to River UI with an operator token once; Baton stores
// an operator session in PostgreSQL (operator_session, a table apart from
// the tenant sessions' console_session) and answers with a cookie that
// holds only the session's id, 32 random bytes, whose row is keyed by
// their HMAC under a key derived from the operator secret: a tenant
// session cookie names no operator session, nor the reverse. Every River
// UI request reads the row by primary key, so a sign-out, which revokes
// it, ends the operator session in every baton process at once.
const (
	// OperatorCookie is the name of the operator session cookie.
	OperatorCookie = "baton_operator"
	// operatorAudience is the aud every operator token carries.
	operatorAudience = "baton-operator"
	// operatorSessionAudience was the audience of the signed operator
	// session cookies of earlier builds; a tenant token carrying it is
	// refused as one carrying operatorAudience is.
	operatorSessionAudience = "baton-operator-session"
)

// Operator is who an operator token or session acts as.
type Operator struct {
	// Subject is the token's subject: who the operator is.
	Subject string
	// Expires is when the operator session ends: never later than its
	// token, and at most MaxSessionLifetime after it starts.
	Expires time.Time
}

// MintOperatorToken signs an operator token with the operator secret: no
// tenant, no scope, audience "baton-operator", issued now and valid for
// ttl. opts may set the issuer; the audience is always "baton-operator".
func MintOperatorToken(secret []byte, subject string, ttl time.Duration, opts ...TokenOption) (string, error) {
	if len(secret) == 0 {
		return "", fmt.Errorf("minting operator token: the operator secret is empty")
	}
	if subject == "" {
		return "", fmt.Errorf("minting operator token: the subject is required")
	}
	now := time.Now()
	claims := tokenClaims{RegisteredClaims: jwt.RegisteredClaims{
		Subject: subject, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	for _, opt := range opts {
		opt(&claims)
	}
	claims.Audience = jwt.ClaimStrings{operatorAudience}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}

// checkOperatorSecret checks Config.OperatorSecret: empty, or at least
// MinJWTSecretBytes and not the JWT secret (a tenant token's signature
// must never verify an operator token).
func checkOperatorSecret(operator, jwtSecret []byte) error {
	if len(operator) == 0 {
		return nil
	}
	if len(operator) < MinJWTSecretBytes {
		return fmt.Errorf("httpapi: the operator secret is %d bytes; it must be at least %d", len(operator), MinJWTSecretBytes)
	}
	if bytes.Equal(operator, jwtSecret) {
		return fmt.Errorf("httpapi: the operator secret must differ from the JWT secret, or any tenant token's signer could sign operator tokens")
	}
	return nil
}

// operatorSessionKey derives, from the operator secret, the key operator
// session ids are keyed with in the database (operator_session).
func operatorSessionKey(secret []byte) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("baton operator session id v2"))
	return mac.Sum(nil)
}

// ChecksOperators reports whether the server takes operator tokens: it
// checks tokens and has an operator secret.
func (s *Server) ChecksOperators() bool { return s.secret != nil && s.operatorSecret != nil }

// errNotOperator is the refusal of a credential that is not an operator's.
func errNotOperator(format string, args ...any) *apiError {
	return newAPIError(http.StatusUnauthorized, "workflow.access.unauthorized", format, args...)
}

// OperatorFromToken checks an operator token — its signature with the
// operator secret, expiry, lifetime (auth.maxTokenLifetime), the operator
// audience, the issuer when one is configured, and that it names no tenant
// and no scope — and returns the operator session it opens, ending when
// the token does or after MaxSessionLifetime.
func (s *Server) OperatorFromToken(raw string) (Operator, error) {
	if !s.ChecksOperators() {
		return Operator{}, errNotOperator("this server takes no operator tokens (BATON_OPERATOR_SECRET is not set)")
	}
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired(),
		jwt.WithAudience(operatorAudience)}
	if s.token.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(s.token.Issuer))
	}
	var claims tokenClaims
	if _, err := jwt.ParseWithClaims(strings.TrimSpace(raw), &claims, func(*jwt.Token) (any, error) { return s.operatorSecret, nil }, opts...); err != nil {
		return Operator{}, errNotOperator("not an operator token (baton token --operator mints one): %v", err)
	}
	if err := s.token.checkLifetime(&claims, time.Now()); err != nil {
		return Operator{}, err
	}
	if claims.TenantID != "" || claims.Scope != "" {
		return Operator{}, errNotOperator("not an operator token: an operator token names no tenant and no scope")
	}
	if claims.Subject == "" {
		return Operator{}, errNotOperator("not an operator token: it has no subject")
	}
	return Operator{Subject: claims.Subject, Expires: minTime(claims.ExpiresAt.Time, time.Now().Add(MaxSessionLifetime))}, nil
}

// StartOperatorSession stores an operator session and sets its cookie,
// for the paths under path (River UI's prefix, and the console's pages
// that link to it). The cookie holds 32 random bytes; the row
// (operator_session) is keyed by their HMAC under a key derived from the
// operator secret, so a tenant session's cookie names no operator row and
// an operator cookie no tenant row.
func (s *Server) StartOperatorSession(w http.ResponseWriter, r *http.Request, op Operator, path string) error {
	if !s.ChecksOperators() {
		return errNotOperator("this server takes no operator tokens (BATON_OPERATOR_SECRET is not set)")
	}
	id, err := randomToken(sessionIDBytes)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), sessionLookupTimeout)
	defer cancel()
	err = s.q.OperatorSessionInsert(ctx, s.pool, &dbsqlc.OperatorSessionInsertParams{ID: s.operatorRowID(id), Subject: op.Subject, ExpiresAt: op.Expires})
	if err != nil {
		return fmt.Errorf("storing the operator session: %w", err)
	}
	http.SetCookie(w, &http.Cookie{Name: OperatorCookie, Value: id, Path: path, Expires: op.Expires,
		HttpOnly: true, Secure: s.overTLS(r), SameSite: http.SameSiteStrictMode})
	return nil
}

// EndOperatorSession ends the request's operator session, for every
// process, and clears its cookie set for path. When the session cannot be
// revoked (the database is unavailable) it returns the error and leaves
// the cookie: the session has not ended.
func (s *Server) EndOperatorSession(w http.ResponseWriter, r *http.Request, path string) error {
	if c, err := r.Cookie(OperatorCookie); err == nil && c.Value != "" && s.ChecksOperators() {
		if id, ok := s.operatorCookieRowID(c.Value); ok {
			ctx, cancel := context.WithTimeout(r.Context(), sessionLookupTimeout)
			defer cancel()
			if _, err := s.q.OperatorSessionRevoke(ctx, s.pool, &dbsqlc.OperatorSessionRevokeParams{ID: id}); err != nil {
				return fmt.Errorf("ending the operator session: %w", err)
			}
		}
	}
	http.SetCookie(w, &http.Cookie{Name: OperatorCookie, Value: "", Path: path, MaxAge: -1,
		HttpOnly: true, Secure: s.overTLS(r), SameSite: http.SameSiteStrictMode})
	return nil
}

// ErrOperatorRefused is matched (errors.Is) by OperatorSession's error
// when the request opens no operator session: the server takes no
// operator tokens, or the request has no operator session cookie, or one
// that stands for no live operator session. Any other error of
// OperatorSession's is the database's: whether the session lives is
// unknown.
var ErrOperatorRefused = errors.New("operator session refused")

// refusedOperator is OperatorSession's 401 for a request that opens no
// operator session.
type refusedOperator struct{ *apiError }

func (e refusedOperator) Unwrap() error        { return e.apiError }
func (e refusedOperator) Is(target error) bool { return target == ErrOperatorRefused }

func operatorRefused(message string) error { return refusedOperator{errNotOperator("%s", message)} }

// OperatorSession returns the request's operator session, read from the
// database: an error that matches ErrOperatorRefused when the request
// opens none (no operator tokens on this server, no cookie, or a cookie
// that is malformed, forged, expired or ended by a sign-out), and the
// database's error when it cannot be read.
func (s *Server) OperatorSession(r *http.Request) (Operator, error) {
	if !s.ChecksOperators() {
		return Operator{}, operatorRefused("this server takes no operator tokens (BATON_OPERATOR_SECRET is not set)")
	}
	c, err := r.Cookie(OperatorCookie)
	if err != nil || c.Value == "" {
		return Operator{}, operatorRefused("no operator session: sign in with an operator token")
	}
	refused := operatorRefused("the operator session is invalid, has expired or was ended: sign in again")
	id, ok := s.operatorCookieRowID(c.Value)
	if !ok {
		return Operator{}, refused
	}
	ctx, cancel := context.WithTimeout(r.Context(), sessionLookupTimeout)
	defer cancel()
	row, err := s.q.OperatorSessionGetLive(ctx, s.pool, &dbsqlc.OperatorSessionGetLiveParams{ID: id})
	if errors.Is(err, pgx.ErrNoRows) {
		return Operator{}, refused
	}
	if err != nil {
		return Operator{}, fmt.Errorf("reading the operator session: %w", err)
	}
	return Operator{Subject: row.Subject, Expires: row.ExpiresAt}, nil
}

// operatorCookieRowID is the operator_session row id of a cookie's value:
// its HMAC-SHA256 under the operator session key; false for a value no
// session has (not 32 bytes of base64url), which needs no database read.
func (s *Server) operatorCookieRowID(cookie string) ([]byte, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(cookie)
	if err != nil || len(raw) != sessionIDBytes {
		return nil, false
	}
	return s.operatorRowID(cookie), true
}

// operatorRowID is the primary key of an operator session's row.
func (s *Server) operatorRowID(cookie string) []byte {
	mac := hmac.New(sha256.New, s.operatorSessionKey)
	mac.Write([]byte(cookie))
	return mac.Sum(nil)
}

// isOperatorAudience reports whether a token's audience names operators,
// which no tenant token may.
func isOperatorAudience(aud jwt.ClaimStrings) bool {
	return slices.Contains(aud, operatorAudience) || slices.Contains(aud, operatorSessionAudience)
}
