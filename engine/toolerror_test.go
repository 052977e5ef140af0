package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A tool error reaches the tenant without the addresses of what the tool
// connected to; Error() (the server log) keeps them.
func TestToolErrorTenantMessageHasNoAddresses(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String() + "/internal/process"
	require.NoError(t, ln.Close())
	client := &http.Client{Timeout: 5 * time.Second}

	_, refused := postJSON(context.Background(), client, closed, map[string]any{}, nil)
	_, unknown := postJSON(context.Background(), client, "http://baton-tool.invalid:9000/x", map[string]any{}, nil)
	for name, tc := range map[string]struct {
		err       error
		secret    []string
		tenantHas string
	}{
		"connection refused": {refused, []string{closed, ln.Addr().String(), "127.0.0.1"}, "connection refused"},
		"unknown host":       {unknown, []string{"baton-tool.invalid", "http://"}, "lookup <address>"},
		"a Go tool's text": {errors.New(`fetching https://10.1.2.3:8443/v1/secret?key=1 via 10.1.2.3:8443 and [fd00::1]:53: lookup vault.internal: no such host`),
			[]string{"10.1.2.3", "https://", "fd00::1", "vault.internal"}, "no such host"},
		"flattened with %v": {fmt.Errorf("%w: %v", errToolTimeout, &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 9000}, Err: errors.New("i/o timeout")}),
			[]string{"10.0.0.5"}, "dial tcp <address>: i/o timeout"},
	} {
		var te *ToolError
		if !errors.As(tc.err, &te) {
			te = &ToolError{Class: ClassStep, Err: tc.err}
		}
		tenant := te.tenantMessage()
		for _, s := range tc.secret {
			require.NotContains(t, tenant, s, name)
		}
		require.Contains(t, tenant, tc.tenantHas, name)
		require.Contains(t, te.Error(), tc.secret[0], "%s: the server log keeps it", name)
		t.Logf("%s: %s", name, tenant)
	}
}
