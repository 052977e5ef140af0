package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

// outboundSecret32 is a secret of engine.MinSecretBytes.
const outboundSecret32 = "0123456789abcdef0123456789abcdef"

// writeConfig writes a config file and returns its path.
func writeConfig(t *testing.T, config string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "baton.json5")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
	return path
}

// serve refuses to start when callbacks or a webhook channel are enabled
// without a secret of at least 32 bytes, and says which and why, before it
// connects to the database (the URL here leads nowhere).
func TestServeRefusesWeakOutboundSecrets(t *testing.T) {
	t.Parallel()
	callbacks := writeConfig(t, `{callbacks: {allowHosts: ["hooks.example.com"]}}`)
	webhook := writeConfig(t, `{channels: {default: {type: "webhook", url: "https://chat.example/outbound"}}}`)
	for name, tc := range map[string]struct {
		config, callbackSecret, webhookSecret, want string
	}{
		"callbacks, no secret":    {callbacks, "", outboundSecret32, "BATON_CALLBACK_SECRET is not set, but callbacks.allowHosts enables callbacks"},
		"callbacks, short secret": {callbacks, outboundSecret32[:31], "", "BATON_CALLBACK_SECRET is 31 bytes, but callbacks.allowHosts enables callbacks"},
		"webhook, no secret":      {webhook, outboundSecret32, "", "BATON_WEBHOOK_SECRET is not set, but channels.default is a webhook"},
		"webhook, short secret":   {webhook, "", "hook-secret", "BATON_WEBHOOK_SECRET is 11 bytes, but channels.default is a webhook"},
	} {
		out, err := command(t, []string{"DATABASE_URL=postgres://127.0.0.1:1/nowhere", "BATON_CONFIG=" + tc.config,
			"BATON_CALLBACK_SECRET=" + tc.callbackSecret, "BATON_WEBHOOK_SECRET=" + tc.webhookSecret},
			"serve", "--insecure-no-auth").CombinedOutput()
		require.Error(t, err, name)
		require.Contains(t, string(out), tc.want, name)
		require.Contains(t, string(out), "at least 32 bytes", name)
	}
}

// baton dev keeps working with callbacks enabled and no secret: it warns
// and serves.
func TestDevWarnsOfWeakOutboundSecrets(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `{callbacks: {allowHosts: ["127.0.0.1:9"]}}`)
	cmd := command(t, []string{"DATABASE_URL=" + emptyDatabase(t), "BATON_CONFIG=" + cfg, "BATON_CALLBACK_SECRET="},
		"dev", "--addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
	})
	var warned atomic.Bool
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "BATON_CALLBACK_SECRET is not set") {
				warned.Store(true)
			}
		}
	}()
	serving := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Baton dev is serving") {
				close(serving)
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case <-serving:
	case <-time.After(60 * time.Second):
		t.Fatal("baton dev did not serve within 60s")
	}
	require.Eventually(t, warned.Load, 5*time.Second, 20*time.Millisecond)
}

// Against a real `baton serve`, with callbacks.allowHosts naming one local
// host and port: a callback_url on another port, or on another host name
// for the same address, is refused at execute time with the 400 envelope;
// an allowed one is called back with a signature that verifies; and a
// redirect from the allowed host to a port outside the list is not
// followed.
func TestServeCallbackHostsAndPorts(t *testing.T) {
	t.Parallel()
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("the redirect target got a request")
	}))
	t.Cleanup(target.Close)
	var (
		mu        sync.Mutex
		verified  []string // callback paths whose signature verified
		forged    int
		redirects int
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if err := engine.VerifySignature([]byte(outboundSecret32), r.Header.Get(engine.SignatureHeader), body, 0, time.Now()); err != nil {
			forged++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		verified = append(verified, r.URL.Path)
		if r.URL.Path == "/redirect" {
			redirects++
			http.Redirect(w, r, target.URL+"/stolen", http.StatusTemporaryRedirect)
		}
	}))
	t.Cleanup(recv.Close)
	_, recvPort, err := net.SplitHostPort(recv.Listener.Addr().String())
	require.NoError(t, err)
	_, targetPort, err := net.SplitHostPort(target.Listener.Addr().String())
	require.NoError(t, err)

	env, _, count := serveDatabase(t, fmt.Sprintf(`{callbacks: {allowHosts: ["127.0.0.1:%s"]}}`, recvPort))
	s := startServer(t, append(env, "BATON_CALLBACK_SECRET="+outboundSecret32))
	s.define(t, `{"workflow_id": "quick", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "end"},
	  {"id": "end", "type": "end", "result": {"summary": "ok"}}]}`)
	execute := func(callbackURL string) answer {
		a, err := s.send(t.Context(), "crash", "/api/v1/workflow/execute", map[string]any{"payload": map[string]any{
			"workflow_id": "quick", "execution_options": map[string]any{"callback_url": callbackURL},
		}})
		require.NoError(t, err)
		return a
	}

	for _, refused := range []string{
		"http://127.0.0.1:" + targetPort + "/cb", // the allowed host, another port
		"http://localhost:" + recvPort + "/cb",   // the allowed port, another host name
		"http://127.0.0.1:5432/",
		"http://127.0.0.1/cb", // a host alone is not allowed port 80 by "127.0.0.1:port"
	} {
		a := execute(refused)
		require.Equal(t, http.StatusBadRequest, a.status, "%s: %s", refused, a.body)
		var envelope struct {
			Error struct {
				Code    string         `json:"code"`
				Message string         `json:"message"`
				Details map[string]any `json:"details"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(a.body, &envelope), "%s", a.body)
		require.Equal(t, "workflow.execute.invalid_request", envelope.Error.Code)
		require.Equal(t, "payload.execution_options.callback_url", envelope.Error.Details["field"])
		require.Contains(t, envelope.Error.Message, "is not in callbacks.allowHosts")
	}
	require.Zero(t, count(`SELECT count(*) FROM agent_execution`))

	for _, path := range []string{"/cb", "/redirect"} {
		a := execute(recv.URL + path)
		require.Less(t, a.status, 300, "%s: %s", path, a.body)
	}
	// Both callbacks ended: one delivered, one refused for its redirect.
	require.Eventually(t, func() bool {
		return count(`SELECT count(*) FROM river_job WHERE kind = 'workflow.callback' AND state = 'completed'`) == 1 &&
			count(`SELECT count(*) FROM river_job WHERE kind = 'workflow.callback' AND state = 'cancelled'`) == 1
	}, 30*time.Second, 50*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, forged)
	require.ElementsMatch(t, []string{"/cb", "/redirect"}, verified)
	require.Equal(t, 1, redirects)
}
