package browsertest_test

import (
	"fmt"
	"html"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/browsertest"
)

// site is a small web site of static pages, each showing one thing the
// harness must see.
type site struct {
	URL string
	// refusedURL is on a loopback port that nothing listens on.
	refusedURL string
}

// newSite starts the site for one test. Call it before browsertest.New, so
// that the site outlives the browser.
func newSite(t *testing.T) *site {
	t.Helper()
	s := &site{refusedURL: "http://" + closedAddr(t) + "/refused"}
	page := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, "<!doctype html><html><head><title>Test page</title></head><body>"+body+"</body></html>")
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", page(`<h1 id="greeting">Hello</h1>`))
	mux.Handle("GET /throws", page(`<script>
throw new Error("boom");
</script>`))
	mux.Handle("GET /console-error", page(`<script>console.error("bad thing", 42)</script>`))
	mux.Handle("GET /missing-image", page(`<img src="/no-such.png" alt="missing">`))
	mux.Handle("GET /refused-style", page(`<link rel="stylesheet" href="/no-such.css"><p>unstyled</p>`))
	mux.Handle("GET /refused", page(`<p id="status">fetching</p><script>
fetch(`+"`"+s.refusedURL+"`"+`).catch(() => { document.getElementById("status").textContent = "refused"; });
</script>`))
	mux.Handle("GET /late", page(`<p id="status">pending</p><script>
setTimeout(() => { document.getElementById("status").textContent = "ready"; }, 300);
</script>`))
	mux.Handle("GET /moves-on", page(`<p id="status">first page</p><script>
setTimeout(() => { location.href = "/moved"; }, 200);
</script>`))
	mux.Handle("GET /moved", page(`<p id="status">second page</p>`))
	// The button is replaced by a copy of itself the first time its width
	// is read, as a live page that re-renders does between the moment a
	// test finds an element and the moment it clicks it: chromedp.Click
	// reads the width to see that the button is visible, then scrolls the
	// button it found, which is gone by then, into view.
	mux.Handle("GET /rerendered", page(`<p id="clicks">0</p><button id="go">Go</button><script>
const clicks = document.getElementById("clicks");
const render = (button) => { button.onclick = () => { clicks.textContent = String(Number(clicks.textContent) + 1); }; return button; };
const first = render(document.getElementById("go"));
const width = Object.getOwnPropertyDescriptor(HTMLElement.prototype, "offsetWidth").get;
Object.defineProperty(first, "offsetWidth", {get() {
	const w = width.call(this);
	this.replaceWith(render(this.cloneNode(true)));
	return w;
}});
</script>`))
	mux.Handle("GET /tall", page(`<div style="height: 2000px; background: linear-gradient(teal, navy)">tall</div>`))
	mux.HandleFunc("GET /cookie", func(w http.ResponseWriter, r *http.Request) {
		value := "none"
		if c, err := r.Cookie("session"); err == nil {
			value = c.Value
		}
		page(`<p id="cookie">`+html.EscapeString(value)+`</p>`)(w, r)
	})
	mux.HandleFunc("GET /broken", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "it broke", http.StatusInternalServerError)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// closedAddr returns a loopback address that nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestCleanPage(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	b := browsertest.New(t)

	b.Navigate(s.URL + "/")
	require.Equal(t, "Hello", b.Text("#greeting"))
	require.Equal(t, "Test page", browsertest.Result(b, chromedp.Title()))
	require.Empty(t, b.Errors())
}

