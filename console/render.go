package console

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
)

// page is what one render of a page shows.
type page struct {
	// Name is the page's template (templates/<Name>.html) and the navigation
	// entry it highlights.
	Name  string
	Title string
	// Stream is the event-stream filter the page listens to
	// (GET /api/v1/ws?<Stream>): "" for the tenant's whole stream,
	// "none" for a page that is not live.
	Stream string
	Data   any
}

// layoutView is what templates/layout.html renders.
type layoutView struct {
	page
	Session  httpapi.Session
	Operator bool
	Status   int
}

// parsePages parses each page's template with the layout.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("console: parsing %s: %w", n, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// show renders a page with status 200.
func (c *Console) show(w http.ResponseWriter, sess httpapi.Session, p page) error {
	return c.write(w, http.StatusOK, sess, p)
}

// render renders a page with a status, logging a failure to render.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, sess httpapi.Session, data any) {
	if err := c.write(w, status, sess, page{Name: name, Stream: "none", Data: data}); err != nil {
		c.Error("rendering a console page", "page", name, "error", err, "path", r.URL.Path)
		http.Error(w, "internal error", http.StatusInternalServerError)
	}
}

// write renders into a buffer first, so a template error never leaves
// half a page.
func (c *Console) write(w http.ResponseWriter, status int, sess httpapi.Session, p page) error {
	t, ok := c.pages[p.Name]
	if !ok {
		return fmt.Errorf("console: no page %q", p.Name)
	}
	if p.Title == "" {
		p.Title = strings.ToUpper(p.Name[:1]) + p.Name[1:]
	}
	var buf bytes.Buffer
	view := layoutView{page: p, Session: sess, Operator: c.isOperator(sess), Status: status}
	if err := t.ExecuteTemplate(&buf, "layout", view); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
	return nil
}

// errorView is what templates/error.html shows.
type errorView struct {
	Status  int
	Message string
}

// renderError renders the error page.
func (c *Console) renderError(w http.ResponseWriter, r *http.Request, sess httpapi.Session, status int, message string) {
	c.render(w, r, status, "error", sess, errorView{Status: status, Message: message})
}

// renderFailure renders a page's error: what was not found is a 404, an
// outage of the database a 503 to retry, and anything else a 500 that
// leaks nothing (the log has it).
func (c *Console) renderFailure(w http.ResponseWriter, r *http.Request, sess httpapi.Session, err error) {
	var bad *badRequest
	switch {
	case errors.Is(err, engine.ErrNotFound):
		c.renderError(w, r, sess, http.StatusNotFound, err.Error())
	case errors.As(err, &bad):
		c.renderError(w, r, sess, http.StatusBadRequest, bad.message)
	case engine.IsUnavailable(err):
		w.Header().Set("Retry-After", "1")
		c.renderError(w, r, sess, http.StatusServiceUnavailable, "the database is unavailable: retry in a moment")
	case r.Context().Err() != nil:
		// The browser went away; there is no one to answer.
	default:
		c.Error("console page failed", "error", err, "path", r.URL.Path)
		c.renderError(w, r, sess, http.StatusInternalServerError, "internal error; see the server log")
	}
}

// badRequest is a page request the console refuses, with why.
type badRequest struct{ message string }

func (e *badRequest) Error() string { return e.message }

func badRequestf(format string, a ...any) error { return &badRequest{fmt.Sprintf(format, a...)} }

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"ts":       formatTime,
	"ago":      ago,
	"dur":      formatDuration,
	"json":     showJSON,
	"size":     formatSize,
	"clipBody": func(s string) shownText { return clipText(s, maxBodyShown) },
	"clipLine": func(s string) shownText { return clipText(s, maxLineShown) },
	"deref":    deref,
	"pathEsc":  url.PathEscape,
	"execURL":  func(id string) string { return Prefix + "executions/" + url.PathEscape(id) },
	"execAPI":  func(id string) string { return "/api/v1/workflow/executions/" + url.PathEscape(id) },
	"defAPI": func(id, version string) string {
		return "/api/v1/workflow/definitions/" + url.PathEscape(id) + "?version=" + url.QueryEscape(version)
	},
	"messagesAPI": func(id string) string { return "/api/v1/threads/" + url.PathEscape(id) + "/messages" },
	"threadURL":   func(id string) string { return Prefix + "threads/" + url.PathEscape(id) },
	"defURL": func(id, version string) string {
		u := Prefix + "definitions/" + url.PathEscape(id)
		if version != "" {
			u += "?version=" + url.QueryEscape(version)
		}
		return u
	},
	"rfc3339": func(t any) string {
		if tt, ok := timeOf(t); ok {
			return tt.UTC().Format(time.RFC3339Nano)
		}
		return ""
	},
	"terminal": func(s engine.ExecutionStatus) bool { return engine.IsTerminal(s) },
}

// timeOf reads a time.Time or a non-nil *time.Time.
func timeOf(v any) (time.Time, bool) {
	switch t := v.(type) {
	case time.Time:
		return t, !t.IsZero()
	case *time.Time:
		if t != nil {
			return *t, true
		}
	}
	return time.Time{}, false
}

// formatTime is a time as the pages show it, in UTC to the millisecond.
func formatTime(v any) string {
	t, ok := timeOf(v)
	if !ok {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000")
}

// ago is how long before (or after) now a time is.
func ago(v any) string {
	t, ok := timeOf(v)
	if !ok {
		return "—"
	}
	d := time.Since(t)
	if d < 0 {
		return "in " + formatDuration(-d)
	}
	return formatDuration(d) + " ago"
}

// formatDuration is a duration as people read it: 850 ms, 3.2 s, 4 min 5 s,
// 2 h 10 min, 3 d 4 h.
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%d d %d h", int(d.Hours())/24, int(d.Hours())%24)
	}
}

// Budgets of the texts a page shows once a row: a thread's messages and
// an execution's event lines; the rest is cut with a note of how much.
const (
	// maxBodyShown bounds one message's text on the thread page.
	maxBodyShown = 4 << 10
	// maxLineShown bounds one event's message on the execution page.
	maxLineShown = 1 << 10
)

// formatSize is a size in bytes as people read it: 900 bytes, 64 KiB,
// 118.3 KiB, 1.5 MiB.
func formatSize(n int) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/(1<<10)), ".0") + " KiB"
	default:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/(1<<20)), ".0") + " MiB"
	}
}

// shownText is a tenant's text as a page shows it.
type shownText struct {
	// Text is the text's first bytes, cut at a rune boundary.
	Text string
	// More is the number of bytes not shown.
	More int
}

// clipText is s's first n bytes, cut at a rune boundary.
func clipText(s string, n int) shownText {
	if len(s) <= n {
		return shownText{Text: s}
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return shownText{Text: s[:n], More: len(s) - n}
}

// deref is a nullable string, empty for null.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
