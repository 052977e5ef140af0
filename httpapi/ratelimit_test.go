package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
	"github.com/batonrun/baton/internal/openapitest"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/jobs"
	"github.com/batonrun/baton/live"
)

// rateLimitedBundle is a server with the given rate limits and an event
// hub, whose jobs are inserted and never worked.
func rateLimitedBundle(t *testing.T, limits httpapi.RateLimits) *testBundle {
	t.Helper()
	pool := pgtest.NewPool(t)
	eng, err := engine.New(engine.Config{Pool: pool, Channel: &engine.MemoryChannel{}})
	require.NoError(t, err)
	_, err = jobs.NewClient(pool, jobs.Config{Engine: eng, InsertOnly: true})
	require.NoError(t, err)
	hub, err := live.NewHub(live.Config{Pool: pool})
	require.NoError(t, err)
	hub.Start()
	t.Cleanup(hub.Stop)
	api, err := httpapi.New(httpapi.Config{Engine: eng, Pool: pool, JWTSecret: secret, Hub: hub, RateLimits: limits})
	require.NoError(t, err)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	tenant := fmt.Sprintf("tenant-%d", tenantSeq.Add(1))
	return &testBundle{pool: pool, engine: eng, server: srv, validator: openapitest.New(t, httpapi.OpenAPIDocument),
		tenant: tenant, token: mint(t, tenant)}
}

// answer is one response, kept for checks on the test's goroutine.
type answer struct {
	req    *http.Request
	status int
	header http.Header
	raw    []byte
	err    error
}

// send is do for many goroutines at once: it fails nothing itself.
func (b *testBundle) send(tenant, method, path string, body any) answer {
	var reader io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		reader = strings.NewReader(string(raw))
	}
	req, err := http.NewRequest(method, b.server.URL+path, reader)
	if err != nil {
		return answer{err: err}
	}
	tok, err := httpapi.MintToken(secret, tenant, "test", nil, time.Hour)
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("X-Tenant-ID", tenant)
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	vreq, _ := http.NewRequest(method, b.server.URL+path, nil)
	vreq.Header = req.Header.Clone()
	return answer{req: vreq, status: resp.StatusCode, header: resp.Header, raw: raw, err: err}
}

