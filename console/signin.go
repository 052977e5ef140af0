package console

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
)

// signInPage asks for a token (or, on a server without authentication, a
// tenant).
func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	if c.devTenant != "" {
		if _, err := c.devSession(w, r); err == nil {
			http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusFound)
			return
		}
	}
	c.render(w, r, http.StatusOK, "signin", httpapi.Session{}, signInView{Next: safeNext(r.URL.Query().Get("next")), Tokens: c.api.ChecksTokens()})
}

type signInView struct {
	Next   string
	Tokens bool
	Error  string
}

// signIn opens a session from a pasted token and sets its cookie.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	view := signInView{Next: Prefix + "executions", Tokens: c.api.ChecksTokens()}
	if !sameSite(r) {
		view.Error = "the sign-in must come from this console"
		c.render(w, r, http.StatusForbidden, "signin", httpapi.Session{}, view)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	view.Next = safeNext(r.PostFormValue("next"))
	var (
		sess httpapi.Session
		err  error
	)
	if view.Tokens {
		sess, err = c.api.SessionFromToken(r.PostFormValue("token"))
	} else {
		sess, err = c.api.InsecureSession(strings.TrimSpace(r.PostFormValue("tenant")))
	}
	if err != nil {
		view.Error = err.Error() // the API's own words: why the token was refused
		c.render(w, r, http.StatusUnauthorized, "signin", httpapi.Session{}, view)
		return
	}
	// A sign-in stores a session: it counts against the tenant's write
	// rate limit, as an API request that stores something does.
	if err := c.api.Allow(r, sess.TenantID); err != nil {
		c.renderLimited(w, r, httpapi.Session{}, err)
		return
	}
	if _, err := c.api.StartSession(w, r, sess); err != nil {
		c.renderFailure(w, r, httpapi.Session{}, err)
		return
	}
	http.Redirect(w, r, view.Next, http.StatusSeeOther)
}

// signOut ends the session, for every baton process, and clears its
// cookie. When the session cannot be ended the page says so: the browser
// is still signed in.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	if !sameSite(r) {
		c.renderError(w, r, httpapi.Session{}, http.StatusForbidden, "the sign-out must come from this console")
		return
	}
	if err := c.api.EndSession(w, r); err != nil {
		if engine.IsUnavailable(err) {
			w.Header().Set("Retry-After", "1")
			c.renderError(w, r, httpapi.Session{}, http.StatusServiceUnavailable,
				"the database is unavailable, so the session could not be ended: you are still signed in; sign out again in a moment")
			return
		}
		c.renderFailure(w, r, httpapi.Session{}, err)
		return
	}
	http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
}

// devSession signs baton dev's browser in as its tenant.
func (c *Console) devSession(w http.ResponseWriter, r *http.Request) (httpapi.Session, error) {
	sess, err := c.api.InsecureSession(c.devTenant)
	if err != nil {
		return sess, err
	}
	return c.api.StartSession(w, r, sess)
}

// checkForm checks a console form posted with a session: it must carry
// the session's CSRF token and come from this console.
func (c *Console) checkForm(w http.ResponseWriter, r *http.Request, sess httpapi.Session) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		c.renderError(w, r, sess, http.StatusRequestEntityTooLarge, "the form is over "+formLimit)
		return false
	}
	if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(sess.CSRF)) != 1 || !sameSite(r) {
		c.renderError(w, r, sess, http.StatusForbidden, "the form did not come from this console (its CSRF token is missing or stale): reload the page")
		return false
	}
	return true
}

// maxFormBytes bounds a posted console form (a definition to validate
// included).
const (
	maxFormBytes = 2 << 20
	formLimit    = "2 MiB"
)

// crossOrigin refuses a state-changing request another site's page makes
// a browser send: by its Sec-Fetch-Site, else its Origin against Host.
var crossOrigin = http.NewCrossOriginProtection()

// sameSite reports whether a request comes from this console's own pages
// (or from no browser page at all).
func sameSite(r *http.Request) bool { return crossOrigin.Check(r) == nil }
