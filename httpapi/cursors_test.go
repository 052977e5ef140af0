package httpapi_test

import (
	"encoding/base64"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// The monitoring lists' cursors are offsets. One no page can start at —
// past the largest offset, negative, zero, not a number — is a 400 naming
// the cursor, never a 500 and never cut down to another page: 4294967296
// truncated to 32 bits would be offset 0, the first page again. The
// largest offset is an empty last page.
func TestMonitorCursorsOutOfRange(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, waitFlow("offsets", `{"id": "w", "type": "action", "actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "end"}`))
	b.startWaiting(t, "offsets", "x-offsets-1")
	_, err := b.pool.Exec(t.Context(), `UPDATE agent_execution SET waiting_until = now() - interval '3 hours', updated_at = now() - interval '2 hours' WHERE execution_id = 'x-offsets-1'`)
	require.NoError(t, err)
	monitor := mint(t, b.tenant, "monitor:read")
	cursor := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

	for _, list := range []string{"waiting", "stuck"} {
		path := "/api/v1/monitor/executions/" + list
		r := b.do(t, call{method: http.MethodGet, path: path, token: &monitor})
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		require.Len(t, r.data()["items"], 1, "%s", r.raw)

		for _, bad := range []string{"2147483648", "4294967296", "4294967297", "9223372036854775807", "9223372036854775808", "-1", "0", "1.5", "x"} {
			r := b.do(t, call{method: http.MethodGet, path: path + "?cursor=" + cursor(bad), token: &monitor})
			require.Equal(t, http.StatusBadRequest, r.status, "%s cursor %s: %s", list, bad, r.raw)
			require.Equal(t, "monitor."+list+".invalid_request", r.errorCode(), "%s cursor %s", list, bad)
			require.Equal(t, "cursor", r.body["error"].(map[string]any)["details"].(map[string]any)["field"])
		}

		r = b.do(t, call{method: http.MethodGet, path: path + "?cursor=" + cursor("2147483647"), token: &monitor})
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		require.Empty(t, r.data()["items"])
		require.Nil(t, r.data()["next_cursor"])
	}
}
