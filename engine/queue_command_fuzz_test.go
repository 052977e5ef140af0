package engine

import (
	"errors"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonrun/baton/engine/workflow"
)

// FuzzQueueCommand parses arbitrary chat messages as /queue commands and
// checks what the engine would store. It never panics; a message is a
// command exactly when its first word is /queue; a cap or debounce it sets
// is the value one of its arguments spells, exactly (no overflow, nothing
// read as zero); and a command the engine accepts with the default limits
// has cap within 1..limits.queueCap and debounce within
// 0..limits.debounceMs, and had no argument it could not read.
func FuzzQueueCommand(f *testing.F) {
	for _, s := range []string{
		"/queue collect debounce:2s cap:25 drop:summarize", "/queue steer", "/queue default", "/queue reset cap:3",
		"  /queue\tfollowup\ndebounce:1500  ", "/queue", "/queues collect", "hola /queue collect", "",
		"/queue debounce:-5s", "/queue debounce:-1", "/queue debounce:9223372036854775807", "/queue debounce:9e18",
		"/queue debounce:2562047h47m16.854775807s", "/queue debounce:2562048h", "/queue debounce:1.5ms",
		"/queue debounce:abc", "/queue debounce:", "/queue debounce:0x10", "/queue debounce:+7", "/queue debounce:1h1h",
		"/queue cap:0", "/queue cap:-1", "/queue cap:1001", "/queue cap:1000", "/queue cap:99999999999999999999",
		"/queue cap:ten", "/queue cap:", "/queue cap:1 cap:2 debounce:1s debounce:2s", "/queue drop:old mode:x a:b:c",
		"/queue " + strings.Repeat("x", 300), "/queue debounce:3600000 cap:1", "/queue debounce:3600001",
	} {
		f.Add(s)
	}
	e := &Engine{cfg: Config{Limits: workflow.DefaultLimits()}}
	f.Fuzz(func(t *testing.T, text string) {
		checkQueueCommandText(t, e, text)
	})
}

func checkQueueCommandText(t *testing.T, e *Engine, text string) {
	t.Helper()
	c, ok := parseQueueCommand(text)
	fields := strings.Fields(text)
	if want := len(fields) > 0 && fields[0] == "/queue"; ok != want {
		t.Fatalf("parseQueueCommand(%q) reported %v", text, ok)
	}
	if !ok {
		if c.reset || c.settings != (QueueSettings{}) {
			t.Fatalf("text that is not a command gave settings %+v", c.settings)
		}
		return
	}
	// What the arguments spell, read independently of the parser.
	caps, debounces := map[int64]bool{}, map[int64]bool{}
	unreadable := false
	for _, arg := range fields[1:] {
		k, v, hasValue := strings.Cut(arg, ":")
		if !hasValue {
			continue
		}
		switch k {
		case "cap":
			if n, ok := exactInt(v); ok {
				caps[n] = true
			} else {
				unreadable = true
			}
		case "debounce":
			if d, err := time.ParseDuration(v); err == nil {
				debounces[d.Milliseconds()] = true
			} else if n, ok := exactInt(v); ok {
				debounces[n] = true
			} else {
				unreadable = true
			}
		}
	}
	if p := c.settings.Cap; p != nil && !caps[int64(*p)] {
		t.Fatalf("%q set cap %d, which no argument spells", text, *p)
	}
	if p := c.settings.DebounceMS; p != nil && !debounces[int64(*p)] {
		t.Fatalf("%q set debounce %d ms, which no argument spells", text, *p)
	}
	err := e.checkQueueCommand(c)
	if err != nil {
		var ie *InputError
		if !errors.As(err, &ie) || ie.Field != "payload.text" {
			t.Fatalf("%q was refused with %T %v, not an InputError on payload.text", text, err, err)
		}
		return
	}
	if unreadable {
		t.Fatalf("%q was accepted with an argument whose value cannot be read", text)
	}
	l := e.cfg.Limits
	if p := c.settings.Cap; p != nil && (*p < 1 || *p > l.QueueCap) {
		t.Fatalf("%q was accepted with cap %d, outside 1..%d", text, *p, l.QueueCap)
	}
	if p := c.settings.DebounceMS; p != nil && (*p < 0 || *p > l.DebounceMS) {
		t.Fatalf("%q was accepted with debounce %d ms, outside 0..%d", text, *p, l.DebounceMS)
	}
}

// exactInt reads a decimal integer as strconv.Atoi spells one, reporting
// false when it is not one or does not fit an int.
func exactInt(s string) (int64, bool) {
	if s == "" || strings.ContainsAny(s, "_") {
		return 0, false
	}
	n, ok := new(big.Int).SetString(s, 10)
	if !ok || !n.IsInt64() || strconv.IntSize == 32 && (n.Int64() > 1<<31-1 || n.Int64() < -1<<31) {
		return 0, false
	}
	return n.Int64(), true
}
