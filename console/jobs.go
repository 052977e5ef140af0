package console

import (
	"context"
	"net/http"

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

// isOperator reports whether a session may open River UI: it sees and can
// cancel or delete every tenant's jobs, so only baton dev's session or one
// whose token carries the operator scope may.
func (c *Console) isOperator(sess httpapi.Session) bool {
	return c.jobs != nil && sess.TenantID != "" && (c.devTenant != "" || sess.Has(httpapi.ScopeOperator))
}

// serveJobs serves River UI to operators. Its own API calls come from its
// pages with the session cookie; JobsUI refuses one from another site that
// may change something.
func (c *Console) serveJobs(w http.ResponseWriter, r *http.Request) {
	sess, ok := c.session(w, r)
	if !ok {
		return
	}
	if !c.isOperator(sess) {
		securityHeaders(w)
		msg := "River UI is for operators: sign in with a token that has the operator scope"
		if c.jobs == nil {
			msg = "this server serves no River UI"
		}
		c.renderError(w, r, sess, http.StatusForbidden, msg)
		return
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
