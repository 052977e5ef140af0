package engine_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/jobs"
)

// A webhook that fails at first gets every message of a thread exactly once
// (after dedupe by message id), verified, and in order.
func TestWebhookChannelRetriesWithoutReordering(t *testing.T) {
	t.Parallel()
	secret := []byte("hook-secret")
	var (
		mu       sync.Mutex
		received []string
		seen     = map[string]bool{}
		calls    atomic.Int32
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if calls.Add(1) <= 3 {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		if r.Header.Get("X-Baton-Signature") != engine.Sign(secret, body) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var msg struct {
			MessageID string `json:"message_id"`
			Text      string `json:"text"`
		}
		if err := json.Unmarshal(body, &msg); err != nil || msg.MessageID != r.Header.Get("X-Baton-Message-ID") {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		mu.Lock()
		if !seen[msg.MessageID] {
			seen[msg.MessageID] = true
			received = append(received, msg.Text)
		}
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)

	pool := pgtest.NewPool(t)
	eng, err := engine.New(engine.Config{Pool: pool, Channel: &engine.WebhookChannel{URL: hook.URL, Secret: secret}})
	require.NoError(t, err)
	client, err := jobs.NewClient(pool, jobs.Config{Engine: eng})
	require.NoError(t, err)
	startClient(t, client)
	_, _, err = eng.DefineWorkflow(context.Background(), pool, "tenant-hook", []byte(`{"workflow_id": "three", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "a"},
	  {"id": "a", "type": "action", "actionType": "send_message", "parameters": {"message": "uno"}, "next": "b"},
	  {"id": "b", "type": "action", "actionType": "send_message", "parameters": {"message": "dos"}, "next": "c"},
	  {"id": "c", "type": "action", "actionType": "send_message", "parameters": {"message": "tres"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`))
	require.NoError(t, err)
	tx, err := pool.Begin(context.Background())
	require.NoError(t, err)
	_, err = eng.StartExecution(context.Background(), tx, engine.StartParams{TenantID: "tenant-hook", WorkflowID: "three", ThreadID: "t"})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(context.Background()))

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(received) == 3
	}, 30*time.Second, 50*time.Millisecond)
	mu.Lock()
	require.Equal(t, []string{"uno", "dos", "tres"}, received)
	mu.Unlock()
	// The receiver answered before the delivery was recorded: wait for it.
	require.Eventually(t, func() bool {
		return countRows(t, pool, `SELECT count(*) FROM thread_message WHERE status = 'delivered'`) == 3
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 4, countRows(t, pool, `SELECT attempts FROM thread_message WHERE body = 'uno'`),
		"the first message carried the failed attempts")
}