func TestPageErrorsAreRecorded(t *testing.T) {
	t.Parallel()
	s := newSite(t)

	tests := []struct {
		name  string
		path  string
		want  string // one recorded error contains it
		allow string // the errors the page may report
	}{
		{"uncaught exception", "/throws", "uncaught exception: Uncaught Error: boom (" + s.URL + "/throws:2)", "boom"},
		{"console.error", "/console-error", "console.error: bad thing 42 (" + s.URL + "/console-error:", "bad thing"},
		{"resource not found", "/missing-image", "browser log (network): Failed to load resource: the server responded with a status of 404 (Not Found) (" + s.URL + "/no-such.png)", "/no-such.png"},
		// The 404's text/plain body is no stylesheet.
		{"stylesheet refused", "/refused-style", "browser log (security): Refused to apply style from '" + s.URL + "/no-such.css'", "/no-such.css"},
		{"request refused", "/refused", "request failed: GET " + s.refusedURL + ": net::ERR_CONNECTION_REFUSED", s.refusedURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := browsertest.New(t)
			b.AllowErrors(tt.allow)

			b.Navigate(s.URL + tt.path)
			require.Eventually(t, func() bool {
				return containsOne(b.Errors(), tt.want)
			}, 5*time.Second, 10*time.Millisecond, "recorded: %q", b.Errors())
		})
	}
}

// containsOne reports whether one of errs contains want.
func containsOne(errs []string, want string) bool {
	for _, e := range errs {
		if strings.Contains(e, want) {
			return true
		}
	}
	return false
}

// failureRecorder stands in for a test whose failure is under test: it
// records Errorf and holds the cleanups until runCleanups, and passes all else
// to the real test.
type failureRecorder struct {
	testing.TB

	mu       sync.Mutex
	failures []string
	cleanups []func()
}

func (r *failureRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

func (r *failureRecorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// runCleanups runs the cleanups registered so far, last first, once.
func (r *failureRecorder) runCleanups() {
	for {
		r.mu.Lock()
		if len(r.cleanups) == 0 {
			r.mu.Unlock()
			return
		}
		f := r.cleanups[len(r.cleanups)-1]
		r.cleanups = r.cleanups[:len(r.cleanups)-1]
		r.mu.Unlock()
		f()
	}
}

func (r *failureRecorder) recorded() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.failures...)
}

func TestTheEndOfATestReportsPageErrors(t *testing.T) {
	t.Parallel()
	s := newSite(t)

	t.Run("unexpected error fails the test", func(t *testing.T) {
		t.Parallel()
		r := &failureRecorder{TB: t}
		t.Cleanup(r.runCleanups)
		b := browsertest.New(r)

		b.Navigate(s.URL + "/throws")
		b.Navigate(s.URL + "/console-error")
		r.runCleanups()

		failures := r.recorded()
		require.Len(t, failures, 1)
		require.Contains(t, failures[0], "the page reported 2 error(s)")
		require.Contains(t, failures[0], "Uncaught Error: boom")
		require.Contains(t, failures[0], "console.error: bad thing 42")
	})
	t.Run("allowed error does not", func(t *testing.T) {
		t.Parallel()
		r := &failureRecorder{TB: t}
		t.Cleanup(r.runCleanups)
		b := browsertest.New(r)

		b.AllowErrors("boom", "bad thing")
		b.Navigate(s.URL + "/throws")
		b.Navigate(s.URL + "/console-error")
		r.runCleanups()

		require.Empty(t, r.recorded())
		require.Len(t, b.Errors(), 2)
	})
	t.Run("error after the last step is seen", func(t *testing.T) {
		t.Parallel()
		r := &failureRecorder{TB: t}
		t.Cleanup(r.runCleanups)
		b := browsertest.New(r)

		b.Navigate(s.URL + "/")
		// Thrown from a timer, after the call that set it up returned.
		b.Run(chromedp.Evaluate[chromedp.Void](`setTimeout(() => { throw new Error("late boom"); }, 100)`))
		time.Sleep(300 * time.Millisecond)
		r.runCleanups()

		failures := r.recorded()
		require.Len(t, failures, 1)
		require.Contains(t, failures[0], "late boom")
	})
}

