package engine

import (
	"encoding/json"
	"fmt"
)

// The checks of Config.Limits (workflow.Limits) on what a request hands the
// engine: queue settings, an execution's input and context. Definitions are
// checked in ValidateDefinition and engine/workflow, variables at every step
// write (engine/step.go), ids and names of API requests in package httpapi.

// checkQueueSettings refuses queue settings Baton does not know or that are
// out of the limits: cap 1..limits.queueCap, debounce_ms
// 0..limits.debounceMs, mode and drop one of theirs. prefix is put before
// the field named ("payload.queue." for POST /threads, "payload." for PUT
// …/queue).
func (e *Engine) checkQueueSettings(q *QueueSettings, prefix string) error {
	l := e.cfg.Limits
	for _, f := range [][2]string{{"mode", q.Mode}, {"drop", q.Drop}} {
		if len(f[1]) > l.IDBytes {
			return &InputError{Field: prefix + f[0], Message: fmt.Sprintf("is %d bytes long, over the limit of %d (limits.idBytes)", len(f[1]), l.IDBytes)}
		}
	}
	switch q.Mode {
	case "", "steer", "followup", "collect", "steer-backlog", "steer+backlog", "interrupt", "queue":
	default:
		return &InputError{Field: prefix + "mode", Message: fmt.Sprintf("unknown queue mode %q", q.Mode)}
	}
	switch q.Drop {
	case "", "old", "new", "summarize":
	default:
		return &InputError{Field: prefix + "drop", Message: fmt.Sprintf("unknown drop policy %q", q.Drop)}
	}
	if q.Cap != nil && (*q.Cap < 1 || *q.Cap > l.QueueCap) {
		return &InputError{Field: prefix + "cap", Message: fmt.Sprintf("must be between 1 and %d (limits.queueCap), not %d", l.QueueCap, *q.Cap)}
	}
	if q.DebounceMS != nil && (*q.DebounceMS < 0 || *q.DebounceMS > l.DebounceMS) {
		return &InputError{Field: prefix + "debounce_ms", Message: fmt.Sprintf("must be between 0 and %d ms (limits.debounceMs), not %d", l.DebounceMS, *q.DebounceMS)}
	}
	return nil
}

// checkQueueCommand checks the settings of a /queue command. Its problem
// names payload.text, the message that carried it, and says which argument
// is at fault; nothing is stored.
func (e *Engine) checkQueueCommand(c queueCommand) error {
	if c.bad != "" {
		return &InputError{Field: "payload.text", Message: fmt.Sprintf("/queue %s: the value is not a number (cap) or a duration (debounce, such as 2s or 1500)", c.bad)}
	}
	if err := e.checkQueueSettings(&c.settings, ""); err != nil {
		ie := err.(*InputError)
		return &InputError{Field: "payload.text", Message: "/queue " + ie.Field + " " + ie.Message}
	}
	return nil
}

// boundQueue keeps effective queue settings within the limits, whatever
// was stored before the limits were lowered: a debounce past
// limits.debounceMs would put the session's flush beyond reach.
func (e *Engine) boundQueue(eff EffectiveQueueSettings) EffectiveQueueSettings {
	l := e.cfg.Limits
	eff.Cap = min(max(eff.Cap, 1), l.QueueCap)
	eff.DebounceMS = min(max(eff.DebounceMS, 0), l.DebounceMS)
	return eff
}

// startDocuments encodes an execution's input (its first variables) and
// context once, and refuses either when it is over limits.variablesBytes
// in bytes of JSON.
func (e *Engine) startDocuments(p StartParams) (input, ctxDoc json.RawMessage, err error) {
	max := e.cfg.Limits.VariablesBytes
	encode := func(field string, value map[string]any) (json.RawMessage, error) {
		b, err := json.Marshal(orEmpty(value))
		if err != nil {
			return nil, &InputError{Field: field, Message: "is not JSON Baton can store: " + err.Error()}
		}
		if len(b) > max {
			return nil, &InputError{Field: field, Message: fmt.Sprintf("is %d bytes of JSON, over the limit of %d (limits.variablesBytes)", len(b), max)}
		}
		return b, nil
	}
	if input, err = encode("payload.input", p.Input); err != nil {
		return nil, nil, err
	}
	if ctxDoc, err = encode("payload.context", p.Context); err != nil {
		return nil, nil, err
	}
	return input, ctxDoc, nil
}