// burst sends n requests from 8 goroutines at once.
func (b *testBundle) burst(tenant, method, path string, body any, n int) []answer {
	out := make([]answer, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				out[i] = b.send(tenant, method, path, body)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// requireRateLimited checks a 429: the error envelope with
// workflow.service.rate_limited, retryable, retry_after_ms, the class, and
// a Retry-After header of whole seconds, at least 1, covering
// retry_after_ms.
func requireRateLimited(t *testing.T, a answer, class string) {
	t.Helper()
	require.Equal(t, http.StatusTooManyRequests, a.status, "%s", a.raw)
	var body struct {
		Type  struct{ Domain, Action string }
		Error struct {
			Code         string         `json:"code"`
			HTTPStatus   int            `json:"http_status"`
			Retryable    bool           `json:"retryable"`
			RetryAfterMS int64          `json:"retry_after_ms"`
			Details      map[string]any `json:"details"`
		}
	}
	require.NoError(t, json.Unmarshal(a.raw, &body), "%s", a.raw)
	require.Equal(t, "workflow.service.rate_limited", body.Error.Code)
	require.Equal(t, http.StatusTooManyRequests, body.Error.HTTPStatus)
	require.True(t, body.Error.Retryable)
	require.Positive(t, body.Error.RetryAfterMS)
	require.Equal(t, class, body.Error.Details["class"])
	require.Equal(t, "error", body.Type.Action)
	secs, err := strconv.Atoi(a.header.Get("Retry-After"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, secs, 1)
	require.GreaterOrEqual(t, int64(secs)*1000, body.Error.RetryAfterMS)
}

// TestRateLimitPerTenant: a tenant that sends far more
// than its budget gets 429 envelopes for what is over it, while another
// tenant sending at the same moment is answered as if alone; classes are
// counted apart (the noisy tenant's writes do not spend its reads).
func TestRateLimitPerTenant(t *testing.T) {
	t.Parallel()
	const burst = 10
	b := rateLimitedBundle(t, httpapi.RateLimits{
		Write:  httpapi.RateLimit{Rate: 0.01, Burst: burst},
		Read:   httpapi.RateLimit{Rate: 0.01, Burst: burst},
		Stream: httpapi.RateLimit{Rate: 0.1, Burst: 1},
	})
	noisy, quiet := b.tenant, fmt.Sprintf("tenant-%d", tenantSeq.Add(1))
	validate := envelope(map[string]any{"workflow_id": "rl", "version": "1", "nodes": []any{
		map[string]any{"id": "start", "type": "start", "next": "end"}, map[string]any{"id": "end", "type": "end"}}})

	var noisyWrites, noisyReads, quietWrites, quietReads []answer
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { noisyWrites = b.burst(noisy, http.MethodPost, "/api/v1/workflow/validate", validate, 60) })
	wg.Go(func() { noisyReads = b.burst(noisy, http.MethodGet, "/api/v1/workflow/definitions", nil, 60) })
	wg.Go(func() { quietWrites = b.burst(quiet, http.MethodPost, "/api/v1/workflow/validate", validate, burst-1) })
	wg.Go(func() { quietReads = b.burst(quiet, http.MethodGet, "/api/v1/workflow/definitions", nil, burst-1) })
	wg.Wait()
	elapsed := time.Since(start)

	for _, a := range append(quietWrites, quietReads...) {
		require.NoError(t, a.err)
		require.Equal(t, http.StatusOK, a.status, "the quiet tenant is unaffected: %s", a.raw)
	}
	// The bucket refills at 1 every 100 s while the burst runs.
	allowed := burst + int(elapsed.Seconds()/100) + 1
	for class, answers := range map[string][]answer{httpapi.RateClassWrite: noisyWrites, httpapi.RateClassRead: noisyReads} {
		ok, limited := 0, 0
		for _, a := range answers {
			require.NoError(t, a.err)
			b.validator.Check(t, a.req, a.status, a.header, a.raw)
			switch a.status {
			case http.StatusOK:
				ok++
			default:
				requireRateLimited(t, a, class)
				limited++
			}
		}
		require.GreaterOrEqual(t, ok, burst, "%s: a full bucket's worth gets through", class)
		require.LessOrEqual(t, ok, allowed, "%s: no more than the bucket holds", class)
		require.Equal(t, len(answers), ok+limited)
	}

	// After the burst the noisy tenant is still over, the quiet one, with a
	// token left, still is not.
	requireRateLimited(t, b.send(noisy, http.MethodGet, "/api/v1/workflow/definitions", nil), httpapi.RateClassRead)
	require.Equal(t, http.StatusOK, b.send(quiet, http.MethodGet, "/api/v1/workflow/definitions", nil).status)

	// Streams: one open per 10 s per tenant; the second is refused before
	// the upgrade, and the other tenant opens its own.
	dial := func(tenant string) (*websocket.Conn, *http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		u := "ws" + strings.TrimPrefix(b.server.URL, "http") + "/api/v1/ws?access_token=" + mint(t, tenant)
		return websocket.Dial(ctx, u, nil)
	}
	conn, _, err := dial(noisy)
	require.NoError(t, err)
	defer conn.CloseNow()
	_, resp, err := dial(noisy)
	require.Error(t, err)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	raw, _ := io.ReadAll(resp.Body)
	requireRateLimited(t, answer{status: resp.StatusCode, header: resp.Header, raw: raw}, httpapi.RateClassStream)
	other, _, err := dial(quiet)
	require.NoError(t, err)
	defer other.CloseNow()
}

// TestRateLimitBadTokensSpendNothing: requests that do not authenticate
// are not counted, so nobody can spend another tenant's budget by naming
// it.
func TestRateLimitBadTokensSpendNothing(t *testing.T) {
	t.Parallel()
	b := rateLimitedBundle(t, httpapi.RateLimits{Read: httpapi.RateLimit{Rate: 0.01, Burst: 2}})
	bad := "not-a-token"
	for range 5 {
		r := b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/definitions", token: &bad})
		require.Equal(t, http.StatusUnauthorized, r.status)
	}
	for range 2 {
		require.Equal(t, http.StatusOK, b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/definitions"}).status)
	}
	require.Equal(t, http.StatusTooManyRequests, b.do(t, call{method: http.MethodGet, path: "/api/v1/workflow/definitions"}).status)
}
