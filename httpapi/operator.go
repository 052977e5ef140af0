package httpapi

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
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
// A browser signs in to River UI with an operator token once; Baton
// answers with an operator session cookie, signed with a key derived from
// the operator secret, apart from the tenant session cookie and never a
// valid one.
const (
	// OperatorCookie is the name of the operator session cookie.
	OperatorCookie = "baton_operator"
	// operatorAudience is the aud every operator token carries.
	operatorAudience = "baton-operator"
	// operatorSessionAudience marks an operator session cookie's claims.
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

// operatorSessionKey derives the key operator session cookies are signed
// with from the operator secret.
func operatorSessionKey(secret []byte) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("baton operator session v1"))
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

// operatorSessionClaims are an operator session cookie's claims.
type operatorSessionClaims struct {
	jwt.RegisteredClaims
}

// StartOperatorSession sets the operator session cookie, for the paths
// under path (River UI's prefix, and the console's pages that link to it).
func (s *Server) StartOperatorSession(w http.ResponseWriter, r *http.Request, op Operator, path string) error {
	if !s.ChecksOperators() {
		return errNotOperator("this server takes no operator tokens (BATON_OPERATOR_SECRET is not set)")
	}
	claims := operatorSessionClaims{jwt.RegisteredClaims{Subject: op.Subject, Audience: jwt.ClaimStrings{operatorSessionAudience},
		IssuedAt: jwt.NewNumericDate(time.Now()), ExpiresAt: jwt.NewNumericDate(op.Expires)}}
	value, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.operatorSessionKey)
	if err != nil {
		return fmt.Errorf("signing the operator session: %w", err)
	}
	http.SetCookie(w, &http.Cookie{Name: OperatorCookie, Value: value, Path: path, Expires: op.Expires,
		HttpOnly: true, Secure: s.overTLS(r), SameSite: http.SameSiteStrictMode})
	return nil
}

// EndOperatorSession clears the operator session cookie set for path.
func (s *Server) EndOperatorSession(w http.ResponseWriter, r *http.Request, path string) {
	http.SetCookie(w, &http.Cookie{Name: OperatorCookie, Value: "", Path: path, MaxAge: -1,
		HttpOnly: true, Secure: s.overTLS(r), SameSite: http.SameSiteStrictMode})
}

// OperatorSession returns the request's operator session: an error when
// it has no operator session cookie, or one that is forged, expired or
// malformed, or when the server takes no operator tokens.
func (s *Server) OperatorSession(r *http.Request) (Operator, error) {
	if !s.ChecksOperators() {
		return Operator{}, errNotOperator("this server takes no operator tokens (BATON_OPERATOR_SECRET is not set)")
	}
	c, err := r.Cookie(OperatorCookie)
	if err != nil || c.Value == "" {
		return Operator{}, errNotOperator("no operator session: sign in with an operator token")
	}
	var claims operatorSessionClaims
	_, err = jwt.ParseWithClaims(c.Value, &claims, func(*jwt.Token) (any, error) { return s.operatorSessionKey, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired(), jwt.WithAudience(operatorSessionAudience))
	if err != nil || claims.Subject == "" {
		return Operator{}, errNotOperator("the operator session is invalid or has expired: sign in again")
	}
	return Operator{Subject: claims.Subject, Expires: claims.ExpiresAt.Time}, nil
}

// isOperatorAudience reports whether a token's audience names operators,
// which no tenant token may.
func isOperatorAudience(aud jwt.ClaimStrings) bool {
	return slices.Contains(aud, operatorAudience) || slices.Contains(aud, operatorSessionAudience)
}
