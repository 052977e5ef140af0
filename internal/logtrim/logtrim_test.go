package logtrim_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/logtrim"
)

func TestString(t *testing.T) {
	t.Parallel()
	require.Equal(t, "short", logtrim.String("short", 10))
	require.Equal(t, "0123456789", logtrim.String("0123456789", 10))
	require.Equal(t, "0123456789…[5 bytes cut]", logtrim.String("0123456789abcde", 10))
	// Never half a rune: "ñ" is two bytes.
	require.Equal(t, "ñññññ…[2 bytes cut]", logtrim.String(strings.Repeat("ñ", 6), 11))
}

func TestText(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("i", 250)
	require.Equal(t, "short words stay", logtrim.Text("short words stay"))
	require.Equal(t, "Thread "+strings.Repeat("i", 200)+"…[50 bytes cut] lock  released\n by "+strings.Repeat("i", 200)+"…[50 bytes cut]",
		logtrim.Text("Thread "+long+" lock  released\n by "+long))
	many := strings.Repeat("word ", 1000)
	require.True(t, strings.HasSuffix(logtrim.Text(many), "bytes cut]"))
	require.Less(t, len(logtrim.Text(many)), logtrim.MaxErrorBytes+30)
}

func TestReplaceAttrCutsLongValues(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: logtrim.ReplaceAttr}))
	id := strings.Repeat("x", 300_000) // a 300 KB id
	logger.Error("step failed for "+id, "execution_id", id, "error", errors.New("reading execution "+id),
		"short", "kept", "n", 7, "stack", strings.Repeat("s", 5000))
	require.Less(t, buf.Len(), 5000+4*logtrim.MaxBytes+500, "the line stays short")
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line))
	require.Equal(t, strings.Repeat("x", 200)+"…[299800 bytes cut]", line["execution_id"])
	require.Equal(t, "reading execution "+strings.Repeat("x", 200)+"…[299800 bytes cut]", line["error"])
	require.Equal(t, "step failed for "+strings.Repeat("x", 200)+"…[299800 bytes cut]", line["msg"])
	require.Equal(t, "kept", line["short"])
	require.Equal(t, float64(7), line["n"])
	require.Len(t, line["stack"], 5000, "a stack trace is kept whole")
}
