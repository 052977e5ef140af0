package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// maxToolAnswer bounds the body read from a tool.
const maxToolAnswer = 8 << 20

// httpTool returns a tool that POSTs {tool_id, execution_id, node_id,
// idempotency_key, config, inputs} to url and takes its JSON object answer
// as the node's output.
func httpTool(url string, client *http.Client) ToolFunc {
	return func(ctx context.Context, call ToolCall) (map[string]any, error) {
		body := map[string]any{
			"tool_id": call.ToolID, "execution_id": call.ExecutionID, "node_id": call.NodeID,
			"idempotency_key": call.IdempotencyKey, "config": orEmpty(call.Config), "inputs": orEmpty(call.Inputs),
		}
		raw, err := postJSON(ctx, client, url, body, map[string]string{"Idempotency-Key": call.IdempotencyKey, "X-Tenant-ID": call.TenantID})
		if err != nil {
			return nil, err
		}
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil || out == nil {
			return nil, &ToolError{Class: ClassValidation, Err: &answerError{"the tool answered something other than a JSON object: %s", raw}}
		}
		return out, nil
	}
}

// postJSON POSTs body and returns a 2xx answer's body, or a classified
// *ToolError.
func postJSON(ctx context.Context, client *http.Client, url string, body any, headers map[string]string) ([]byte, error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, &ToolError{Class: ClassValidation, Err: fmt.Errorf("encoding the request: %w", err)}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return nil, &ToolError{Class: ClassValidation, Err: fmt.Errorf("building the request: %w", err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, &ToolError{Class: ClassTimeout, Err: fmt.Errorf("%w: %v", errToolTimeout, err)}
		}
		if errors.Is(err, context.Canceled) {
			return nil, err
		}
		// err (a *url.Error) names the URL for the server log; tenants read
		// it without (ToolError.tenantMessage).
		return nil, &ToolError{Class: ClassService, Err: fmt.Errorf("calling the tool: %w", err)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxToolAnswer))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, &ToolError{Class: ClassTimeout, HTTPStatus: resp.StatusCode, Err: fmt.Errorf("%w reading the answer: %v", errToolTimeout, err)}
		}
		return nil, &ToolError{Class: ClassService, HTTPStatus: resp.StatusCode, Err: fmt.Errorf("reading the answer: %w", err)}
	}
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		return raw, nil
	case s >= 500, s == http.StatusRequestTimeout, s == http.StatusTooManyRequests:
		return nil, &ToolError{Class: ClassService, HTTPStatus: s, RetryAfter: retryAfter(resp.Header.Get("Retry-After")), Err: &answerError{"the tool answered %s", raw}}
	case s == http.StatusUnprocessableEntity:
		return nil, &ToolError{Class: ClassValidation, HTTPStatus: s, Err: &answerError{"the tool rejected its input: %s", raw}}
	default:
		return nil, &ToolError{Class: ClassClient, HTTPStatus: s, Err: &answerError{"the tool answered %s", raw}}
	}
}

// retryAfter parses a Retry-After header given in seconds.
func retryAfter(h string) time.Duration {
	if n, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && n > 0 {
		return min(time.Duration(n)*time.Second, maxBackoff)
	}
	return 0
}

// answerError is an error that quotes a tool's answer, which is the
// tenant's data: the tenant reads the start of it (snippet), the process
// log its length (ToolError.logMessage).
type answerError struct {
	// format has one %s, for the answer.
	format string
	answer []byte
}

func (e *answerError) Error() string { return fmt.Sprintf(e.format, snippet(e.answer)) }

// logMessage is the error with the answer replaced by its length.
func (e *answerError) logMessage() string {
	return fmt.Sprintf(e.format, withheld(string(e.answer)))
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		return "an empty body"
	}
	return strconv.Quote(s)
}

// llmTool returns a tool that asks an OpenAI-compatible chat completions API
// (POST {base_url}/chat/completions) for an answer to the node's "prompt"
// input, after the execution's conversation_history and an optional
// "system" input. The node's config may set "model" and "temperature". Its
// output is {content, role, model, finish_reason, usage}.
func llmTool(spec ToolSpec, client *http.Client) ToolFunc {
	endpoint := strings.TrimRight(spec.BaseURL, "/") + "/chat/completions"
	return func(ctx context.Context, call ToolCall) (map[string]any, error) {
		prompt, _ := call.Inputs["prompt"].(string)
		if prompt == "" {
			return nil, &ToolError{Class: ClassValidation, Err: errors.New(`an llm task needs a text "prompt" input`)}
		}
		var messages []map[string]any
		if system, _ := call.Inputs["system"].(string); system != "" {
			messages = append(messages, map[string]any{"role": "system", "content": system})
		}
		messages = append(messages, historyMessages(call.ConversationHistory)...)
		messages = append(messages, map[string]any{"role": "user", "content": prompt})
		model := spec.Model
		if m, _ := call.Config["model"].(string); m != "" {
			model = m
		}
		req := map[string]any{"model": model, "messages": messages}
		if t, ok := call.Config["temperature"].(float64); ok {
			req["temperature"] = t
		}
		headers := map[string]string{"Idempotency-Key": call.IdempotencyKey}
		if spec.APIKeyEnv != "" {
			key := os.Getenv(spec.APIKeyEnv)
			if key == "" {
				return nil, &ToolError{Class: ClassValidation, Err: fmt.Errorf("environment variable %s (the llm tool's api_key_env) is not set", spec.APIKeyEnv)}
			}
			headers["Authorization"] = "Bearer " + key
		}
		raw, err := postJSON(ctx, client, endpoint, req, headers)
		if err != nil {
			return nil, err
		}
		var answer struct {
			Model   string `json:"model"`
			Choices []struct {
				Message struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
		}
		if err := json.Unmarshal(raw, &answer); err != nil || len(answer.Choices) == 0 {
			return nil, &ToolError{Class: ClassValidation, Err: &answerError{"the chat completions answer has no choices: %s", raw}}
		}
		c := answer.Choices[0]
		return map[string]any{
			"content": c.Message.Content, "role": c.Message.Role, "model": answer.Model,
			"finish_reason": c.FinishReason, "usage": answer.Usage,
		}, nil
	}
}

// historyMessages turns conversation_history entries into chat messages.
// An entry is {role, content}, or {direction: in|out, body|content|text}, or
// a plain string (a user message); anything else is skipped.
func historyMessages(raw json.RawMessage) []map[string]any {
	var entries []any
	if len(raw) == 0 || json.Unmarshal(raw, &entries) != nil {
		return nil
	}
	var out []map[string]any
	for _, e := range entries {
		switch v := e.(type) {
		case string:
			out = append(out, map[string]any{"role": "user", "content": v})
		case map[string]any:
			role, _ := v["role"].(string)
			if role == "" {
				switch v["direction"] {
				case "in":
					role = "user"
				case "out":
					role = "assistant"
				}
			}
			var content string
			for _, k := range []string{"content", "body", "text"} {
				if s, ok := v[k].(string); ok {
					content = s
					break
				}
			}
			if role != "" && content != "" {
				out = append(out, map[string]any{"role": role, "content": content})
			}
		}
	}
	return out
}