func TestWaitText(t *testing.T) {
	t.Parallel()
	s := newSite(t)

	t.Run("text that appears later", func(t *testing.T) {
		t.Parallel()
		b := browsertest.New(t)

		b.Navigate(s.URL + "/late")
		b.Run(browsertest.WaitText("#status", "ready"))
		require.Equal(t, "ready", b.Text("#status"))
	})
	t.Run("text on the page a navigation leads to", func(t *testing.T) {
		t.Parallel()
		b := browsertest.New(t)

		b.Navigate(s.URL + "/moves-on")
		b.Run(browsertest.WaitText("#status", "second page"))
		require.Equal(t, s.URL+"/moved", browsertest.Result(b, chromedp.Location()))
	})
	t.Run("text that never appears", func(t *testing.T) {
		t.Parallel()
		b := browsertest.New(t)
		b.Navigate(s.URL + "/")

		b.Timeout = 2 * time.Second
		started := time.Now()
		err := b.Do(browsertest.WaitText("#greeting", "Goodbye"))
		waited := time.Since(started)

		// On a loaded machine the call's deadline may end the wait before
		// the poll's own timeout does ("step 1 of 1: not done within 2s:
		// waiting for …"): either way the error says what the page showed.
		require.ErrorContains(t, err, "step 1 of 1: ")
		require.ErrorContains(t, err, `waiting for "Goodbye" in the text of #greeting (its text is "Hello")`)
		require.Greater(t, waited, time.Second)
		require.Less(t, waited, 3*time.Second)
	})
	t.Run("element that never appears", func(t *testing.T) {
		t.Parallel()
		b := browsertest.New(t)
		b.Navigate(s.URL + "/")

		b.Timeout = time.Second
		err := b.Do(browsertest.WaitText("#nothing", "Hello"))
		require.ErrorContains(t, err, `waiting for "Hello" in the text of #nothing (no element matches it)`)
	})
}

// A step whose element the page replaces between finding it and acting on
// it finds the new element and acts on that, once, instead of failing with
// "Could not find node with given id".
func TestStepOnAReplacedElement(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	b := browsertest.New(t)

	b.Navigate(s.URL + "/rerendered")
	b.Run(
		chromedp.Click(chromedp.CSS("#go")),
		browsertest.WaitText("#clicks", "1"),
	)
	require.Equal(t, "1", b.Text("#clicks"), "one click")
}

func TestNavigateFailsOnAnErrorStatus(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	b := browsertest.New(t)
	b.AllowErrors(s.URL + "/broken") // the browser logs the 500 too

	err := b.Do(browsertest.Navigate(s.URL + "/broken"))
	require.ErrorContains(t, err, "navigating to "+s.URL+"/broken: the server answered 500")
}

func TestSetCookie(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	b := browsertest.New(t)

	b.Navigate(s.URL + "/cookie")
	require.Equal(t, "none", b.Text("#cookie"))

	b.SetCookie(s.URL, &http.Cookie{Name: "session", Value: "s3cr3t", Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	b.Navigate(s.URL + "/cookie")
	require.Equal(t, "s3cr3t", b.Text("#cookie"))
}

// TestScreenshot sets the environment, so it cannot run in parallel.
func TestScreenshot(t *testing.T) {
	s := newSite(t)
	dir := t.TempDir()
	b := browsertest.New(t)
	b.Navigate(s.URL + "/")

	t.Setenv(browsertest.EnvScreenshots, "")
	b.Screenshot("unwanted")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)

	t.Setenv(browsertest.EnvScreenshots, dir)
	b.Screenshot("pages/greeting")
	width, height := pngSize(t, filepath.Join(dir, "pages", "greeting.png"))
	require.Equal(t, browsertest.ViewportWidth, width)
	require.Equal(t, browsertest.ViewportHeight, height)

	// The whole page, beyond the viewport.
	b.Navigate(s.URL + "/tall")
	b.Screenshot("tall")
	width, height = pngSize(t, filepath.Join(dir, "tall.png"))
	require.Equal(t, browsertest.ViewportWidth, width)
	require.Greater(t, height, 2000)
}

// pngSize returns the size of the PNG image in the file at path.
func pngSize(t *testing.T, path string) (width, height int) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	require.NoError(t, err)
	return cfg.Width, cfg.Height
}
