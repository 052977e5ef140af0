package engine_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/jobs"
)

// channelReceiver is a webhook channel's receiver that keeps the texts it
// got, by thread.
type channelReceiver struct {
	*httptest.Server
	mu  sync.Mutex
	got map[string][]string
}

func newChannelReceiver(t *testing.T) *channelReceiver {
	t.Helper()
	r := &channelReceiver{got: map[string][]string{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var msg struct {
			ThreadID string `json:"thread_id"`
			Channel  string `json:"channel"`
			Text     string `json:"text"`
		}
		if err := json.Unmarshal(body, &msg); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got[msg.ThreadID] = append(r.got[msg.ThreadID], msg.Channel+": "+msg.Text)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *channelReceiver) messages() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]string{}
	for k, v := range r.got {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// Outbound messages go through the adapter of their thread's channel: a
// thread on "whatsapp" delivers only to the whatsapp receiver; a thread on
// a channel with no adapter of its own ("sms") and an execution's implicit
// thread deliver through the default one.
func TestOutboundRoutedByThreadChannel(t *testing.T) {
	t.Parallel()
	whatsapp, fallback := newChannelReceiver(t), newChannelReceiver(t)
	pool := pgtest.NewPool(t)
	eng, err := engine.New(engine.Config{Pool: pool, Channels: map[string]engine.ChannelAdapter{
		engine.DefaultChannel: &engine.WebhookChannel{URL: fallback.URL},
		"whatsapp":            &engine.WebhookChannel{URL: whatsapp.URL},
	}})
	require.NoError(t, err)
	client, err := jobs.NewClient(pool, jobs.Config{Engine: eng})
	require.NoError(t, err)
	startClient(t, client)
	ctx := context.Background()
	const tenant = "tenant-channels"
	_, _, err = eng.DefineWorkflow(ctx, pool, tenant, []byte(`{"workflow_id": "hello", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "say"},
	  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "hola {{who}}"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`))
	require.NoError(t, err)
	for _, th := range []engine.ThreadUpsert{
		{TenantID: tenant, ThreadID: "wa", Channel: "whatsapp", Contact: "+5215550001"},
		{TenantID: tenant, ThreadID: "sms", Channel: "sms", Contact: "+5215550002"},
	} {
		_, _, err := eng.UpsertThread(ctx, pool, th)
		require.NoError(t, err)
	}
	for _, p := range []engine.StartParams{
		{ThreadID: "wa", Input: map[string]any{"who": "wa-1"}},
		{ThreadID: "sms", Input: map[string]any{"who": "sms"}},
		{ExecutionID: "x-api", Input: map[string]any{"who": "api"}},
		{ThreadID: "wa", Input: map[string]any{"who": "wa-2"}},
	} {
		p.TenantID, p.WorkflowID = tenant, "hello"
		require.NoError(t, eng.WithTx(ctx, func(tx pgxTx) error {
			_, err := eng.StartExecution(ctx, tx, p)
			return err
		}))
	}
	require.Eventually(t, func() bool {
		return countRows(t, pool, `SELECT count(*) FROM thread_message WHERE status = 'delivered'`) == 4
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, map[string][]string{"wa": {"whatsapp: hola wa-1", "whatsapp: hola wa-2"}}, whatsapp.messages())
	require.Equal(t, map[string][]string{"sms": {"sms: hola sms"}, "implicit:x-api": {"api: hola api"}}, fallback.messages())
}
