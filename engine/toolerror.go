package engine

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/batonrun/baton/engine/workflow"
)

// Error codes written on failed executions.
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

// ToolErrorClass is how a tool failure is handled.
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

// tenantMessage is the error's text as a tenant reads it (in the
// execution's error and in workflow.step_retry events): the addresses of
// what the tool connected to — URLs, host:port pairs, the names it looked
// up — are replaced by <url> and <address>. The process log has them, and
// not the tool's answer (logMessage).
func (e *ToolError) tenantMessage() string { return redactAddresses(e.Err) }

// logMessage is Error() as the process log carries it: the tool's answers
// the error quotes (answerError) replaced by their length. The addresses
// the tool connected to stay, for the operator. A Go tool's own error is
// told as the tool wrote it: the program that registers the tool keeps
// tenant data out of its errors.
func (e *ToolError) logMessage() string {
	if e.HTTPStatus != 0 {
		return fmt.Sprintf("%s error (HTTP %d): %s", e.Class, e.HTTPStatus, withoutAnswers(e.Err))
	}
	return fmt.Sprintf("%s error: %s", e.Class, withoutAnswers(e.Err))
}

// withoutAnswers returns err's text with the answer its chain quotes, if
// any, replaced by the answer's length.
func withoutAnswers(err error) string {
	msg := err.Error()
	var answer *answerError
	if errors.As(err, &answer) {
		msg = strings.Replace(msg, answer.Error(), answer.logMessage(), 1)
	}
	return msg
}

var (
	// urlPattern is any absolute URL in an error's text.
	urlPattern = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.\-]*://[^\s"'<>]+`)
	// hostPortPattern is an IPv4 or bracketed IPv6 address with a port.
	hostPortPattern = regexp.MustCompile(`\b\d{1,3}(?:\.\d{1,3}){3}:\d{1,5}\b|\[[0-9A-Fa-f:.]+\](?::\d{1,5})?`)
	// lookupPattern is a name lookup in a resolver's message.
	lookupPattern = regexp.MustCompile(`\blookup [^\s:]+`)
)

// redactAddresses returns err's text without the addresses its chain names:
// the URLs of *url.Error, the local and remote addresses of *net.OpError,
// the name and server of *net.DNSError, and then any URL, IP:port or name
// lookup left in the text (a Go tool's own message, an error flattened with
// %v, a tool's answer quoted in it).
func redactAddresses(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	type replacement struct{ old, new string }
	var found []replacement
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case *url.Error:
			found = append(found, replacement{e.URL, "<url>"})
		case *net.OpError:
			for _, a := range []net.Addr{e.Source, e.Addr} {
				if a != nil {
					found = append(found, replacement{a.String(), "<address>"})
				}
			}
		case *net.DNSError:
			found = append(found, replacement{"lookup " + e.Name, "lookup <address>"})
			if e.Server != "" {
				found = append(found, replacement{" on " + e.Server, ""})
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			if next := u.Unwrap(); next != nil {
				walk(next)
			}
		case interface{ Unwrap() []error }:
			for _, next := range u.Unwrap() {
				walk(next)
			}
		}
	}
	walk(err)
	// Longest first, so that a URL goes before the host:port inside it.
	slices.SortFunc(found, func(a, b replacement) int { return cmp.Compare(len(b.old), len(a.old)) })
	for _, r := range found {
		if r.old != "" {
			msg = strings.ReplaceAll(msg, r.old, r.new)
		}
	}
	msg = urlPattern.ReplaceAllString(msg, "<url>")
	msg = lookupPattern.ReplaceAllString(msg, "lookup <address>")
	return hostPortPattern.ReplaceAllString(msg, "<address>")
}

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

// defaultPolicy is the built-in policy of a class when neither the node nor
// the tool sets one.
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
