package engine

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// QueueConfig is the global inbound queue configuration (messages.queue).
type QueueConfig struct {
	// Mode is the global mode; empty means collect.
	Mode string
	// DebounceMS is the global debounce; zero means 1000.
	DebounceMS int
	// Cap is the global cap; zero means 20.
	Cap int
	// Drop is the global drop policy; empty means summarize.
	Drop string
	// ByChannel overrides the mode per channel.
	ByChannel map[string]string
}

// queueCommand is a parsed "/queue …" command; reset clears the override.
type queueCommand struct {
	reset    bool
	settings QueueSettings
	// bad is the first argument whose value could not be read, such as
	// "cap:ten" or "debounce:9e18"; the command is then refused.
	bad string
}

// parseQueueCommand reads "/queue <mode> [debounce:2s] [cap:25]
// [drop:summarize]" and "/queue default|reset". Text that is not a /queue
// command reports false.
func parseQueueCommand(text string) (queueCommand, bool) {
	f := strings.Fields(strings.TrimSpace(text))
	if len(f) == 0 || f[0] != "/queue" {
		return queueCommand{}, false
	}
	var c queueCommand
	for _, arg := range f[1:] {
		k, v, hasValue := strings.Cut(arg, ":")
		switch {
		case !hasValue && (arg == "default" || arg == "reset"):
			c.reset = true
		case !hasValue:
			c.settings.Mode = arg
		case k == "debounce":
			// A duration ("2s") or a number of milliseconds; anything else,
			// or a duration time.Duration cannot hold, is refused rather
			// than read as zero.
			ms, err := strconv.Atoi(v)
			if d, derr := time.ParseDuration(v); derr == nil {
				ms, err = int(d.Milliseconds()), nil
			}
			if err != nil {
				c.badArg(arg)
				continue
			}
			c.settings.DebounceMS = &ms
		case k == "cap":
			n, err := strconv.Atoi(v)
			if err != nil {
				c.badArg(arg)
				continue
			}
			c.settings.Cap = &n
		case k == "drop":
			c.settings.Drop = v
		}
	}
	return c, true
}

func (c *queueCommand) badArg(arg string) {
	if c.bad == "" {
		c.bad = arg
	}
}

// applyQueueCommand stores what a /queue message says; its problems name
// payload.text, the message that carried it.
func (e *Engine) applyQueueCommand(ctx context.Context, tx pgx.Tx, threadID int64, c queueCommand) error {
	if c.reset {
		return e.storeQueueSettings(ctx, tx, threadID, nil)
	}
	if err := e.checkQueueCommand(c); err != nil {
		return err
	}
	return e.storeQueueSettings(ctx, tx, threadID, &c.settings)
}

// storeQueueSettings stores a thread's session override of the queue
// settings, or removes it when s is nil.
func (e *Engine) storeQueueSettings(ctx context.Context, db dbsqlc.DBTX, threadID int64, s *QueueSettings) error {
	var raw json.RawMessage
	if s != nil {
		raw = mustJSON(s)
	}
	return e.q.ThreadSetQueueSettings(ctx, db, &dbsqlc.ThreadSetQueueSettingsParams{ID: threadID, QueueSettings: raw})
}

// SetQueueSettingsTx stores (or, with nil, removes) a thread's session
// override of the queue settings and returns the thread.
func (e *Engine) SetQueueSettingsTx(ctx context.Context, tx pgx.Tx, tenantID, threadKey string, s *QueueSettings) (*Thread, error) {
	t, err := e.GetThread(ctx, tx, tenantID, threadKey)
	if err != nil {
		return nil, err
	}
	if s != nil {
		if err := e.checkQueueSettings(s, "payload."); err != nil {
			return nil, err
		}
	}
	if err := e.storeQueueSettings(ctx, tx, t.ID, s); err != nil {
		return nil, err
	}
	return e.GetThread(ctx, tx, tenantID, threadKey)
}

// effectiveQueue resolves the settings in force: session override, then
// the channel's mode (messages.queue.byChannel), then the global
// configuration, then the defaults; Sources says where each comes from.
func (e *Engine) effectiveQueue(raw json.RawMessage, channel string) EffectiveQueueSettings {
	eff := DefaultQueueSettings
	eff.Sources = map[string]string{}
	for k, v := range DefaultQueueSettings.Sources {
		eff.Sources[k] = v
	}
	g := e.cfg.Queue
	if g.Mode != "" && g.Mode != eff.Mode {
		eff.Mode, eff.Sources["mode"] = g.Mode, "global"
	}
	if g.DebounceMS > 0 && g.DebounceMS != eff.DebounceMS {
		eff.DebounceMS, eff.Sources["debounce_ms"] = g.DebounceMS, "global"
	}
	if g.Cap > 0 && g.Cap != eff.Cap {
		eff.Cap, eff.Sources["cap"] = g.Cap, "global"
	}
	if g.Drop != "" && g.Drop != eff.Drop {
		eff.Drop, eff.Sources["drop"] = g.Drop, "global"
	}
	if m, ok := g.ByChannel[channel]; ok && m != "" {
		eff.Mode, eff.Sources["mode"] = m, "channel"
	}
	var s QueueSettings
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return e.boundQueue(eff)
	}
	if s.Mode != "" {
		eff.Mode, eff.Sources["mode"] = s.Mode, "session"
	}
	if s.DebounceMS != nil {
		eff.DebounceMS, eff.Sources["debounce_ms"] = *s.DebounceMS, "session"
	}
	if s.Cap != nil {
		eff.Cap, eff.Sources["cap"] = *s.Cap, "session"
	}
	if s.Drop != "" {
		eff.Drop, eff.Sources["drop"] = s.Drop, "session"
	}
	return e.boundQueue(eff)
}
