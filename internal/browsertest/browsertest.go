package browsertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// EnvChromium names the environment variable that holds the Chromium to run:
// a path, or a name looked up on PATH. When it is unset, New tries chromium,
// chromium-browser and google-chrome on PATH, in that order.
const EnvChromium = "BATON_CHROMIUM"

// EnvRequireBrowser names the environment variable that, set to any value but
// the empty string, makes New fail a test instead of skipping it when no
// Chromium is found. CI sets it, so that the browser tests never skip there.
const EnvRequireBrowser = "BATON_REQUIRE_BROWSER"

// EnvScreenshots names the environment variable that holds the directory
// Screenshot writes its PNG files to. When it is unset, Screenshot does
// nothing.
const EnvScreenshots = "BATON_SCREENSHOTS"

// DefaultTimeout is the Timeout New gives a Browser.
const DefaultTimeout = 20 * time.Second

// ViewportWidth and ViewportHeight are the size of the page's viewport, and of
// the browser's window, in CSS pixels, fixed so that the page's layout and its
// screenshots are the same from one run to the next.
const (
	ViewportWidth  = 1280
	ViewportHeight = 900
)

const (
	// startTimeout bounds starting Chromium and opening its tab.
	startTimeout = time.Minute
	// flushTimeout bounds the round trip at the end of a test that makes sure
	// every event the page sent before it is recorded.
	flushTimeout = 5 * time.Second
	// closeTimeout bounds closing Chromium gracefully; past it, it is killed.
	closeTimeout = 10 * time.Second
	// outputTail is how much of Chromium's last output a failed test logs.
	outputTail = 8 << 10
)

// chromiumNames are the programs New looks for on PATH when EnvChromium is
// unset: Debian's package, other distributions' name for it, and Chrome.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome"}

// errNoChromium is findChromium's error when none of chromiumNames is on PATH.
var errNoChromium = errors.New("no Chromium found")

// quietFlags keep Chromium from reaching out to the network by itself
// (component updates, sync, background requests, QUIC probes) and from
// needing a sandbox or a GPU. The machines the tests run on have no network
// beyond the loopback, where every such attempt is a refused connection.
var quietFlags = []chromedp.ExecAllocatorOption{
	chromedp.Headless,
	chromedp.NoSandbox,
	chromedp.DisableGPU,
	chromedp.NoFirstRun,
	chromedp.Flag("disable-quic", true),
	chromedp.Flag("disable-background-networking", true),
	chromedp.Flag("disable-component-update", true),
	chromedp.Flag("disable-sync", true),
	chromedp.WindowSize(ViewportWidth, ViewportHeight),
}

// Browser is one headless Chromium with one tab, started by New for one test
// and closed when that test ends. Its methods run on the test's goroutine;
// they are not safe for concurrent use, except Errors and AllowErrors.
type Browser struct {
	// Timeout bounds each call of Run, Do, Result, Navigate, Text, SetCookie
	// and Screenshot: all its steps together must finish within it. New sets
	// it to DefaultTimeout; a test may change it between calls.
	Timeout time.Duration

	t        testing.TB
	tab      context.Context // chromedp's context of the one tab
	closeTab context.CancelFunc
	errs     *pageErrors
	output   *tail // of Chromium's stdout and stderr
}

