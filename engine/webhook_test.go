package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
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
// and in order, verified, when it follows the documented rule: it keeps the
// highest X-Baton-Sequence it has seen and drops anything at or below it.
func TestWebhookChannelRetriesWithoutReordering(t *testing.T) {
	t.Parallel()
	secret := []byte("webhook-secret-of-32-bytes-long!")
	var (
		mu       sync.Mutex
		received []string
		highest  int64
		calls    atomic.Int32
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if calls.Add(1) <= 3 {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		if engine.VerifySignature(secret, r.Header.Get(engine.SignatureHeader), body, 0, time.Now()) != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var msg struct {
			MessageID string `json:"message_id"`
			Sequence  int64  `json:"sequence"`
			Text      string `json:"text"`
		}
		if err := json.Unmarshal(body, &msg); err != nil || msg.MessageID != r.Header.Get(engine.MessageIDHeader) ||
			r.Header.Get(engine.SequenceHeader) != fmt.Sprint(msg.Sequence) || msg.Sequence <= 0 {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		mu.Lock()
		if msg.Sequence > highest {
			highest = msg.Sequence
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

// A webhook channel follows no redirect (301, 302, 307, 308) to a port or a
// host other than its URL's: the delivery fails (and is retried by its
// thread), the target gets nothing, and the POST it did send is signed.
func TestWebhookChannelRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	secret := []byte("webhook-secret-of-32-bytes-long!")
	target := newCountingServer(t, nil)
	var (
		mu     sync.Mutex
		code   int
		to     string
		badSig int
	)
	hook := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if engine.VerifySignature(secret, r.Header.Get(engine.SignatureHeader), body, 0, time.Now()) != nil {
			badSig++
		}
		http.Redirect(w, r, to, code)
	})
	ch := &engine.WebhookChannel{URL: hook.URL + "/outbound", Secret: secret}
	msg := engine.OutboundMessage{ID: 7, TenantID: "tenant-hook", ThreadID: "t", Channel: "whatsapp", Contact: "+5215550000", Body: "hola", CreatedAt: time.Now()}
	sent := 0
	for _, c := range []int{301, 302, 307, 308} {
		for _, loc := range []string{
			"http://127.0.0.1:" + target.port() + "/stolen", // the URL's host, another port
			"http://localhost:" + target.port() + "/stolen", // another host
		} {
			mu.Lock()
			code, to = c, loc
			mu.Unlock()
			err := ch.Deliver(context.Background(), msg)
			require.ErrorContains(t, err, fmt.Sprintf("answered %d", c))
			sent++
		}
	}
	require.Zero(t, target.requests.Load())
	require.Equal(t, int32(sent), hook.requests.Load())
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, badSig)
}

// A webhook channel connects to its URL's host and port only.
func TestWebhookChannelDialsOnlyItsURL(t *testing.T) {
	t.Parallel()
	hook := newCountingServer(t, nil)
	ch := &engine.WebhookChannel{URL: hook.URL, Secret: []byte("webhook-secret-of-32-bytes-long!")}
	require.NoError(t, ch.Deliver(context.Background(), engine.OutboundMessage{ID: 1, Body: "hola"}))
	require.Equal(t, int32(1), hook.requests.Load())

	// Its client is built from URL once: a request anywhere else is refused
	// at the dial.
	other := newCountingServer(t, nil)
	ch.URL = other.URL
	require.ErrorIs(t, ch.Deliver(context.Background(), engine.OutboundMessage{ID: 2, Body: "hola"}), engine.ErrOutboundRefused)
	require.Zero(t, other.requests.Load())
}
