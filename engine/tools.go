package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/batonrun/baton/engine/workflow"
)

// ToolCall is what a tool receives for one call.
type ToolCall struct {
	// ToolID is the tool's registered name.
	ToolID string
	// TenantID is the tenant of the execution calling the tool.
	TenantID string
	// ExecutionID is the execution's external id.
	ExecutionID string
	// NodeID is the task node calling the tool.
	NodeID string
	// Attempt is Baton's per-node attempt number, from 1; a retry after a
	// retryable failure increases it.
	Attempt int
	// IdempotencyKey is "execution:node:attempt"; a call repeated within the
	// same attempt (a worker that died mid-call) repeats the key, so the tool
	// can make its effect happen once.
	IdempotencyKey string
	// Config is the node's templated config.
	Config map[string]any
	// Inputs are the node's templated inputs.
	Inputs map[string]any
	// ConversationHistory is the execution's conversation_history (a JSON
	// array), for tools such as llm that need it.
	ConversationHistory json.RawMessage
}

// ToolFunc is a Go-registered tool. Its result becomes the node's output.
// Returning a *ToolError chooses how the failure is handled; any other error
// is a retryable step error.
type ToolFunc func(ctx context.Context, call ToolCall) (map[string]any, error)

// Tool types of a ToolSpec.
const (
	ToolTypeGo   = "go"
	ToolTypeHTTP = "http"
	ToolTypeLLM  = "llm"
)

// ToolSpec describes how a tool is called and protected.
type ToolSpec struct {
	// Type is "go" (a Go function), "http" or "llm". Empty means "go".
	Type string
	// URL is an http tool's endpoint, called with POST.
	URL string
	// BaseURL, Model and APIKeyEnv configure an llm tool: an
	// OpenAI-compatible chat completions API at BaseURL (".../v1"), the
	// model name, and the environment variable holding the API key (read at
	// call time; empty means no Authorization header).
	BaseURL, Model, APIKeyEnv string
	// Timeout bounds a call when neither the node nor the workflow sets a
	// timeout. Zero means the engine's ToolTimeout.
	Timeout time.Duration
	// Retry is the tool's retry policy when the node sets none. Nil means
	// the built-in policy of each error class (service 5, timeout 3, step 3).
	Retry *workflow.RetryPolicy
	// Breaker configures the tool's circuit breaker.
	Breaker BreakerSettings
}

// BreakerSettings configure a tool's circuit breaker.
type BreakerSettings struct {
	// Failures is the number of consecutive retryable failures (timeouts,
	// 5xx, unreachable, Go tool errors) that open the breaker. Zero means 5.
	Failures int
	// Cooldown is how long the breaker stays open before one half-open
	// probe call is let through. Zero means 30 seconds.
	Cooldown time.Duration
}

type registeredTool struct {
	fn      ToolFunc
	spec    ToolSpec
	breaker *toolBreaker
}

// Tools is a registry of tools, safe for concurrent use. Each tool has its
// own circuit breaker, kept in this process: breakers are not shared between
// baton processes.
type Tools struct {
	mu     sync.RWMutex
	tools  map[string]*registeredTool
	client *http.Client
}

var _ workflow.ToolChecker = (*Tools)(nil)

// NewTools returns an empty registry whose http and llm tools use
// http.DefaultClient's transport.
func NewTools() *Tools { return &Tools{tools: map[string]*registeredTool{}, client: &http.Client{}} }

// SetHTTPClient sets the client http and llm tools registered afterwards
// use. Nil is ignored.
func (t *Tools) SetHTTPClient(c *http.Client) {
	if c != nil {
		t.mu.Lock()
		t.client = c
		t.mu.Unlock()
	}
}

// Register adds or replaces a Go tool with the default spec (engine
// timeout, the built-in retry policies, a breaker of 5 failures and 30 s).
func (t *Tools) Register(name string, fn ToolFunc) {
	t.RegisterFunc(name, fn, ToolSpec{Type: ToolTypeGo})
}

// RegisterFunc adds or replaces a Go tool with its spec's timeout, retry
// policy and breaker settings.
func (t *Tools) RegisterFunc(name string, fn ToolFunc, spec ToolSpec) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tools[name] = &registeredTool{fn: fn, spec: spec, breaker: newToolBreaker(name, spec.Breaker)}
}

// RegisterSpec adds or replaces an http or llm tool described by spec.
func (t *Tools) RegisterSpec(name string, spec ToolSpec) error {
	t.mu.RLock()
	client := t.client
	t.mu.RUnlock()
	var fn ToolFunc
	switch spec.Type {
	case ToolTypeHTTP:
		if spec.URL == "" {
			return fmt.Errorf("tool %s: an http tool needs a url", name)
		}
		fn = httpTool(spec.URL, client)
	case ToolTypeLLM:
		if spec.BaseURL == "" || spec.Model == "" {
			return fmt.Errorf("tool %s: an llm tool needs base_url and model", name)
		}
		fn = llmTool(spec, client)
	default:
		return fmt.Errorf("tool %s: type %q is not http or llm (Go tools are registered with Register)", name, spec.Type)
	}
	t.RegisterFunc(name, fn, spec)
	return nil
}

// isLLM reports whether the node nodeID of def is a task calling an llm
// tool.
func (t *Tools) isLLM(nodeID string, def *workflow.Definition) bool {
	node := def.Node(nodeID)
	if node == nil || node.Type != workflow.NodeTask {
		return false
	}
	rt, ok := t.get(node.Task)
	return ok && rt.spec.Type == ToolTypeLLM
}

// HasTool reports whether a tool is registered under name.
func (t *Tools) HasTool(name string) bool {
	_, ok := t.get(name)
	return ok
}

func (t *Tools) get(name string) (*registeredTool, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	rt, ok := t.tools[name]
	return rt, ok
}

// BreakerStatus is a tool's circuit breaker as this process sees it.
type BreakerStatus struct {
	// Tool is the tool's name.
	Tool string
	// State is "closed", "half-open" or "open".
	State string
	// ConsecutiveFailures counts retryable failures since the last success.
	ConsecutiveFailures uint32
	// OpenUntil is when an open breaker lets its probe through; zero unless
	// open.
	OpenUntil time.Time
}

// Breakers returns every tool's breaker, sorted by tool name, for metrics
// and monitoring. The state is this process's only.
func (t *Tools) Breakers() []BreakerStatus {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]BreakerStatus, 0, len(t.tools))
	for name, rt := range t.tools {
		out = append(out, rt.breaker.status(name))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tool < out[j].Tool })
	return out
}
