package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is where the console is served.
const Prefix = "/console/"

// pageTimeout bounds the work of rendering one page.
const pageTimeout = 10 * time.Second

// Config configures a Console.
type Config struct {
	// Engine reads executions, threads, lanes and definitions. Required.
	Engine *engine.Engine
	// Pool is the database pool. Required.
	Pool *pgxpool.Pool
	// API is the REST API: it opens and checks sessions, and the pages'
	// actions are its requests. Required.
	API *httpapi.Server
	// DevTenant, when set, signs a browser that has no session in as this
	// tenant with every scope (baton dev). It needs an API without
	// authentication.
	DevTenant string
	// Jobs serves River UI under /console/jobs/ to operators (baton dev, or
	// a session with the operator scope); nil serves no River UI.
	Jobs http.Handler
	// Logger receives errors. Nil discards them.
	Logger *slog.Logger
}

// Console serves the console's pages.
type Console struct {
	*slog.Logger
	engine    *engine.Engine
	pool      *pgxpool.Pool
	api       *httpapi.Server
	devTenant string
	jobs      http.Handler
	pages     map[string]*template.Template
	mux       *http.ServeMux
}

// New returns a Console.
func New(cfg Config) (*Console, error) {
	if cfg.Engine == nil || cfg.Pool == nil || cfg.API == nil {
		return nil, errors.New("console: Config.Engine, Pool and API are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{Logger: cfg.Logger, engine: cfg.Engine, pool: cfg.Pool, api: cfg.API,
		devTenant: cfg.DevTenant, jobs: cfg.Jobs, pages: pages, mux: http.NewServeMux()}
	c.routes()
	return c, nil
}

// Handler serves everything under /console/ (and redirects /console).
func (c *Console) Handler() http.Handler { return c.mux }

func (c *Console) routes() {
	static, _ := fs.Sub(staticFS, "static")
	c.mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", http.FileServerFS(filesOnly{static})))
	c.mux.Handle("GET /console", http.RedirectHandler(Prefix, http.StatusFound))
	c.mux.HandleFunc("GET /console/signin", c.signInPage)
	c.mux.HandleFunc("POST /console/signin", c.signIn)
	c.mux.HandleFunc("POST /console/signout", c.signOut)

	c.route("GET /console/{$}", httpapi.ScopeWorkflowsRead, func(w http.ResponseWriter, r *http.Request, _ httpapi.Session) error {
		http.Redirect(w, r, Prefix+"executions", http.StatusFound)
		return nil
	})
	c.route("GET /console/executions", httpapi.ScopeWorkflowsRead, c.executionsPage)
	c.route("GET /console/executions/{id}", httpapi.ScopeWorkflowsRead, c.executionPage)
	c.route("GET /console/threads", httpapi.ScopeWorkflowsRead, c.threadsPage)
	c.route("GET /console/threads/{id}", httpapi.ScopeWorkflowsRead, c.threadPage)
	c.route("GET /console/lanes", httpapi.ScopeMonitorRead, c.lanesPage)
	c.route("GET /console/monitor", httpapi.ScopeMonitorRead, c.monitorPage)
	c.route("GET /console/definitions", httpapi.ScopeWorkflowsRead, c.definitionsPage)
	c.route("GET /console/definitions/{id}", httpapi.ScopeWorkflowsRead, c.definitionPage)
	c.route("POST /console/definitions/validate", httpapi.ScopeWorkflowsRead, c.validatePage)
	c.mux.HandleFunc(JobsPrefix+"/", c.serveJobs)
	c.mux.HandleFunc(JobsPrefix, c.serveJobs)
	c.mux.HandleFunc("/console/", c.notFound)
}

// filesOnly opens the files of an fs.FS and no directory, so the file
// server serves the console's static files and lists no directory: a
// directory is not found (404).
type filesOnly struct{ fs.FS }

func (f filesOnly) Open(name string) (fs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	st, err := file.Stat()
	if err == nil && st.IsDir() {
		err = fs.ErrNotExist
	}
	if err != nil {
		_ = file.Close()
		return nil, err
	}
	return file, nil
}

// pageFunc renders one page for a session.
type pageFunc func(w http.ResponseWriter, r *http.Request, sess httpapi.Session) error

// route serves a page to a signed-in session that holds scope; a browser
// without one goes to the sign-in page and comes back. A pageFunc's error
// is rendered as an error page.
func (c *Console) route(pattern, scope string, render pageFunc) {
	c.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				c.Error("panic serving a console page", "panic", p, "stack", string(debug.Stack()), "path", r.URL.Path)
				c.renderError(w, r, httpapi.Session{}, http.StatusInternalServerError, "internal error; see the server log")
			}
		}()
		securityHeaders(w)
		sess, ok := c.session(w, r)
		if !ok {
			return
		}
		if err := c.api.Allow(r, sess.TenantID); err != nil {
			c.renderLimited(w, r, sess, err)
			return
		}
		if !sess.Has(scope) {
			c.renderError(w, r, sess, http.StatusForbidden, fmt.Sprintf("your session lacks the %s scope this page needs", scope))
			return
		}
		if r.Method == http.MethodPost && !c.checkForm(w, r, sess) {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
		defer cancel()
		if err := render(w, r.WithContext(ctx), sess); err != nil {
			c.renderFailure(w, r, sess, err)
		}
	})
}

// session returns the request's session, signing baton dev's browser in;
// without one it redirects to the sign-in page and reports false. When the
// database cannot say whether the session lives, the page says so (503).
func (c *Console) session(w http.ResponseWriter, r *http.Request) (httpapi.Session, bool) {
	sess, err := c.api.Session(r)
	if err == nil {
		return sess, true
	}
	if !errors.Is(err, httpapi.ErrNoSession) && !errors.Is(err, httpapi.ErrSessionRefused) {
		c.renderFailure(w, r, httpapi.Session{}, err)
		return httpapi.Session{}, false
	}
	if c.devTenant != "" {
		if sess, err = c.devSession(w, r); err != nil {
			c.renderFailure(w, r, httpapi.Session{}, fmt.Errorf("signing in the dev tenant: %w", err))
			return httpapi.Session{}, false
		}
		return sess, true
	}
	if r.Method != http.MethodGet {
		c.renderError(w, r, httpapi.Session{}, http.StatusUnauthorized, "your session has ended: sign in again")
		return httpapi.Session{}, false
	}
	http.Redirect(w, r, Prefix+"signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusFound)
	return httpapi.Session{}, false
}

// notFound answers a console path no page serves.
func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	sess, err := c.api.Session(r)
	if err != nil {
		sess = httpapi.Session{}
	}
	c.renderError(w, r, sess, http.StatusNotFound, "no console page "+r.URL.Path)
}

// securityHeaders keep the console's pages from being framed and allow
// only the console's own scripts, styles and connections.
func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// safeNext returns a sign-in's next page if it is a console path, else the
// executions page: a sign-in link cannot send a browser elsewhere.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(u.Path, Prefix) || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return Prefix + "executions"
	}
	return u.RequestURI()
}

// renderLimited answers a page request over its tenant's rate limit (the
// API's rateLimits, read class for pages): 429 with Retry-After.
func (c *Console) renderLimited(w http.ResponseWriter, r *http.Request, sess httpapi.Session, err error) {
	var rl *httpapi.RateLimited
	if errors.As(err, &rl) {
		w.Header().Set("Retry-After", strconv.FormatInt(max(1, int64((rl.RetryAfter+time.Second-1)/time.Second)), 10))
	}
	c.renderError(w, r, sess, http.StatusTooManyRequests, err.Error())
}
