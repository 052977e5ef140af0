package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/config"
	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/engine/workflow"
)

// An example config file in the shape docs/configuration.md shows.
const designExample = `{
  agents:   { defaults: { maxConcurrent: 4 } },          // limit of lane ` + "`main`" + `
  lanes:    { subagent: 8, cron: 2 },                    // other lanes; unlisted lanes get 1
  locks:    { timeout: "10m", reapInterval: "30s" },
  messages: { queue: { mode: "collect", debounceMs: 1000, cap: 20, drop: "summarize",
                       byChannel: { whatsapp: "collect" } } },
  tools:    { document_processor: { type: "http", url: "http://127.0.0.1:9000/process",
                                    timeout: "10s", retry: { max: 3, backoff: "exponential" },
                                    breaker: { failures: 5, cooldown: "30s" } } },
  channels: { default: { type: "log" } },                // log | webhook
  callbacks:{ allowHosts: ["127.0.0.1"] },
}`

func TestParseDesignExample(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(designExample))
	require.NoError(t, err)
	require.Equal(t, 4, c.Agents.Defaults.MaxConcurrent)
	require.Equal(t, map[string]config.Lane{"subagent": {Limit: 8}, "cron": {Limit: 2}}, c.Lanes)
	require.Equal(t, config.Duration(10*time.Minute), c.Locks.Timeout)
	require.Equal(t, "collect", c.Messages.Queue.ByChannel["whatsapp"])
	require.Equal(t, []string{"127.0.0.1"}, c.Callbacks.AllowHosts)
	spec := c.Tools["document_processor"].ToolSpec()
	require.Equal(t, engine.ToolSpec{
		Type: "http", URL: "http://127.0.0.1:9000/process", Timeout: 10 * time.Second,
		Retry:   &workflow.RetryPolicy{Max: 3, Backoff: "exponential"},
		Breaker: engine.BreakerSettings{Failures: 5, Cooldown: 30 * time.Second},
	}, spec)
	tools := engine.NewTools()
	require.NoError(t, c.RegisterTools(tools))
	require.True(t, tools.HasTool("document_processor"))
}

func TestParsePlainJSONAndDefaults(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`{"tools": {"chat": {"type": "llm", "base_url": "http://127.0.0.1:1/v1", "model": "m", "api_key_env": "K", "timeout": 2500}}}`))
	require.NoError(t, err)
	require.Equal(t, 4, c.Agents.Defaults.MaxConcurrent)
	require.Equal(t, 8, c.Lanes["subagent"].Limit)
	require.Equal(t, config.Duration(30*time.Second), c.Locks.ReapInterval)
	require.Equal(t, "summarize", c.Messages.Queue.Drop)
	require.Equal(t, 2500*time.Millisecond, c.Tools["chat"].ToolSpec().Timeout)
	require.Empty(t, c.Callbacks.AllowHosts)

	empty, err := config.Parse([]byte(`// nothing but a comment
	{}`))
	require.NoError(t, err)
	require.Equal(t, config.Default(), empty)
}

func TestParseRejectsBadFiles(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ raw, want string }{
		"syntax":        {`{tools: }`, "not valid JSON5"},
		"unknown key":   {`{tool: {}}`, `unknown field "tool"`},
		"tool type":     {`{tools: {x: {type: "grpc"}}}`, `tools.x.type "grpc" is not http or llm`},
		"tool url":      {`{tools: {x: {type: "http", url: "ftp://x"}}}`, "tools.x.url must be an http(s) URL"},
		"backoff":       {`{tools: {x: {type: "http", url: "http://x", retry: {max: 1, backoff: "cubic"}}}}`, "not exponential or linear"},
		"duration":      {`{locks: {timeout: "ten minutes"}}`, "invalid duration"},
		"queue mode":    {`{messages: {queue: {mode: "shout"}}}`, `mode "shout"`},
		"allowHosts":    {`{callbacks: {allowHosts: ["http://x"]}}`, "must be a host name"},
		"lane limit":    {`{lanes: {main2: -1}}`, "lanes.main2 must be at least 1"},
		"lane cap":      {`{lanes: {main: {limit: 4, perTenant: 5}}}`, "lanes.main.perTenant must be between"},
		"lane key":      {`{lanes: {main: {limit: 4, per: 2}}}`, `unknown field "per"`},
		"tool too slow": {`{tools: {x: {type: "http", url: "http://x", timeout: "2m"}}}`, "timeout must be between"},
	} {
		_, err := config.Parse([]byte(tc.raw))
		require.ErrorContains(t, err, tc.want, name)
	}
}

