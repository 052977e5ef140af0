package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzEnvelope decodes arbitrary request bodies as request envelopes, each
// alone and followed by more than a mebibyte of spaces. It never panics; a
// refusal is an *apiError as documented (400 <domain>.<action>.invalid_request,
// or 413 request.body.too_large for a body over maxBodyBytes); and an
// accepted body is one JSON value of at most maxBodyBytes whose payload is
// an object and whose priority is within 0..10.
func FuzzEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"message_id":"m1","correlation_id":"c1","type":{"domain":"workflow","action":"execute"},"priority":5,` +
			`"metadata":{"timeout_ms":1000,"wait_for_completion":true},"payload":{"workflow_id":"hello","input":{"name":"Ana"}}}`,
		`{"payload":{}}`, ` {"payload" : { } } `, `{"payload":null}`, `{}`, `null`, `[]`, `""`, ``, `{"payload":[]}`,
		`{"payload":"x"}`, `{"payload":1}`, `{"payload":{"a":1}`, `{"payload":{}} {}`, `{"payload":{}}{"payload":{}}`,
		`{"priority":11,"payload":{}}`, `{"priority":-1,"payload":{}}`, `{"priority":1e2,"payload":{}}`,
		`{"priority":99999999999999999999,"payload":{}}`, `{"type":"x","payload":{}}`, `{"metadata":[],"payload":{}}`,
		`{"payload":{},"payload":null}`, `{"PAYLOAD":{}}`, "\xef\xbb\xbf{\"payload\":{}}", "{\"payload\":{\"\xff\":1}}",
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001), `{"payload":` + strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5001),
	} {
		f.Add([]byte(s), false)
	}
	f.Add([]byte(`{"payload":{}}`), true)
	f.Add([]byte(`{"payload":{}`), true)
	f.Fuzz(func(t *testing.T, body []byte, pad bool) {
		checkEnvelope(t, body, pad)
	})
}

// spaces is a reader of n spaces.
type spaces struct{ n int }

func (s *spaces) Read(p []byte) (int, error) {
	if s.n == 0 {
		return 0, io.EOF
	}
	n := min(len(p), s.n)
	for i := range n {
		p[i] = ' '
	}
	s.n -= n
	return n, nil
}

func checkEnvelope(t *testing.T, body []byte, pad bool) {
	t.Helper()
	var r io.Reader = bytes.NewReader(body)
	size := len(body)
	if pad {
		r = io.MultiReader(r, &spaces{n: maxBodyBytes + 1})
		size += maxBodyBytes + 1
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/workflows/execute", r)
	env, err := decodeEnvelope(httptest.NewRecorder(), req, "workflow", "execute")
	if err != nil {
		if env != nil {
			t.Fatalf("decodeEnvelope returned an envelope and an error")
		}
		var ae *apiError
		if !errors.As(err, &ae) || ae != err {
			t.Fatalf("refused with %T (%v), not an *apiError", err, err)
		}
		switch {
		case ae.status == http.StatusBadRequest && ae.code == "workflow.execute.invalid_request":
		case ae.status == http.StatusRequestEntityTooLarge && ae.code == "request.body.too_large":
			if size <= maxBodyBytes {
				t.Fatalf("a body of %d bytes was refused as too large", size)
			}
		default:
			t.Fatalf("refused with %d %s: %s", ae.status, ae.code, ae.message)
		}
		return
	}
	if size > maxBodyBytes {
		t.Fatalf("a body of %d bytes, over the limit of %d, was accepted", size, maxBodyBytes)
	}
	if !json.Valid(body) {
		t.Fatalf("a body that is not one JSON value was accepted: %q", body)
	}
	if len(env.Payload) == 0 || env.Payload[0] != '{' || !json.Valid(env.Payload) {
		t.Fatalf("accepted payload %q is not a JSON object", env.Payload)
	}
	var payload map[string]any
	if err := json.Unmarshal(env.Payload, &payload); err != nil || payload == nil {
		t.Fatalf("accepted payload %q does not decode as an object: %v", env.Payload, err)
	}
	if env.Priority != nil && (*env.Priority < 0 || *env.Priority > 10) {
		t.Fatalf("accepted priority %d", *env.Priority)
	}
}

// TestEnvelopeTrailingData is what FuzzEnvelope found on its padded seed:
// decodeEnvelope asked json.Decoder.More whether data followed the
// envelope, which reports none before a stray ] or } and none when reading
// more fails, so "{…}]" was accepted, and so was an envelope followed by
// white space past the 1 MiB limit.
func TestEnvelopeTrailingData(t *testing.T) {
	t.Parallel()
	decode := func(r io.Reader) error {
		_, err := decodeEnvelope(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", r), "workflow", "execute")
		return err
	}
	if err := decode(strings.NewReader(`{"payload":{}}` + " \n\t")); err != nil {
		t.Fatalf("white space after the envelope: %v", err)
	}
	for _, tail := range []string{"]", "}", " ]", "{}", "1", "x"} {
		err := decode(strings.NewReader(`{"payload":{}}` + tail))
		var ae *apiError
		if !errors.As(err, &ae) || ae.status != http.StatusBadRequest || ae.code != "workflow.execute.invalid_request" {
			t.Fatalf("%q after the envelope: %v", tail, err)
		}
	}
	err := decode(io.MultiReader(strings.NewReader(`{"payload":{}}`), &spaces{n: maxBodyBytes}))
	var ae *apiError
	if !errors.As(err, &ae) || ae.status != http.StatusRequestEntityTooLarge || ae.code != "request.body.too_large" {
		t.Fatalf("an envelope and a mebibyte of spaces: %v", err)
	}
}
