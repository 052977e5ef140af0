package engine

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader carries the signature of a callback or webhook POST:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">" (the scheme
// Stripe and Slack use). The timestamp is the moment of that attempt, so
// a receiver can refuse a replayed request (VerifySignature).
const SignatureHeader = "X-Baton-Signature"

// MinSecretBytes is the shortest secret `baton serve` accepts for
// callbacks (BATON_CALLBACK_SECRET) and webhook channels
// (BATON_WEBHOOK_SECRET).
const MinSecretBytes = 32

// DefaultSignatureTolerance is how far a signature's timestamp may be from
// the receiver's clock, either way, before VerifySignature refuses it.
const DefaultSignatureTolerance = 5 * time.Minute

// Signature errors: VerifySignature's errors wrap one of them.
var (
	// ErrSignatureInvalid: the header is missing or malformed, or no v1
	// value is the HMAC of its timestamp and the body under the secret.
	ErrSignatureInvalid = errors.New("signature does not match")
	// ErrSignatureExpired: the signature matches, but its timestamp is
	// further from now than the tolerance (a replay, or a clock far off).
	ErrSignatureExpired = errors.New("signature timestamp outside the tolerance")
)

// Sign returns the X-Baton-Signature value of body sent at t under secret.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(signatureMAC(secret, ts, body))
}

// signatureMAC is HMAC-SHA256("<ts>.<body>") under secret.
func signatureMAC(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// VerifySignature checks an X-Baton-Signature header the way a receiver
// should: the header names a timestamp t and one or more v1 values; one v1
// must equal the HMAC-SHA256 of "<t>.<body>" under secret (compared in
// constant time), and |now - t| must be at most tolerance (0 means
// DefaultSignatureTolerance). body is the request body exactly as
// received. The error wraps ErrSignatureInvalid or ErrSignatureExpired.
func VerifySignature(secret []byte, header string, body []byte, tolerance time.Duration, now time.Time) error {
	if tolerance <= 0 {
		tolerance = DefaultSignatureTolerance
	}
	var (
		ts     string
		hashes [][]byte
	)
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if h, err := hex.DecodeString(v); err == nil {
				hashes = append(hashes, h)
			}
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(hashes) == 0 {
		return fmt.Errorf("%s is not \"t=<unix>,v1=<hex>\": %w", SignatureHeader, ErrSignatureInvalid)
	}
	want := signatureMAC(secret, ts, body)
	matched := false
	for _, h := range hashes {
		if hmac.Equal(h, want) {
			matched = true
		}
	}
	if !matched {
		return ErrSignatureInvalid
	}
	if age := now.Sub(time.Unix(unix, 0)); age > tolerance || age < -tolerance {
		return fmt.Errorf("signed %s from now: %w", age.Round(time.Second), ErrSignatureExpired)
	}
	return nil
}
