package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/config"
	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/engine/workflow"
)

// DESIGN.md's example file, verbatim.
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
	require.Equal(t, map[string]int{"subagent": 8, "cron": 2}, c.Lanes)
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
	require.Equal(t, 8, c.Lanes["subagent"])
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
		"tool too slow": {`{tools: {x: {type: "http", url: "http://x", timeout: "2m"}}}`, "timeout must be between"},
	} {
		_, err := config.Parse([]byte(tc.raw))
		require.ErrorContains(t, err, tc.want, name)
	}
}
