// Package browsertest drives a real headless Chromium from Go tests, through
// github.com/chromedp/chromedp, so that the console's tests see what a person's
// browser sees: the rendered page, its scripts, and what goes wrong in them.
//
// New starts one Chromium per test, with a fresh profile, and closes it when
// the test ends. Without Chromium on the machine the test is skipped, unless
// BATON_REQUIRE_BROWSER is set (CI sets it), when it fails. Every uncaught
// exception, console.error or console.assert call, error in the browser's log
// and failed network request of the page is recorded; the test fails at its
// end if one was not allowed with AllowErrors. Each call that drives the page
// is bounded by Browser.Timeout, so a wrong selector fails the test instead
// of hanging it. A step that fails because the page replaced an element it
// had found (a live page re-rendering: "Could not find node with given id")
// is run again, finding the new element, within that bound. BATON_SCREENSHOTS
// names a directory for Screenshot's PNGs.
//
// A test of a page reads like what a person does on it:
//
//	srv := httptest.NewServer(handler) // before New, so it outlives the browser
//	t.Cleanup(srv.Close)
//	b := browsertest.New(t)
//	b.Navigate(srv.URL + "/console/")
//	b.Run(
//		chromedp.Click(chromedp.CSS("a.thread")),
//		browsertest.WaitText("h1", "Thread"),
//	)
//	require.Equal(t, "waiting", b.Text(".status"))
//	b.Screenshot("console/thread")
//
// Steps are chromedp actions (chromedp.Click, chromedp.SendKeys, ...), given
// to Run, which fails the test, or to Do, which returns the error; Result
// returns an action's value.
//
// It owns the browser's process and profile for the length of one test. It is
// a test helper: only _test.go files import it. It must not import any other
// Baton package, so that any package's tests, the console's first, can use it
// without import cycles.
package browsertest