// New starts a headless Chromium with a fresh profile and one blank tab, and
// closes it when the test ends. Chromium comes from EnvChromium, else from
// PATH (chromium, chromium-browser, google-chrome); when there is none the
// test is skipped, or fails when EnvRequireBrowser is set.
//
// When the test ends, New's cleanup fails it if the page reported an error
// that AllowErrors did not allow. Cleanups run last in, first out, so start
// the servers a page talks to before New: they then outlive the browser, and
// closing them cannot show up as the page's errors.
func New(t testing.TB) *Browser {
	t.Helper()
	path, err := findChromium()
	switch {
	case errors.Is(err, errNoChromium) && os.Getenv(EnvRequireBrowser) == "":
		t.Skip("no Chromium found: install Debian's chromium (apt-get install chromium) or set " + EnvChromium + " to run the console's browser tests")
	case err != nil:
		t.Fatalf("browsertest: %v, and %s is set: install Debian's chromium (apt-get install chromium) or set %s to a Chromium", err, EnvRequireBrowser, EnvChromium)
	}

	b := &Browser{Timeout: DefaultTimeout, t: t, errs: newPageErrors(), output: &tail{max: outputTail}}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], quietFlags...)
	opts = append(opts, chromedp.ExecPath(path), chromedp.CombinedOutput(b.output))

	// The first chromedp call on the tab binds the browser's life to its
	// context, so that context has no deadline: startTimeout cancels it from
	// a timer instead, and Run's timeouts derive from it.
	life, endLife := context.WithCancel(context.Background())
	allocator, closeAllocator := chromedp.NewExecAllocator(life, opts...)
	b.tab, b.closeTab = chromedp.NewContext(allocator, chromedp.WithListener(b.errs.listen))

	started := time.Now()
	timer := time.AfterFunc(startTimeout, endLife)
	// Headless Chromium keeps part of its window for a toolbar it does not
	// draw: only an emulated viewport has the size asked for.
	err = chromedp.Do(b.tab, chromedp.EmulateViewport(ViewportWidth, ViewportHeight))
	if !timer.Stop() {
		err = fmt.Errorf("no answer within %s: %w", startTimeout, err)
	}
	if err != nil {
		endLife()
		b.closeTab()
		closeAllocator()
		t.Fatalf("browsertest: starting %s: %v", path, err)
	}
	t.Logf("browsertest: %s started in %s", path, time.Since(started).Round(time.Millisecond))

	t.Cleanup(func() {
		b.flush()
		b.errs.report(t)
		if err := b.close(); err != nil {
			t.Errorf("browsertest: closing Chromium: %v", err)
		}
		endLife() // kills a Chromium that did not close in time
		b.closeTab()
		closeAllocator()
		if t.Failed() {
			t.Logf("browsertest: Chromium's last output:\n%s", b.output)
		}
	})
	return b
}

// findChromium returns the path of the Chromium to run: EnvChromium's, else
// the first of chromiumNames on PATH, else errNoChromium.
func findChromium() (string, error) {
	if name := os.Getenv(EnvChromium); name != "" {
		path, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvChromium, name, err)
		}
		return path, nil
	}
	for _, name := range chromiumNames {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", errNoChromium
}

// Run runs the steps in order and fails the test, naming the step, at the
// first that returns an error or when they take longer than b.Timeout.
func (b *Browser) Run(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := b.Do(steps...); err != nil {
		b.t.Fatalf("browsertest: %v", err)
	}
}

// Do is Run for a test that expects a step to fail: it returns the first
// step's error, saying which step it was, instead of failing the test.
func (b *Browser) Do(steps ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.tab, b.Timeout)
	defer cancel()
	for i, step := range steps {
		if _, err := runOnLiveNodes(ctx, step); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("step %d of %d: not done within %s: %w", i+1, len(steps), b.Timeout, err)
			}
			return fmt.Errorf("step %d of %d: %w", i+1, len(steps), err)
		}
	}
	return nil
}

// Result runs an action that returns a value, such as chromedp.Title or
// chromedp.Evaluate, and returns its value; it fails the test when the action
// returns an error or takes longer than b.Timeout.
func Result[T any](b *Browser, action chromedp.Action[T]) T {
	b.t.Helper()
	v, err := result(b, action)
	if err != nil {
		b.t.Fatalf("browsertest: %v", err)
	}
	return v
}

// result runs action within b.Timeout.
func result[T any](b *Browser, action chromedp.Action[T]) (T, error) {
	ctx, cancel := context.WithTimeout(b.tab, b.Timeout)
	defer cancel()
	v, err := runOnLiveNodes(ctx, action)
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("not done within %s: %w", b.Timeout, err)
	}
	return v, err
}

// Navigate loads url in the tab, waits for its load event, and fails the test
// when the page cannot be loaded or its server answers with a status of 400
// or more. See the action Navigate for a test that expects such a failure.
func (b *Browser) Navigate(url string) {
	b.t.Helper()
	b.Run(Navigate(url))
}

