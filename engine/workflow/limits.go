package workflow

import (
	"errors"
	"fmt"
	"reflect"
)

// Limits bound everything a tenant controls in a definition and in the runs
// of it: what is refused when a definition is stored or an execution
// started, and what fails a node while it runs. The config file's `limits`
// section sets them; a zero field takes its default (DefaultLimits).
type Limits struct {
	// DefinitionBytes is the largest definition payload, in bytes of JSON.
	// Default 1 MiB (the request body limit).
	DefinitionBytes int `json:"definitionBytes"`
	// Nodes is the most nodes a definition may have. Default 2,000.
	Nodes int `json:"nodes"`
	// IDBytes bounds every id and name a tenant chooses: workflow_id,
	// version, node ids, execution_id, thread_id, lane, message_id, event_id,
	// channel, contact. Default 255.
	IDBytes int `json:"idBytes"`
	// ConditionBytes bounds a decision's condition source. Default 4 KiB.
	ConditionBytes int `json:"conditionBytes"`
	// ConditionBytesTotal bounds all of a definition's conditions together:
	// compiling a condition costs about 5 µs per byte, so this keeps a
	// definition's validation well under a second. Default 32 KiB.
	ConditionBytesTotal int `json:"conditionBytesTotal"`
	// ConditionCost is the most a condition may cost in one evaluation, in
	// CEL cost units (about one per comparison, field access or list
	// element visited). A condition whose estimated worst case is over it
	// is refused when the definition is stored; one that reaches it while
	// running fails its node. Default 1,000,000.
	ConditionCost uint64 `json:"conditionCost"`
	// RegexProgramSize is the most instructions a regular expression in a
	// condition (the pattern of matches()) may compile to, as Go's
	// regexp/syntax counts them: 'a{1000}' is a thousand. A constant
	// pattern over it is refused when the definition is stored, one
	// computed while a condition runs fails its node. Matching costs the
	// pattern's size times the string's length, in ConditionCost's units.
	// Default 1,000.
	RegexProgramSize int `json:"regexProgramSize"`
	// VariablesBytes is the largest an execution's variables may grow, in
	// bytes of JSON: the input at start, and what every step writes.
	// Default 1 MiB.
	VariablesBytes int `json:"variablesBytes"`
	// RenderBytes is the most text one node's templates may render (a
	// message, a set_variables value set, a task's inputs). Rendering stops
	// at the limit. Default 256 KiB.
	RenderBytes int `json:"renderBytes"`
	// HistoryEntries is the most conversation_history entries an execution
	// keeps; older ones are dropped. Default 200.
	HistoryEntries int `json:"historyEntries"`
	// QueueCap is the largest cap a session's queue may ask for (/queue
	// cap:N, PUT …/queue, messages.queue.cap). Default 1,000.
	QueueCap int `json:"queueCap"`
	// DebounceMS is the longest debounce a session's queue may ask for, in
	// milliseconds. Default 3,600,000 (one hour).
	DebounceMS int `json:"debounceMs"`
	// ChildDepth is how deeply executions may nest through trigger_agent:
	// a run that would start a child deeper than this fails its node
	// instead, so a workflow that triggers itself ends. Default 10.
	ChildDepth int `json:"childDepth"`
	// WaitTimeoutMS is the longest metadata.timeout_ms an execute request
	// may hold the request for with wait_for_completion. Default 120,000.
	WaitTimeoutMS int64 `json:"waitTimeoutMs"`
	// LanesPerTenant is how many lanes of its own (names the operator did
	// not configure) one tenant may use. Default 100.
	LanesPerTenant int `json:"lanesPerTenant"`
}

// DefaultLimits returns the limits in force when the configuration sets
// none. Every field has one: WithDefaults and Check go over the fields.
func DefaultLimits() Limits {
	return Limits{
		DefinitionBytes:     1 << 20,
		Nodes:               2000,
		IDBytes:             255,
		ConditionBytes:      4 << 10,
		ConditionBytesTotal: 32 << 10,
		ConditionCost:       1_000_000,
		RegexProgramSize:    1000,
		VariablesBytes:      1 << 20,
		RenderBytes:         256 << 10,
		HistoryEntries:      200,
		QueueCap:            1000,
		DebounceMS:          3_600_000,
		ChildDepth:          10,
		WaitTimeoutMS:       120_000,
		LanesPerTenant:      100,
	}
}

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	v, d := reflect.ValueOf(&l).Elem(), reflect.ValueOf(DefaultLimits())
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			v.Field(i).Set(d.Field(i))
		}
	}
	return l
}

// Check reports every negative limit, naming its config field.
func (l Limits) Check() error {
	var errs []error
	v := reflect.ValueOf(l)
	for i := range v.NumField() {
		if f := v.Field(i); f.CanInt() && f.Int() < 0 {
			errs = append(errs, fmt.Errorf("limits.%s must not be negative", v.Type().Field(i).Tag.Get("json")))
		}
	}
	return errors.Join(errs...)
}

// LimitError says a value a tenant controls is over one of its Limits.
type LimitError struct {
	// Field names what is over the limit, such as "execution_id" or
	// "variables".
	Field string
	// Limit names the limit, as in the config file ("limits.idBytes").
	Limit string
	// Max is the limit's value.
	Max int64
	// Got is the size found, or -1 when counting stopped at the limit.
	Got int64
}

func (e *LimitError) Error() string {
	if e.Got < 0 {
		return fmt.Sprintf("%s is over the limit of %d (%s)", e.Field, e.Max, e.Limit)
	}
	return fmt.Sprintf("%s is %d, over the limit of %d (%s)", e.Field, e.Got, e.Max, e.Limit)
}

// CheckID returns a *LimitError when an id or name is longer than
// limits.idBytes, nil otherwise.
func (l Limits) CheckID(field, value string) error {
	if len(value) > l.IDBytes {
		return &LimitError{Field: field + " length", Limit: "limits.idBytes", Max: int64(l.IDBytes), Got: int64(len(value))}
	}
	return nil
}
