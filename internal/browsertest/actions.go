package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/chromedp"
)

const (
	// waitTextInterval is how often WaitText's check runs in the page.
	waitTextInterval = 50 * time.Millisecond
	// waitTextReserve is the most of a call's time WaitText keeps, after it
	// gives up waiting, to read the element's text for its error. The read
	// has this long even when the call's deadline has passed meanwhile, as
	// on a loaded machine, so that the error says what the page showed.
	waitTextReserve = time.Second
)

// textContainsJS is WaitText's check, run in the page: whether the first
// element matching the selector exists and its rendered text contains the
// substring.
const textContainsJS = `(selector, substring) => {
	const el = document.querySelector(selector);
	return el !== null && el.innerText.includes(substring);
}`

// textNowJS returns the rendered text of the first element matching the
// selector, or null when there is none.
const textNowJS = `(selector) => {
	const el = document.querySelector(selector);
	return el === null ? null : el.innerText;
}`

// WaitText is an action that waits until the first element matching the CSS
// selector exists and its rendered text (innerText) contains substring. The
// check runs in the page, every 50 ms, until the deadline of the call it is
// part of (Browser.Timeout for Run and Do); a page that navigates meanwhile is
// checked again once the new one is there. Its error says what the element's
// text was when it gave up.
func WaitText(selector, substring string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		for {
			opts := []chromedp.PollOption{
				chromedp.WithPollingInterval(waitTextInterval),
				chromedp.WithPollingArgs(selector, substring),
				chromedp.WithPollingTimeout(0), // none: the context's deadline bounds it
			}
			if deadline, ok := ctx.Deadline(); ok {
				left := time.Until(deadline)
				opts = append(opts, chromedp.WithPollingTimeout(max(left-min(waitTextReserve, left/5), time.Millisecond)))
			}
			_, err := chromedp.PollFunction[bool](textContainsJS, opts...)(ctx, t)
			var protocolErr *cdproto.Error
			switch {
			case err == nil:
				return chromedp.Void{}, nil
			case errors.As(err, &protocolErr) && ctx.Err() == nil:
				// The page went away under the check (a navigation
				// destroyed its execution context): check the next
				// one once it is there.
				select {
				case <-time.After(waitTextInterval):
					continue
				case <-ctx.Done():
					err = fmt.Errorf("%w, the page having gone away: %w", ctx.Err(), err)
				}
			}
			return chromedp.Void{}, fmt.Errorf("waiting for %q in the text of %s (%s): %w",
				substring, selector, textNow(ctx, t, selector), err)
		}
	}
}

// textNow describes the text of the first element matching selector, for an
// error message. It reads it within waitTextReserve, whether ctx has ended
// or not.
func textNow(ctx context.Context, t *chromedp.Target, selector string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), waitTextReserve)
	defer cancel()
	quoted, err := json.Marshal(selector) // a JSON string is a JavaScript string
	if err != nil {
		return "its text is unknown: " + err.Error()
	}
	text, err := chromedp.Evaluate[*string](fmt.Sprintf("(%s)(%s)", textNowJS, quoted))(ctx, t)
	switch {
	case err != nil:
		return "its text is unknown: " + err.Error()
	case text == nil:
		return "no element matches it"
	default:
		return fmt.Sprintf("its text is %q", *text)
	}
}

// Navigate is an action that loads url in the tab and waits for its load
// event, like chromedp.Navigate, but fails when the server answers with a
// status of 400 or more, which chromedp.Navigate takes for a page like any
// other.
func Navigate(url string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		resp, err := chromedp.NavigateResponse(url)(ctx, t)
		switch {
		case err != nil:
			return chromedp.Void{}, fmt.Errorf("navigating to %s: %w", url, err)
		case resp != nil && resp.Status >= 400:
			return chromedp.Void{}, fmt.Errorf("navigating to %s: the server answered %d %s", url, resp.Status, resp.StatusText)
		}
		return chromedp.Void{}, nil
	}
}

// staleNodeErrors are the messages of the DevTools protocol's errors for a
// node id that no longer names a node in the page: the page removed the
// node after a query returned its id. Chromium says the first for most
// commands on a node (DOM.scrollIntoViewIfNeeded, DOM.getContentQuads,
// DOM.focus), the second for DOM.resolveNode, which a step that runs
// JavaScript on a node (chromedp.SetValue) calls.
var staleNodeErrors = []string{
	"Could not find node with given id",
	"No node with given id found",
}

// staleNodeRetry is how long runOnLiveNodes waits before it runs an action
// again; chromedp's own queries retry every 5 ms.
const staleNodeRetry = 5 * time.Millisecond

// runOnLiveNodes runs action on the tab, and again, from the start, each
// time it fails because a node it found was gone before it acted on it: a
// live page re-renders its elements whenever the stream brings news, so an
// element a step found may be replaced before the step clicks it. chromedp's
// element actions (Click, SetValue, SendKeys, Text, ...) query the element
// again each time they run, and fail on a gone node before they act on it,
// so running them again acts once, on the element the page shows. The
// context's deadline bounds the whole; any other error is returned at once.
func runOnLiveNodes[T any](ctx context.Context, action chromedp.Action[T]) (T, error) {
	for {
		v, err := chromedp.Run(ctx, action)
		if !isStaleNode(err) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("%w (the element was replaced each time it was found, until %w)", err, ctx.Err())
		case <-time.After(staleNodeRetry):
		}
	}
}

// isStaleNode reports whether err is the protocol's error for a node id
// whose node is no longer in the page.
func isStaleNode(err error) bool {
	var protocolErr *cdproto.Error
	return errors.As(err, &protocolErr) && slices.Contains(staleNodeErrors, protocolErr.Message)
}