// A lane is a limit or {limit, perTenant}; main's entry overrides
// agents.defaults.maxConcurrent.
func TestLaneForms(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`{lanes: {main: {limit: 16, perTenant: 4}, batch: 3}}`))
	require.NoError(t, err)
	require.Equal(t, 16, c.LaneLimits()["main"])
	require.Equal(t, 3, c.LaneLimits()["batch"])
	require.Equal(t, map[string]int{"main": 4}, c.LanePerTenant())
}

// The limits section maps onto workflow.Limits, takes the defaults for
// what it leaves out, and refuses negative or out-of-range values by name.
func TestLimitsSection(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`{
  limits: { idBytes: 100, nodes: 50, queueCap: 40, debounceMs: 60000, waitTimeoutMs: 5000,
            historyEntries: 10, variablesBytes: 65536, definitionBytes: 32768, renderBytes: 1024,
            conditionBytes: 512, conditionCost: 5000 },
  messages: { queue: { cap: 40, debounceMs: 60000 } },
}`))
	require.NoError(t, err)
	require.Equal(t, workflow.Limits{IDBytes: 100, Nodes: 50, QueueCap: 40, DebounceMS: 60000, WaitTimeoutMS: 5000,
		HistoryEntries: 10, VariablesBytes: 65536, DefinitionBytes: 32768, RenderBytes: 1024,
		ConditionBytes: 512, ConditionCost: 5000}.WithDefaults(), c.Limits)

	partial, err := config.Parse([]byte(`{limits: {idBytes: 64}}`))
	require.NoError(t, err)
	want := workflow.DefaultLimits()
	want.IDBytes = 64
	require.Equal(t, want, partial.Limits)
	require.Equal(t, workflow.DefaultLimits(), config.Default().Limits)

	for name, tc := range map[string]struct{ raw, want string }{
		"negative nodes":       {`{limits: {nodes: -1}}`, "limits.nodes must not be negative"},
		"negative idBytes":     {`{limits: {idBytes: -5}}`, "limits.idBytes must not be negative"},
		"negative wait":        {`{limits: {waitTimeoutMs: -1}}`, "limits.waitTimeoutMs must not be negative"},
		"negative history":     {`{limits: {historyEntries: -1}}`, "limits.historyEntries must not be negative"},
		"negative cost":        {`{limits: {conditionCost: -1}}`, "conditionCost"},
		"unknown limit":        {`{limits: {nodez: 1}}`, `unknown field "nodez"`},
		"idBytes too large":    {`{limits: {idBytes: 5000}}`, "limits.idBytes must be at most 1000"},
		"debounceMs too large": {`{limits: {debounceMs: 9000000000000}}`, "limits.debounceMs must be at most"},
		"wait too large":       {`{limits: {waitTimeoutMs: 9e15}}`, "limits.waitTimeoutMs must be at most"},
		"queue cap over":       {`{limits: {queueCap: 10}, messages: {queue: {cap: 11}}}`, "messages.queue.cap must be at most limits.queueCap (10)"},
		"queue cap default":    {`{messages: {queue: {cap: 1001}}}`, "messages.queue.cap must be at most limits.queueCap (1000)"},
		"queue debounce over":  {`{messages: {queue: {debounceMs: 3600001}}}`, "messages.queue.debounceMs must be at most limits.debounceMs"},
	} {
		_, err := config.Parse([]byte(tc.raw))
		require.ErrorContains(t, err, tc.want, name)
	}
}

// callbacks.allowHosts takes hosts with or without a port; a malformed
// entry, and a webhook channel without an http(s) url, are refused by name.
func TestCallbacksAndChannelsSection(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`{callbacks: {allowHosts: ["api.example.com", "hooks.example.com:8443", "*.trusted.test", "[::1]:9000"]},
	  channels: {default: {type: "webhook", url: "https://chat.example:8443/outbound"}}}`))
	require.NoError(t, err)
	require.Len(t, c.Callbacks.AllowHosts, 4)
	for raw, want := range map[string]string{
		`{callbacks: {allowHosts: ["x:0"]}}`:                       `callbacks.allowHosts entry "x:0" has a port that is not a number from 1 to 65535`,
		`{callbacks: {allowHosts: ["x:http"]}}`:                    `callbacks.allowHosts entry "x:http"`,
		`{callbacks: {allowHosts: ["a.*.test"]}}`:                  `may only start with "*."`,
		`{callbacks: {allowHosts: ["x/cb"]}}`:                      "must be a host name or host:port",
		`{channels: {default: {type: "webhook"}}}`:                 `channels.default.url: "" must be an http(s) URL`,
		`{channels: {default: {type: "webhook", url: "ftp://x"}}}`: `channels.default.url: "ftp://x" must be an http(s) URL`,
	} {
		_, err := config.Parse([]byte(raw))
		require.ErrorContains(t, err, want, raw)
	}
}
