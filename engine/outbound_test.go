package engine_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

// countingServer is a local server that counts the requests it gets.
type countingServer struct {
	*httptest.Server
	requests atomic.Int32
}

func newCountingServer(t *testing.T, h http.HandlerFunc) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// port is the server's port.
func (s *countingServer) port() string {
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	return p
}

// A host alone allows 80 and 443 whatever the scheme; host:port that port
// only; wildcards match subdomains; malformed entries are refused by name.
func TestAllowList(t *testing.T) {
	t.Parallel()
	l, err := engine.ParseAllowList([]string{"Hooks.Example.com", "api.example.com:8443", "*.trusted.test", "*.nine.test:9000", "127.0.0.1:6000", "[::1]:7000", "fe80::1"})
	require.NoError(t, err)
	for _, tc := range []struct {
		host string
		port int
		ok   bool
	}{
		{"hooks.example.com", 80, true},
		{"HOOKS.example.com", 443, true},
		{"hooks.example.com", 8080, false},
		{"hooks.example.com", 5432, false},
		{"api.example.com", 8443, true},
		{"api.example.com", 443, false},
		{"a.trusted.test", 443, true},
		{"a.b.trusted.test", 80, true},
		{"trusted.test", 443, false},
		{"eviltrusted.test", 443, false},
		{"a.trusted.test", 9000, false},
		{"x.nine.test", 9000, true},
		{"x.nine.test", 443, false},
		{"127.0.0.1", 6000, true},
		{"127.0.0.1", 6379, false},
		{"127.0.0.1", 80, false},
		{"::1", 7000, true},
		{"::1", 80, false},
		{"fe80::1", 443, true},
		{"evil.example.com", 443, false},
	} {
		require.Equal(t, tc.ok, l.Allows(tc.host, tc.port), "%s:%d", tc.host, tc.port)
	}

	wild, err := engine.ParseAllowList([]string{"*", "*:8080"})
	require.NoError(t, err)
	require.True(t, wild.Allows("anything.test", 443))
	require.True(t, wild.Allows("10.0.0.1", 8080))
	require.False(t, wild.Allows("anything.test", 6379))

	require.True(t, (engine.AllowList{}).Empty())
	require.False(t, (engine.AllowList{}).Allows("127.0.0.1", 80))

	for _, bad := range []string{"", "http://x", "x/path", "x:0", "x:65536", "x:http", "a.*.test", "*x.test", "*.", "user@x", ":80"} {
		_, err := engine.ParseAllowList([]string{bad})
		require.Error(t, err, "%q", bad)
		require.Contains(t, err.Error(), fmt.Sprintf("%q", bad))
	}
}

// The outbound client dials only allowed hosts and ports: a disallowed port
// (or a host outside the list, though it resolves to the allowed address)
// is refused at the dial, before anything is sent, even when the URL was
// never checked; the transport alone refuses it too.
func TestOutboundClientRefusesDisallowedDial(t *testing.T) {
	t.Parallel()
	allowed := newCountingServer(t, nil)
	other := newCountingServer(t, nil)
	list, err := engine.ParseAllowList([]string{"127.0.0.1:" + allowed.port()})
	require.NoError(t, err)
	client := engine.NewOutboundClient(list, 5*time.Second)

	resp, err := client.Post(allowed.URL+"/ok", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, int32(1), allowed.requests.Load())

	for _, target := range []string{
		other.URL + "/x", // allowed host, another port
		"http://localhost:" + allowed.port() + "/x", // allowed port, a host outside the list
		"http://127.0.0.1/x",                        // port 80, not listed for 127.0.0.1
	} {
		_, err := client.Post(target, "application/json", strings.NewReader("{}"))
		require.ErrorIs(t, err, engine.ErrOutboundRefused, target)

		// The transport on its own, as a retry or a redirect would use it.
		req, err := http.NewRequest(http.MethodPost, target, strings.NewReader("{}"))
		require.NoError(t, err)
		_, err = client.Transport.RoundTrip(req)
		require.ErrorIs(t, err, engine.ErrOutboundRefused, target)
	}
	require.Zero(t, other.requests.Load())
	require.Equal(t, int32(1), allowed.requests.Load())
}

// The outbound client follows no redirect, whatever its code and wherever
// it points: the 3xx is the answer and its Location gets nothing.
func TestOutboundClientFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	target := newCountingServer(t, nil)
	var elsewhere atomic.Int32
	redirector := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			elsewhere.Add(1)
			return
		}
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		http.Redirect(w, r, r.URL.Query().Get("to"), code)
	})
	list, err := engine.ParseAllowList([]string{"127.0.0.1:" + redirector.port(), "127.0.0.1:" + target.port()})
	require.NoError(t, err)
	client := engine.NewOutboundClient(list, 5*time.Second)
	for _, code := range []int{301, 302, 303, 307, 308} {
		// Even an allowed Location is not followed.
		for _, to := range []string{target.URL + "/stolen", redirector.URL + "/elsewhere"} {
			resp, err := client.Post(redirector.URL+"/cb?code="+strconv.Itoa(code)+"&to="+to, "application/json", strings.NewReader("{}"))
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, code, resp.StatusCode)
		}
	}
	require.Zero(t, target.requests.Load())
	require.Zero(t, elsewhere.Load())
}
