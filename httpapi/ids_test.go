package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/httpapi"
	"github.com/batonrun/baton/internal/openapitest"
	"github.com/batonrun/baton/internal/pgtest"
)

// TestIDsEchoedOutsideTheEnvelope: the document, probes and metrics echo
// X-Request-ID and X-Correlation-ID, or generate them, as the API does.
func TestIDsEchoedOutsideTheEnvelope(t *testing.T) {
	t.Parallel()
	p := newProcess(t, pgtest.NewDatabase(t), processOpts{})
	v := openapitest.New(t, httpapi.OpenAPIDocument)
	for _, path := range []string{"/healthz", "/readyz", "/api/v1/openapi.yaml", "/metrics"} {
		req, err := http.NewRequest(http.MethodGet, p.server.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("X-Request-ID", "req"+path)
		req.Header.Set("X-Correlation-ID", "corr"+path)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		v.CheckResponse(t, resp)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Equal(t, "req"+path, resp.Header.Get("X-Request-ID"), path)
		require.Equal(t, "corr"+path, resp.Header.Get("X-Correlation-ID"), path)

		resp, err = http.Get(p.server.URL + path)
		require.NoError(t, err)
		v.CheckResponse(t, resp)
		require.NoError(t, resp.Body.Close())
		require.NotEmpty(t, resp.Header.Get("X-Request-ID"), path)
		require.NotEmpty(t, resp.Header.Get("X-Correlation-ID"), path)
	}
}
