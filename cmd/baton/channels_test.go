package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

// A real `baton serve` whose config names two webhook channels, default and
// whatsapp, sends a whatsapp thread's messages to the whatsapp webhook only,
// signed with BATON_WEBHOOK_SECRET, and an execution's implicit thread's to
// the default one.
func TestServeRoutesByThreadChannel(t *testing.T) {
	t.Parallel()
	type receiver struct {
		mu    sync.Mutex
		texts []string
	}
	listen := func(r *receiver) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			body, _ := io.ReadAll(req.Body)
			if err := engine.VerifySignature([]byte(outboundSecret32), req.Header.Get(engine.SignatureHeader), body, 0, time.Now()); err != nil {
				http.Error(w, "bad signature", http.StatusUnauthorized)
				return
			}
			var msg struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(body, &msg)
			r.mu.Lock()
			defer r.mu.Unlock()
			r.texts = append(r.texts, msg.Text)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	var whatsapp, fallback receiver
	env, _, count := serveDatabase(t, fmt.Sprintf(`{channels: {default: {type: "webhook", url: %q}, whatsapp: {type: "webhook", url: %q}}}`,
		listen(&fallback), listen(&whatsapp)))
	s := startServer(t, append(env, "BATON_WEBHOOK_SECRET="+outboundSecret32))
	s.define(t, `{"workflow_id": "hello", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "say"},
	  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "hola {{who}}"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`)
	status, body := s.post(t, "/api/v1/threads", map[string]any{"channel": "whatsapp", "contact": "+5215550001", "thread_id": "wa"})
	require.Less(t, status, 300, "%s", body)
	for _, p := range []map[string]any{
		{"workflow_id": "hello", "thread_id": "wa", "input": map[string]any{"who": "wa"}},
		{"workflow_id": "hello", "input": map[string]any{"who": "api"}},
	} {
		status, body := s.post(t, "/api/v1/workflow/execute", p)
		require.Less(t, status, 300, "%s", body)
	}
	require.Eventually(t, func() bool {
		return count(`SELECT count(*) FROM thread_message WHERE status = 'delivered'`) == 2
	}, 30*time.Second, 50*time.Millisecond)
	whatsapp.mu.Lock()
	defer whatsapp.mu.Unlock()
	fallback.mu.Lock()
	defer fallback.mu.Unlock()
	require.Equal(t, []string{"hola wa"}, whatsapp.texts)
	require.Equal(t, []string{"hola api"}, fallback.texts)
}
