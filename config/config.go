package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/titanous/json5"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/engine/workflow"
)

// Config is the configuration file.
type Config struct {
	// Agents holds the limit of lane "main".
	Agents Agents `json:"agents"`
	// Lanes are the operator's lanes, shared by every tenant: a limit, or
	// {limit, perTenant}. Defaults: subagent 8, cron 2. A lane a tenant
	// names that is not listed here is that tenant's own, with limit 1.
	Lanes map[string]Lane `json:"lanes"`
	// Locks configures thread locks.
	Locks Locks `json:"locks"`
	// Messages configures inbound message queueing.
	Messages Messages `json:"messages"`
	// Auth configures the checks of API tokens (config/server.go).
	Auth Auth `json:"auth"`
	// HTTP configures the API's HTTP server timeouts (config/server.go).
	HTTP HTTP `json:"http"`
	// Tools are the http and llm tools, by name.
	Tools map[string]Tool `json:"tools"`
	// Channels are the outbound channel adapters, by name: a thread's
	// messages go through the adapter named by the thread's channel, else
	// through "default". Absent means {default: {type: log}}.
	Channels map[string]Channel `json:"channels"`
	// Callbacks configures execution callbacks.
	Callbacks Callbacks `json:"callbacks"`
	// Limits bound everything a tenant controls (workflow.Limits; its json
	// tags are the keys). A key left out, or 0, takes its default; a
	// negative value is an error. The keys and their defaults:
	//
	//   - definitionBytes (1048576): the largest definition payload, in
	//     bytes of JSON. The API's request body limit (1 MiB) applies too.
	//   - nodes (2000): the most nodes a definition may have.
	//   - idBytes (255): the longest id or name a tenant sends, in bytes:
	//     workflow_id, version, node ids, execution_id, thread_id, lane,
	//     message_id, correlation_id, event_id, event_type, channel,
	//     contact, default_workflow_id, queue mode and drop, node_id, path
	//     parameters. At most 1000 (the ids sit in Postgres indexes).
	//   - conditionBytes (4096): the longest decision condition.
	//   - conditionBytesTotal (32768): all of a definition's conditions
	//     together.
	//   - conditionCost (1000000): the most CEL cost units a condition may
	//     take in one evaluation.
	//   - regexProgramSize (1000): the most instructions a regular
	//     expression in a condition (matches()) may compile to.
	//   - variablesBytes (1048576): the largest an execution's input,
	//     context and variables may be, in bytes of JSON.
	//   - renderBytes (262144): the most text one node's templates render.
	//   - historyEntries (200): the most conversation_history entries an
	//     execution keeps; older ones are dropped.
	//   - queueCap (1000): the largest queue cap a session may ask for
	//     (/queue cap:N, PUT …/queue, messages.queue.cap).
	//   - debounceMs (3600000): the longest queue debounce a session may ask
	//     for, in milliseconds. At most 86400000.
	//   - waitTimeoutMs (120000): the longest metadata.timeout_ms an
	//     execute request with wait_for_completion may ask for. At most
	//     86400000.
	Limits workflow.Limits `json:"limits"`
	// RateLimits are per-tenant request rates of the API, per process; off
	// unless set (RateLimits).
	RateLimits RateLimits `json:"rateLimits"`
	// Retention is how long ended executions, replay windows and inbound
	// messages are kept (config/retention.go).
	Retention Retention `json:"retention"`
}

// Agents holds agent defaults.
type Agents struct {
	Defaults struct {
		// MaxConcurrent is the limit of lane "main". Default 4.
		MaxConcurrent int `json:"maxConcurrent"`
	} `json:"defaults"`
}

// Locks configures thread locks.
type Locks struct {
	// Timeout is the stale-lock age. Default 10m.
	Timeout Duration `json:"timeout"`
	// ReapInterval is how often stale locks are reaped. Default 30s.
	ReapInterval Duration `json:"reapInterval"`
}

// Messages configures inbound messages.
type Messages struct {
	Queue Queue `json:"queue"`
}

