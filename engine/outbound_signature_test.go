package engine_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

// readmeVerify is the receiver's procedure as README.md shows it, written
// without the engine: a test that the documented steps accept what Baton
// signs and refuse the rest.
func readmeVerify(secret []byte, header string, body []byte, now time.Time) bool {
	var t, v1 string
	for _, kv := range strings.Split(header, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == "t" {
			t = v
		} else if ok && k == "v1" {
			v1 = v
		}
	}
	ts, err := strconv.ParseInt(t, 10, 64)
	if err != nil || math.Abs(float64(now.Unix()-ts)) > 300 {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(t + "." + string(body)))
	return hmac.Equal([]byte(hex.EncodeToString(mac.Sum(nil))), []byte(v1))
}

// A genuine signature verifies; a forged one (another key, or the old
// unsigned-timestamp scheme), a modified body, a moved timestamp and a
// replay outside the tolerance do not — by VerifySignature and by the
// README's procedure alike.
func TestSignatureVerification(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef0123456789abcdef")
	body := []byte(`{"message_id":"m-1","status":"completed"}`)
	now := time.Now()
	signed := engine.Sign(secret, now, body)
	require.Regexp(t, `^t=\d+,v1=[0-9a-f]{64}$`, signed)

	require.NoError(t, engine.VerifySignature(secret, signed, body, 0, now))
	require.NoError(t, engine.VerifySignature(secret, signed, body, 0, now.Add(4*time.Minute)))
	require.True(t, readmeVerify(secret, signed, body, now))

	oldScheme := func() string {
		m := hmac.New(sha256.New, secret)
		m.Write(body)
		return "sha256=" + hex.EncodeToString(m.Sum(nil))
	}()
	ts := strconv.FormatInt(now.Unix(), 10)
	for name, tc := range map[string]struct {
		header string
		body   []byte
		now    time.Time
		want   error
	}{
		"another key":         {engine.Sign([]byte("an attacker's guess at the secret"), now, body), body, now, engine.ErrSignatureInvalid},
		"empty key":           {engine.Sign(nil, now, body), body, now, engine.ErrSignatureInvalid},
		"modified body":       {signed, []byte(`{"message_id":"m-1","status":"failed"}`), now, engine.ErrSignatureInvalid},
		"moved timestamp":     {"t=" + strconv.FormatInt(now.Unix()+1, 10) + "," + strings.Split(signed, ",")[1], body, now, engine.ErrSignatureInvalid},
		"old scheme":          {oldScheme, body, now, engine.ErrSignatureInvalid},
		"no header":           {"", body, now, engine.ErrSignatureInvalid},
		"no v1":               {"t=" + ts, body, now, engine.ErrSignatureInvalid},
		"replayed later":      {signed, body, now.Add(6 * time.Minute), engine.ErrSignatureExpired},
		"replayed much later": {signed, body, now.Add(30 * 24 * time.Hour), engine.ErrSignatureExpired},
		"from the future":     {signed, body, now.Add(-6 * time.Minute), engine.ErrSignatureExpired},
	} {
		err := engine.VerifySignature(secret, tc.header, tc.body, 0, tc.now)
		require.ErrorIs(t, err, tc.want, name)
		require.False(t, readmeVerify(secret, tc.header, tc.body, tc.now), name)
	}

	// A narrower tolerance is the receiver's choice.
	require.ErrorIs(t, engine.VerifySignature(secret, signed, body, time.Minute, now.Add(2*time.Minute)), engine.ErrSignatureExpired)
	// A header with several v1 values (Stripe's form) verifies when one
	// matches.
	rotated := signed + ",v1=" + strings.Repeat("0", 64)
	require.NoError(t, engine.VerifySignature(secret, rotated, body, 0, now))
}
