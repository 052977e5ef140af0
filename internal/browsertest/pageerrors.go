package browsertest

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
)

// pageErrors records what a page reports as going wrong: uncaught exceptions
// and unhandled rejections, console.error and console.assert calls, errors in
// the browser's log (a resource answered 404, a script blocked by the content
// security policy) and network requests that failed.
//
// listen runs on chromedp's goroutine that reads the tab's messages, before
// the next message is read, so an event the browser sent before its answer to
// a command is recorded by the time that command returns.
type pageErrors struct {
	mu       sync.Mutex
	errors   []string
	allowed  []string
	requests map[network.RequestID]string // "METHOD url" of requests in flight
}

// newPageErrors returns an empty record.
func newPageErrors() *pageErrors {
	return &pageErrors{requests: make(map[network.RequestID]string)}
}

// listen records ev when it reports an error. It must return quickly and
// never call the browser: see chromedp.Listen.
func (p *pageErrors) listen(ev any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		p.errors = append(p.errors, exceptionText(ev.ExceptionDetails))
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			p.errors = append(p.errors, consoleText(ev))
		}
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError && !isGuessedFavicon(ev.Entry.URL) {
			p.errors = append(p.errors, logText(ev.Entry))
		}
	case *network.EventRequestWillBeSent:
		if ev.Request != nil {
			p.requests[ev.RequestID] = ev.Request.Method + " " + ev.Request.URL
		}
	case *network.EventLoadingFinished:
		delete(p.requests, ev.RequestID)
	case *network.EventLoadingFailed:
		request, ok := p.requests[ev.RequestID]
		delete(p.requests, ev.RequestID)
		if !ok {
			request = "request " + string(ev.RequestID)
		}
		// A request cancelled on purpose, by a navigation or by the page
		// itself, did not fail.
		if !ev.Canceled {
			p.errors = append(p.errors, failedRequestText(request, ev))
		}
	}
}

// all returns a copy of every error recorded.
func (p *pageErrors) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.errors...)
}

// allow adds substrings that mark an error as expected.
func (p *pageErrors) allow(substrings ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.allowed = append(p.allowed, substrings...)
}

// unexpected returns the errors recorded that no allowed substring matches.
func (p *pageErrors) unexpected() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, e := range p.errors {
		if !p.allowedLocked(e) {
			out = append(out, e)
		}
	}
	return out
}

func (p *pageErrors) allowedLocked(e string) bool {
	for _, s := range p.allowed {
		if strings.Contains(e, s) {
			return true
		}
	}
	return false
}

// report fails t with the list of unexpected errors, if there are any.
func (p *pageErrors) report(t testing.TB) {
	t.Helper()
	if errs := p.unexpected(); len(errs) > 0 {
		t.Errorf("browsertest: the page reported %d error(s) that the test did not allow (a test that expects one calls AllowErrors with part of its text):\n\t%s",
			len(errs), strings.Join(errs, "\n\t"))
	}
}

// isGuessedFavicon reports whether url is the icon Chromium asks every site
// for by itself (/favicon.ico), whose 404 is no error of the page. An icon at
// another path, named in a <link rel="icon">, is checked like any resource.
func isGuessedFavicon(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && u.Path == "/favicon.ico"
}

// exceptionText describes an uncaught exception or unhandled rejection the
// way the DevTools console does, on one line, with where it was thrown.
func exceptionText(d *runtime.ExceptionDetails) string {
	text := d.Text // "Uncaught" or "Uncaught (in promise)"
	if d.Exception != nil {
		text += " " + valueText(d.Exception)
	}
	script, line := d.URL, d.LineNumber
	if script == "" && d.StackTrace != nil && len(d.StackTrace.CallFrames) > 0 {
		script, line = d.StackTrace.CallFrames[0].URL, d.StackTrace.CallFrames[0].LineNumber
	}
	return "uncaught exception: " + text + at(script, line)
}

// consoleText describes a console.error or console.assert call: its type,
// its arguments separated by spaces, and where it was made.
func consoleText(ev *runtime.EventConsoleAPICalled) string {
	args := make([]string, 0, len(ev.Args))
	for _, a := range ev.Args {
		args = append(args, valueText(a))
	}
	text := fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " "))
	if st := ev.StackTrace; st != nil && len(st.CallFrames) > 0 {
		text += at(st.CallFrames[0].URL, st.CallFrames[0].LineNumber)
	}
	return text
}

// logText describes an entry of the browser's log, with the part of the
// browser that wrote it (network, security, ...) and the URL it is about.
func logText(e *log.Entry) string {
	text := fmt.Sprintf("browser log (%s): %s", e.Source, e.Text)
	if e.URL != "" && !strings.Contains(e.Text, e.URL) {
		text += " (" + e.URL + ")"
	}
	return text
}

// failedRequestText describes a network request that failed.
func failedRequestText(request string, ev *network.EventLoadingFailed) string {
	text := "request failed: " + request + ": " + ev.ErrorText
	if ev.BlockedReason != "" {
		text += " (blocked: " + string(ev.BlockedReason) + ")"
	}
	if ev.CorsErrorStatus != nil {
		text += " (CORS: " + string(ev.CorsErrorStatus.CorsError) + ")"
	}
	return text
}

// valueText renders a JavaScript value reported by the protocol: a string as
// it is, an Error as the first line of its description (its stack follows),
// any other value as its description or JSON.
func valueText(o *runtime.RemoteObject) string {
	switch {
	case o.Type == runtime.RemoteObjectTypeString:
		var s string
		if err := jsonv2.Unmarshal(o.Value, &s); err == nil {
			return s
		}
	case o.UnserializableValue != "":
		return string(o.UnserializableValue)
	case o.Description != "":
		first, _, _ := strings.Cut(o.Description, "\n")
		return first
	case len(o.Value) > 0:
		return string(o.Value)
	}
	return string(o.Type)
}

// at is the " (url:line)" suffix of a place in a script, with the protocol's
// 0-based line made 1-based; it is empty when the URL is unknown.
func at(script string, line int64) string {
	if script == "" {
		return ""
	}
	return fmt.Sprintf(" (%s:%d)", script, line+1)
}