// Text returns the rendered text (innerText) of the first element that the
// CSS selector matches, waiting up to b.Timeout for such an element.
func (b *Browser) Text(selector string) string {
	b.t.Helper()
	text, err := result(b, chromedp.Text(chromedp.CSS(selector)))
	if err != nil {
		b.t.Fatalf("browsertest: reading the text of %s: %v", selector, err)
	}
	return text
}

// SetCookie stores the cookie in the browser as if the server at url had set
// it, so that the following requests to that server carry it. The cookie's
// Name, Value, Domain, Path, Expires, Secure, HttpOnly and SameSite are used;
// a zero Expires makes a session cookie.
func (b *Browser) SetCookie(url string, c *http.Cookie) {
	b.t.Helper()
	params := network.SetCookieParams{
		Name:     c.Name,
		Value:    c.Value,
		URL:      url,
		Domain:   c.Domain,
		Path:     c.Path,
		Secure:   new(c.Secure),
		HTTPOnly: new(c.HttpOnly),
		SameSite: sameSite(c.SameSite),
	}
	if !c.Expires.IsZero() {
		params.Expires = cdp.TimeSinceEpoch(float64(c.Expires.UnixMilli()) / 1000)
	}
	_, err := result(b, func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, t, network.SetCookie, params)
		return chromedp.Void{}, err
	})
	if err != nil {
		b.t.Fatalf("browsertest: setting the cookie %s for %s: %v", c.Name, url, err)
	}
}

// sameSite translates net/http's SameSite to the protocol's; the default
// mode leaves it to the browser.
func sameSite(mode http.SameSite) network.CookieSameSite {
	switch mode {
	case http.SameSiteStrictMode:
		return network.CookieSameSiteStrict
	case http.SameSiteLaxMode:
		return network.CookieSameSiteLax
	case http.SameSiteNoneMode:
		return network.CookieSameSiteNone
	default:
		return ""
	}
}

// Screenshot writes a PNG of the whole page, beyond the window when the page
// is longer, to <dir>/<name>.png when EnvScreenshots names a directory dir,
// creating the directories it needs; otherwise it does nothing. The name may
// hold slashes, to sort screenshots into folders, but must stay inside dir.
func (b *Browser) Screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv(EnvScreenshots)
	if dir == "" {
		return
	}
	file := name + ".png"
	if !filepath.IsLocal(file) {
		b.t.Fatalf("browsertest: screenshot name %q leaves the screenshot directory", name)
	}
	png, err := result(b, chromedp.FullScreenshot(100)) // quality 100 is PNG
	if err != nil {
		b.t.Fatalf("browsertest: taking the screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, file)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.t.Fatalf("browsertest: writing the screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatalf("browsertest: writing the screenshot %s: %v", name, err)
	}
	b.t.Logf("browsertest: screenshot %s", path)
}

// Errors returns every error the page reported so far, allowed or not, in the
// order they came, so that a test can assert the one it expects.
func (b *Browser) Errors() []string {
	return b.errs.all()
}

// AllowErrors allows the page's errors that contain one of the substrings:
// they stay in Errors but no longer fail the test when it ends.
func (b *Browser) AllowErrors(substrings ...string) {
	b.errs.allow(substrings...)
}

// flush makes one round trip to the page, so that every event the browser
// sent before its answer has been recorded. A page that no longer answers,
// say one stuck in an alert, is left to the checks that follow.
func (b *Browser) flush() {
	ctx, cancel := context.WithTimeout(b.tab, flushTimeout)
	defer cancel()
	_ = chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void]("0"))
}

// close asks Chromium to close, and waits up to closeTimeout for it to exit
// and for its profile to be removed.
func (b *Browser) close() error {
	ctx, cancel := context.WithTimeout(b.tab, closeTimeout)
	defer cancel()
	return chromedp.Cancel(ctx)
}

// tail keeps the last max bytes written to it. Chromium's output is written
// from chromedp's goroutine while a failing test may read it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// Write keeps the end of p, and of what came before it, up to t.max bytes.
func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if extra := len(t.buf) - t.max; extra > 0 {
		t.buf = bytes.Clone(t.buf[extra:])
	}
	return len(p), nil
}

// String returns the bytes kept.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