// Queue is the global inbound queue settings.
type Queue struct {
	// Mode is steer, followup, collect (default), steer-backlog, interrupt
	// or queue.
	Mode string `json:"mode"`
	// DebounceMS is the debounce window. Default 1000; at most
	// limits.debounceMs.
	DebounceMS int `json:"debounceMs"`
	// Cap is the most messages queued per session. Default 20; at most
	// limits.queueCap.
	Cap int `json:"cap"`
	// Drop is old, new or summarize (default).
	Drop string `json:"drop"`
	// ByChannel overrides Mode per channel.
	ByChannel map[string]string `json:"byChannel"`
}

// Tool is an http or llm tool.
type Tool struct {
	// Type is "http" or "llm".
	Type string `json:"type"`
	// URL is an http tool's endpoint.
	URL string `json:"url"`
	// BaseURL is an llm tool's OpenAI-compatible API base (".../v1").
	BaseURL string `json:"base_url"`
	// Model is an llm tool's model.
	Model string `json:"model"`
	// APIKeyEnv names the environment variable holding an llm tool's key.
	APIKeyEnv string `json:"api_key_env"`
	// Timeout bounds a call when the node and workflow set none. Default:
	// the engine's (30s).
	Timeout Duration `json:"timeout"`
	// Retry is the tool's retry policy; nil means the built-in one per class.
	Retry *Retry `json:"retry"`
	// Breaker configures the tool's circuit breaker.
	Breaker Breaker `json:"breaker"`
}

// Retry is a tool's retry policy.
type Retry struct {
	// Max is the number of retries after the first attempt.
	Max int `json:"max"`
	// Backoff is exponential (default) or linear.
	Backoff string `json:"backoff"`
	// Delay is the first retry's delay. Default 500ms.
	Delay Duration `json:"delay"`
}

// Breaker configures a circuit breaker.
type Breaker struct {
	// Failures opens the breaker after that many consecutive failures.
	// Default 5.
	Failures int `json:"failures"`
	// Cooldown is how long it stays open. Default 30s.
	Cooldown Duration `json:"cooldown"`
}

// Channel is an outbound channel adapter.
type Channel struct {
	// Type is log (default) or webhook. A webhook channel needs
	// BATON_WEBHOOK_SECRET of at least 32 bytes under `baton serve`.
	Type string `json:"type"`
	// URL is a webhook channel's endpoint, an http(s) URL; the channel
	// connects to its host and port only and follows no redirect.
	URL string `json:"url,omitempty"`
}

// Callbacks configures execution callbacks.
type Callbacks struct {
	// AllowHosts are the hosts and ports callback_url may name
	// (engine.AllowList): "host" allows ports 80 and 443, "host:port" that
	// port only; "*.example.com" allows subdomains, "*" any host. Every
	// connection a callback makes is checked against it, and redirects are
	// never followed. Empty (the default) refuses every callback. When it
	// is not empty, `baton serve` requires BATON_CALLBACK_SECRET of at
	// least 32 bytes.
	AllowHosts []string `json:"allowHosts"`
}

// Duration is a time.Duration written as a Go duration string ("10s"),
// which may start with days ("7d", "1d12h"), or a number of milliseconds.
type Duration time.Duration

// UnmarshalJSON reads "10s" or 10000.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := parseDuration(s)
		if err != nil {
			return fmt.Errorf("invalid duration %q", s)
		}
		*d = Duration(v)
		return nil
	}
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("a duration is a string such as \"10s\" or a number of milliseconds")
	}
	*d = Duration(time.Duration(ms * float64(time.Millisecond)))
	return nil
}

// Default returns the configuration used when there is no file.
func Default() *Config {
	c := &Config{}
	c.applyDefaults()
	return c
}

// Load reads and validates the file at path.
func Load(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config file: %w", err)
	}
	c, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes JSON5 text, applies defaults and validates it.
