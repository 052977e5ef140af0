package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/batonrun/baton/engine/workflow"
)

// Error codes written on failed executions (seed 003, 7.2).
const (
	// CodeStepFailed is a node that could not run: a bad condition, an
	// unknown node, a step job that ran out of attempts.
	CodeStepFailed = "workflow.execute.step_failed"
	// CodeToolFailed is a tool that answered with an error it will repeat
	// (4xx, an invalid answer) or a Go tool's error after its retries.
	CodeToolFailed = "tool.execute.failed"
	// CodeServiceUnavailable is a tool that kept answering 5xx or could not
	// be reached after its retries.
	CodeServiceUnavailable = "workflow.service.unavailable"
	// CodeTimeout is a tool that kept timing out after its retries.
	CodeTimeout = "workflow.execute.timeout"
)

// ToolErrorClass is how a tool failure is handled (seed 003, 7.3).
type ToolErrorClass string

// Tool error classes.
const (
	// ClassValidation is an answer or input that can never work (a non-object
	// answer, 422): failed at once, never retried, not a breaker failure.
	ClassValidation ToolErrorClass = "validation"
	// ClassClient is a 4xx answer: failed at once, not a breaker failure.
	ClassClient ToolErrorClass = "client"
	// ClassTimeout is a call that ran out of time: retried (default 3,
	// exponential) and counted by the breaker.
	ClassTimeout ToolErrorClass = "timeout"
	// ClassService is a 5xx, 408 or 429 answer or an unreachable tool:
	// retried (default 5, exponential) and counted by the breaker.
	ClassService ToolErrorClass = "service"
	// ClassStep is any other error of a Go tool: retried (default 3, linear)
	// and counted by the breaker.
	ClassStep ToolErrorClass = "step"
)

// ToolError is a classified tool failure. Go tools may return one (or wrap
// one) to choose how their failure is handled; any other error is ClassStep.
type ToolError struct {
	// Class decides retries and breaker accounting.
	Class ToolErrorClass
	// HTTPStatus is the tool's HTTP status, when it answered one.
	HTTPStatus int
	// RetryAfter is the delay the tool asked for (Retry-After), if any.
	RetryAfter time.Duration
	// Err is the underlying error.
	Err error
}

func (e *ToolError) Error() string {
	if e.HTTPStatus != 0 {
		return fmt.Sprintf("%s error (HTTP %d): %v", e.Class, e.HTTPStatus, e.Err)
	}
	return fmt.Sprintf("%s error: %v", e.Class, e.Err)
}

func (e *ToolError) Unwrap() error { return e.Err }

// Retryable reports whether the class is retried.
func (c ToolErrorClass) Retryable() bool {
	return c == ClassTimeout || c == ClassService || c == ClassStep
}

// classify returns err as a *ToolError.
func classify(err error) *ToolError {
	var te *ToolError
	if errors.As(err, &te) {
		return te
	}
	if errors.Is(err, errToolTimeout) {
		return &ToolError{Class: ClassTimeout, Err: err}
	}
	return &ToolError{Class: ClassStep, Err: err}
}

var errToolTimeout = errors.New("tool call timed out")

// code is the execution error code of a failure that will not be retried.
func (e *ToolError) code() string {
	switch e.Class {
	case ClassService:
		return CodeServiceUnavailable
	case ClassTimeout:
		return CodeTimeout
	}
	return CodeToolFailed
}

// Backoff kinds of a RetryPolicy.
const (
	BackoffExponential = "exponential"
	BackoffLinear      = "linear"
)

// defaultPolicy is the seed's policy of a class when neither the node nor
// the tool sets one (seed 003, 7.3).
func defaultPolicy(c ToolErrorClass) workflow.RetryPolicy {
	switch c {
	case ClassService:
		return workflow.RetryPolicy{Max: 5, Backoff: BackoffExponential}
	case ClassTimeout:
		return workflow.RetryPolicy{Max: 3, Backoff: BackoffExponential}
	case ClassStep:
		return workflow.RetryPolicy{Max: 3, Backoff: BackoffLinear}
	}
	return workflow.RetryPolicy{}
}

// maxBackoff caps one retry's delay.
const maxBackoff = 5 * time.Minute

// retryDelay is how long to wait before retry number n (1-based).
func retryDelay(p workflow.RetryPolicy, n int) time.Duration {
	base := 500 * time.Millisecond
	if p.DelayMS > 0 {
		base = time.Duration(min(p.DelayMS, maxBackoff.Milliseconds())) * time.Millisecond
	}
	var d time.Duration
	if p.Backoff == BackoffLinear {
		d = base * time.Duration(n)
	} else {
		d = base << min(max(n-1, 0), 20)
	}
	return min(d, maxBackoff)
}
