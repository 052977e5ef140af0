package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
)

// The log channel's info line names the message but carries neither its
// text nor its contact; at debug a second line does.
func TestLogChannelKeepsContentAtDebug(t *testing.T) {
	t.Parallel()
	msg := engine.OutboundMessage{ID: 42, TenantID: "acme", ThreadID: "juan", Channel: "whatsapp",
		Contact: "+5215550001234", ExecutionID: "x-1", Body: "Hola Juan, tu código es 4321"}
	lines := func(level slog.Level) []map[string]any {
		var buf bytes.Buffer
		ch := &engine.LogChannel{Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))}
		require.NoError(t, ch.Deliver(context.Background(), msg))
		var out []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &m))
			out = append(out, m)
		}
		return out
	}
	info := lines(slog.LevelInfo)
	require.Len(t, info, 1)
	require.Equal(t, "message delivered", info[0]["msg"])
	require.Equal(t, float64(42), info[0]["message_id"])
	require.Equal(t, float64(len(msg.Body)), info[0]["body_bytes"])
	raw, _ := json.Marshal(info[0])
	require.NotContains(t, string(raw), "5550001234")
	require.NotContains(t, string(raw), "4321")

	debug := lines(slog.LevelDebug)
	require.Len(t, debug, 2)
	require.Equal(t, "DEBUG", debug[1]["level"])
	require.Equal(t, msg.Contact, debug[1]["contact"])
	require.Equal(t, msg.Body, debug[1]["body"])
}