func Parse(raw []byte) (*Config, error) {
	var generic any
	if err := json5.Unmarshal(raw, &generic); err != nil {
		return nil, fmt.Errorf("not valid JSON5: %w", err)
	}
	if generic == nil {
		generic = map[string]any{}
	}
	plain, err := json.Marshal(generic)
	if err != nil {
		return nil, fmt.Errorf("re-encoding: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.DisallowUnknownFields()
	c := &Config{}
	if err := dec.Decode(c); err != nil {
		return nil, err
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) applyDefaults() {
	if c.Agents.Defaults.MaxConcurrent == 0 {
		c.Agents.Defaults.MaxConcurrent = 4
	}
	if c.Lanes == nil {
		c.Lanes = map[string]Lane{}
	}
	for lane, n := range map[string]int{"subagent": 8, "cron": 2} {
		if _, ok := c.Lanes[lane]; !ok {
			c.Lanes[lane] = Lane{Limit: n}
		}
	}
	if c.Locks.Timeout == 0 {
		c.Locks.Timeout = Duration(10 * time.Minute)
	}
	if c.Locks.ReapInterval == 0 {
		c.Locks.ReapInterval = Duration(30 * time.Second)
	}
	q := &c.Messages.Queue
	if q.Mode == "" {
		q.Mode = "collect"
	}
	if q.DebounceMS == 0 {
		q.DebounceMS = 1000
	}
	if q.Cap == 0 {
		q.Cap = 20
	}
	if q.Drop == "" {
		q.Drop = "summarize"
	}
	if c.Channels == nil {
		c.Channels = map[string]Channel{"default": {Type: "log"}}
	}
	c.Limits = c.Limits.WithDefaults()
	c.applyServerDefaults()
	c.applyRetentionDefaults()
}

var queueModes = map[string]bool{"steer": true, "followup": true, "collect": true, "steer-backlog": true, "steer+backlog": true, "interrupt": true, "queue": true}

// Validate reports every problem of the configuration at once.
func (c *Config) Validate() error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if c.Agents.Defaults.MaxConcurrent < 1 {
		add("agents.defaults.maxConcurrent must be at least 1")
	}
	for lane, l := range c.Lanes {
		if l.Limit < 1 {
			add("lanes.%s must be at least 1", lane)
		}
		if l.PerTenant < 0 || l.PerTenant > l.Limit {
			add("lanes.%s.perTenant must be between 0 (no cap) and the lane's limit", lane)
		}
	}
	if c.Locks.Timeout < 0 || c.Locks.ReapInterval < 0 {
		add("locks durations must not be negative")
	}
	q := c.Messages.Queue
	if !queueModes[q.Mode] {
		add("messages.queue.mode %q is not steer, followup, collect, steer-backlog, interrupt or queue", q.Mode)
	}
	for ch, m := range q.ByChannel {
		if !queueModes[m] {
			add("messages.queue.byChannel.%s: unknown mode %q", ch, m)
		}
	}
	if q.Drop != "old" && q.Drop != "new" && q.Drop != "summarize" {
		add("messages.queue.drop %q is not old, new or summarize", q.Drop)
	}
	if q.DebounceMS < 0 || q.Cap < 0 {
		add("messages.queue.debounceMs and cap must not be negative")
	}
	problems = append(problems, c.validateLimits()...)
	problems = append(problems, c.validateRateLimits()...)
	problems = append(problems, c.validateServer()...)
	problems = append(problems, c.validateRetention()...)
	for _, name := range slices.Sorted(maps.Keys(c.Tools)) {
		t := c.Tools[name]
		switch t.Type {
		case engine.ToolTypeHTTP:
			if !strings.HasPrefix(t.URL, "http://") && !strings.HasPrefix(t.URL, "https://") {
				add("tools.%s.url must be an http(s) URL", name)
			}
		case engine.ToolTypeLLM:
			if t.BaseURL == "" || t.Model == "" {
				add("tools.%s: an llm tool needs base_url and model", name)
			}
		default:
			add("tools.%s.type %q is not http or llm", name, t.Type)
		}
		if t.Timeout < 0 || time.Duration(t.Timeout) > engine.MaxToolTimeout {
			add("tools.%s.timeout must be between 0 and %s", name, engine.MaxToolTimeout)
		}
		if r := t.Retry; r != nil {
			if r.Max < 0 {
				add("tools.%s.retry.max must not be negative", name)
			}
			if r.Backoff != "" && r.Backoff != engine.BackoffExponential && r.Backoff != engine.BackoffLinear {
				add("tools.%s.retry.backoff %q is not exponential or linear", name, r.Backoff)
			}
		}
		if t.Breaker.Failures < 0 || t.Breaker.Cooldown < 0 {
			add("tools.%s.breaker values must not be negative", name)
		}
	}
	for name, ch := range c.Channels {
		if ch.Type != "" && ch.Type != "log" && ch.Type != "webhook" {
			add("channels.%s.type %q is not log or webhook", name, ch.Type)
		}
		if ch.Type == "webhook" {
			if _, err := engine.AllowListOfURL(ch.URL); err != nil {
				add("channels.%s.url: %v", name, err)
			}
		}
	}
	for _, h := range c.Callbacks.AllowHosts {
		if _, err := engine.ParseAllowList([]string{h}); err != nil {
			add("callbacks.%v", err)
		}
	}
	if len(problems) > 0 {
		return errors.New("invalid configuration: " + strings.Join(problems, "; "))
	}
	return nil
}

// Upper bounds of some limits: ids sit in btree indexes (a row of one must
// fit a third of a page), and durations must fit time.Duration sums.
const (
	maxIDBytes = 1000
	maxLimitMS = 86_400_000
)

// validateLimits checks the limits section, and the global queue settings
// against it.
func (c *Config) validateLimits() []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	l := c.Limits
	if err := l.Check(); err != nil {
		add("%v", err)
	}
	if l.IDBytes > maxIDBytes {
		add("limits.idBytes must be at most %d", maxIDBytes)
	}
	if l.DebounceMS > maxLimitMS {
		add("limits.debounceMs must be at most %d", maxLimitMS)
	}
	if l.WaitTimeoutMS > maxLimitMS {
		add("limits.waitTimeoutMs must be at most %d", maxLimitMS)
	}
	q := c.Messages.Queue
	if l.QueueCap > 0 && q.Cap > l.QueueCap {
		add("messages.queue.cap must be at most limits.queueCap (%d)", l.QueueCap)
	}
	if l.DebounceMS > 0 && q.DebounceMS > l.DebounceMS {
		add("messages.queue.debounceMs must be at most limits.debounceMs (%d)", l.DebounceMS)
	}
	return problems
}

// ToolSpec returns the engine's spec of a configured tool.
func (t Tool) ToolSpec() engine.ToolSpec {
	spec := engine.ToolSpec{
		Type: t.Type, URL: t.URL, BaseURL: t.BaseURL, Model: t.Model, APIKeyEnv: t.APIKeyEnv,
		Timeout: time.Duration(t.Timeout),
		Breaker: engine.BreakerSettings{Failures: t.Breaker.Failures, Cooldown: time.Duration(t.Breaker.Cooldown)},
	}
	if t.Retry != nil {
		spec.Retry = &workflow.RetryPolicy{Max: t.Retry.Max, Backoff: t.Retry.Backoff, DelayMS: time.Duration(t.Retry.Delay).Milliseconds()}
	}
	return spec
}

// RegisterTools registers every configured tool in tools, beside any Go
// tools already there (a configured tool replaces a Go tool of its name).
func (c *Config) RegisterTools(tools *engine.Tools) error {
	for _, name := range slices.Sorted(maps.Keys(c.Tools)) {
		if err := tools.RegisterSpec(name, c.Tools[name].ToolSpec()); err != nil {
			return err
		}
	}
	return nil
}

// LaneLimits returns the lanes' limits for engine.Config.LaneLimits:
// agents.defaults.maxConcurrent as "main" and every lanes entry.
func (c *Config) LaneLimits() map[string]int {
	out := map[string]int{engine.LaneMain: c.Agents.Defaults.MaxConcurrent}
	for k, v := range c.Lanes {
		out[k] = v.Limit
	}
	return out
}

// LanePerTenant returns the per-tenant caps of the lanes that have one, for
// engine.Config.LanePerTenant.
func (c *Config) LanePerTenant() map[string]int {
	out := map[string]int{}
	for k, v := range c.Lanes {
		if v.PerTenant > 0 {
			out[k] = v.PerTenant
		}
	}
	return out
}

// Lane is an operator lane: how many of its executions run at once, and
// how many of those one tenant may hold (0: no cap of its own). In the file
// it is a number (the limit) or {limit, perTenant}.
type Lane struct {
	Limit     int `json:"limit"`
	PerTenant int `json:"perTenant"`
}

// UnmarshalJSON accepts a number (the limit) or an object.
func (l *Lane) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		*l = Lane{Limit: n}
		return nil
	}
	type plain Lane
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p plain
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("a lane is a number (its limit) or {limit, perTenant}: %w", err)
	}
	*l = Lane(p)
	return nil
}
