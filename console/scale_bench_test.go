package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/console"
	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/internal/scalefixture"
)

// scalePage is a console page the scale benchmark times, and a string its
// answer must hold.
type scalePage struct {
	name, path, want string
}

// scalePages are the pages of the one tenant of a scalefixture built with
// one tenant, on the rows the fixture names: the newest execution is
// exec-1000000; the newest waiting one exec-998799 (ids 998700 to 998799
// wait); the newest of workflow wf-2 exec-995299; exec-954340 is the child
// of exec-954240, in a chain of 10,000 executions, each the child of the
// one before.
var scalePages = []scalePage{
	{"executions", "/console/executions", "exec-1000000"},
	{"executions/status", "/console/executions?status=waiting", "exec-998799"},
	{"executions/workflow", "/console/executions?workflow_id=wf-2", "exec-995299"},
	{"executions/thread", "/console/executions?thread_id=thread-" + strconv.FormatInt(scalefixture.BusyThread, 10),
		"exec-" + strconv.FormatInt(scalefixture.JobsExecution, 10)},
	{"executions/parent", "/console/executions?parent_execution_id=exec-954240", "exec-954340"},
	{"executions/older", "/console/executions?before=500000", "exec-499999"},
	// The execution with the jobs, on the busy thread: 1,010 events (500
	// shown) and 41 River jobs (20 linked).
	{"execution", "/console/executions/exec-" + strconv.FormatInt(scalefixture.JobsExecution, 10), console.JobsPrefix + "/jobs/"},
	// An execution older than River keeps jobs for: it has none.
	{"execution/old", "/console/executions/exec-54342", "exec-54342"},
	// A child in a deep family: its page walks 16 ancestors up and shows
	// 200 executions of the family.
	{"execution/family", "/console/executions/exec-954340", "exec-954240"},
	// The busy thread: 2,000 messages of its conversation, 201 read.
	{"thread", "/console/threads/thread-" + strconv.FormatInt(scalefixture.BusyThread, 10),
		"answer " + strconv.Itoa(scalefixture.BusyTurns)},
	{"threads", "/console/threads", "thread-"},
	{"lanes", "/console/lanes", "own-1"},
	{"monitor", "/console/monitor", "exec-"},
	{"definitions", "/console/definitions", "wf-49"},
	{"definition", "/console/definitions/wf-2", "1.19"},
}

// BenchmarkConsolePagesAt1M times the server side of the console's pages
// (the handler, with its queries and rendering, not the network) for a
// tenant with a million executions, ten million events, 200,000 threads
// and the rest of scalefixture's month of traffic, all of one tenant, with
// a signed-in operator's session. Each page should answer in under 300 ms
// of server time at that size. Loading the data takes one to three
// minutes, once per run; -short skips it. Run it with
//
//	go test -run '^$' -bench BenchmarkConsolePagesAt1M -benchtime 20x ./console/
func BenchmarkConsolePagesAt1M(b *testing.B) {
	if testing.Short() {
		b.Skip("loads a million executions")
	}
	s := newScaleSite(b)
	for _, p := range scalePages {
		b.Run(p.name, func(b *testing.B) {
			body := s.get(b, p.path)
			require.Contains(b, body, p.want, "the page %s", p.path)
			for b.Loop() {
				s.get(b, p.path)
			}
		})
	}
}

// scaleSite is the console of a scalefixture database, served through its
// handler alone, the session cookie of its tenant and an operator's
// session cookie.
type scaleSite struct {
	handler  http.Handler
	cookie   *http.Cookie
	operator *http.Cookie
}

func newScaleSite(b *testing.B) *scaleSite {
	b.Helper()
	ctx := context.Background()
	pool := pgtest.NewPool(b)
	require.NoError(b, scalefixture.Build(ctx, pool, scalefixture.Config{Tenants: 1, Logf: b.Logf}))
	eng, err := engine.New(engine.Config{Pool: pool, Channel: &engine.MemoryChannel{}})
	require.NoError(b, err)
	api, err := httpapi.New(httpapi.Config{Engine: eng, Pool: pool, JWTSecret: secret, OperatorSecret: operatorSecret})
	require.NoError(b, err)
	// River UI itself is never served here; a Jobs handler makes the
	// execution page read and link the execution's jobs, as it does for
	// an operator.
	con, err := console.New(console.Config{Engine: eng, Pool: pool, API: api, Jobs: http.NotFoundHandler()})
	require.NoError(b, err)
	s := &scaleSite{handler: con.Handler()}
	s.cookie = s.signIn(b, scalefixture.TenantOf(0, 1))
	s.operator = s.operatorSignIn(b)
	return s
}

// signIn posts the tenant's token to the sign-in form and returns the
// session cookie it sets.
func (s *scaleSite) signIn(b *testing.B, tenant string) *http.Cookie {
	b.Helper()
	tok, err := httpapi.MintToken(secret, tenant, "console-bench",
		[]string{httpapi.ScopeWorkflowsRead, httpapi.ScopeMonitorRead}, time.Hour)
	require.NoError(b, err)
	form := url.Values{"token": {tok}, "next": {console.Prefix + "executions"}}
	req := httptest.NewRequest(http.MethodPost, console.Prefix+"signin", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+req.Host)
	rec := httptest.NewRecorder()
	s.handler.ServeHTTP(rec, req)
	require.Equal(b, http.StatusSeeOther, rec.Code, rec.Body.String())
	for _, c := range rec.Result().Cookies() {
		if c.Name == httpapi.SessionCookie {
			return c
		}
	}
	b.Fatal("the sign-in set no session cookie")
	return nil
}

// operatorSignIn posts an operator token to River UI's sign-in and
// returns the operator session cookie it sets.
func (s *scaleSite) operatorSignIn(b *testing.B) *http.Cookie {
	b.Helper()
	tok, err := httpapi.MintOperatorToken(operatorSecret, "console-bench", time.Hour)
	require.NoError(b, err)
	req := httptest.NewRequest(http.MethodPost, console.JobsPrefix+"/signin", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+req.Host)
	rec := httptest.NewRecorder()
	s.handler.ServeHTTP(rec, req)
	require.Equal(b, http.StatusSeeOther, rec.Code, rec.Body.String())
	for _, c := range rec.Result().Cookies() {
		if c.Name == httpapi.OperatorCookie {
			return c
		}
	}
	b.Fatal("the operator sign-in set no cookie")
	return nil
}

// get serves one GET of path and returns the page, which must be a 200.
func (s *scaleSite) get(b *testing.B, path string) string {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.AddCookie(s.cookie)
	req.AddCookie(s.operator)
	rec := httptest.NewRecorder()
	s.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		b.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String())
	}
	return rec.Body.String()
}
