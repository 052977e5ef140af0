package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
)

// jobsShown bounds the jobs an execution's page links to.
const jobsShown = 20

// jobLink is one of an execution's jobs, linked into River UI.
type jobLink struct {
	*dbsqlc.ConsoleExecutionJobsRow
	URL string
}

// executionJobs are the newest River jobs whose args name the execution.
func (c *Console) executionJobs(ctx context.Context, x *engine.Execution) ([]jobLink, error) {
	rows, err := dbsqlc.New().ConsoleExecutionJobs(ctx, c.pool, &dbsqlc.ConsoleExecutionJobsParams{ExecutionID: x.ID, Max: jobsShown})
	if err != nil {
		return nil, err
	}
	links := make([]jobLink, len(rows))
	for i, r := range rows {
		links[i] = jobLink{ConsoleExecutionJobsRow: r, URL: JobLink(JobsPrefix, r.ID)}
	}
	return links, nil
}

// isOperator reports whether the console links a session's pages into
// River UI: on baton dev, on a server without authentication, or when the
// browser also holds an operator session (httpapi.OperatorSession). A
// tenant's session alone never does, whatever its scopes.
func (c *Console) isOperator(sess httpapi.Session) bool {
	return c.jobs != nil && sess.TenantID != "" && (c.openJobs() || sess.Operator)
}

// openJobs reports whether River UI opens without an operator session:
// on baton dev and on a server without authentication, where anyone who
// reaches the console may do anything anyway.
func (c *Console) openJobs() bool { return c.devTenant != "" || !c.api.ChecksTokens() }

// The operator's sign-in and sign-out, under River UI's prefix.
const (
	operatorSignInPath  = JobsPrefix + "/signin"
	operatorSignOutPath = JobsPrefix + "/signout"
)

// serveJobs serves River UI to operators: on baton dev and servers without
// authentication to anyone, elsewhere to a browser signed in with an
// operator token at operatorSignInPath (httpapi/operator.go). A tenant's
// session does not open it. River UI's own API calls come from its pages
// with the operator cookie; JobsUI refuses one from another site that may
// change something.
func (c *Console) serveJobs(w http.ResponseWriter, r *http.Request) {
	sess, err := c.api.Session(r) // for the page's header only
	if err != nil {
		sess = httpapi.Session{}
	}
	if c.jobs == nil {
		securityHeaders(w)
		c.renderError(w, r, sess, http.StatusForbidden, "this server serves no River UI")
		return
	}
	switch r.URL.Path {
	case operatorSignInPath:
		c.operatorSignIn(w, r, sess)
		return
	case operatorSignOutPath:
		c.operatorSignOut(w, r, sess)
		return
	}
	if !c.openJobs() {
		_, err := c.api.OperatorSession(r)
		if errors.Is(err, httpapi.ErrOperatorRefused) {
			c.refuseJobs(w, r, sess)
			return
		}
		if err != nil {
			securityHeaders(w)
			c.renderFailure(w, r, sess, err)
			return
		}
	}
	// River UI's pages hold every tenant's job args: never cached, never
	// framed. Its own scripts need its own policy, so no CSP here.
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	c.jobs.ServeHTTP(w, r)
}

// refuseJobs answers a request for River UI without an operator session:
// a page is sent to the operator sign-in and back, anything else (River
// UI's API, its assets) is a 403.
func (c *Console) refuseJobs(w http.ResponseWriter, r *http.Request, sess httpapi.Session) {
	securityHeaders(w)
	rest := strings.TrimPrefix(r.URL.Path, JobsPrefix)
	if r.Method == http.MethodGet && !strings.HasPrefix(rest, "/api/") && !strings.HasPrefix(rest, "/assets/") {
		http.Redirect(w, r, operatorSignInPath+"?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusFound)
		return
	}
	c.renderError(w, r, sess, http.StatusForbidden,
		"River UI is for operators: sign in at "+operatorSignInPath+" with an operator token (baton token --operator); a tenant's token does not open it")
}

// operatorView is what templates/operator.html shows.
type operatorView struct {
	// Next is the River UI page to go to once signed in.
	Next string
	// Available is false when the server takes no operator tokens.
	Available bool
	// Subject and Until name the browser's operator session, if any.
	Subject, Until string
	Error          string
}

// operatorSignIn shows the operator sign-in (GET) or opens an operator
// session from a pasted operator token (POST).
func (c *Console) operatorSignIn(w http.ResponseWriter, r *http.Request, sess httpapi.Session) {
	securityHeaders(w)
	if c.openJobs() {
		http.Redirect(w, r, JobsPrefix+"/", http.StatusFound)
		return
	}
	view := operatorView{Next: jobsNext(r.URL.Query().Get("next")), Available: c.api.ChecksOperators()}
	if op, err := c.api.OperatorSession(r); err == nil {
		view.Subject, view.Until = op.Subject, op.Expires.UTC().Format(time.RFC3339)
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		c.render(w, r, http.StatusOK, "operator", sess, view)
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		c.renderError(w, r, sess, http.StatusMethodNotAllowed, "the operator sign-in takes GET and POST")
		return
	}
	if !sameSite(r) {
		view.Error = "the sign-in must come from this console"
		c.render(w, r, http.StatusForbidden, "operator", sess, view)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	view.Next = jobsNext(r.PostFormValue("next"))
	op, err := c.api.OperatorFromToken(r.PostFormValue("token"))
	if err == nil {
		err = c.api.StartOperatorSession(w, r, op, Prefix)
	}
	if err != nil {
		view.Error = err.Error() // the API's own words: why the token was refused
		c.render(w, r, http.StatusUnauthorized, "operator", sess, view)
		return
	}
	http.Redirect(w, r, view.Next, http.StatusSeeOther)
}

// operatorSignOut ends the operator session, in every baton process, and
// clears its cookie. When the database cannot revoke the session the
// operator is told so and stays signed in.
func (c *Console) operatorSignOut(w http.ResponseWriter, r *http.Request, sess httpapi.Session) {
	securityHeaders(w)
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		c.renderError(w, r, sess, http.StatusMethodNotAllowed, "the operator sign-out takes POST")
		return
	}
	if !sameSite(r) {
		c.renderError(w, r, sess, http.StatusForbidden, "the sign-out must come from this console")
		return
	}
	if err := c.api.EndOperatorSession(w, r, Prefix); err != nil {
		if engine.IsUnavailable(err) {
			w.Header().Set("Retry-After", "1")
			c.renderError(w, r, sess, http.StatusServiceUnavailable,
				"the database is unavailable, so the operator session could not be ended: you are still signed in to River UI; sign out again in a moment")
			return
		}
		c.renderFailure(w, r, sess, err)
		return
	}
	http.Redirect(w, r, operatorSignInPath, http.StatusSeeOther)
}

// jobsNext is the River UI page an operator sign-in goes on to: next when
// it is a console page, else River UI's index.
func jobsNext(next string) string {
	if next == "" {
		return JobsPrefix + "/"
	}
	return safeNext(next)
}
