package console_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/console"
	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/jobs"
	"github.com/batonrun/baton/live"
)

var secret = []byte("console-test-secret-0123456789-0123456789")

// operatorSecret signs operator tokens, which open River UI.
var operatorSecret = []byte("console-test-operator-secret-0123456789")

var tenantSeq atomic.Int64

// site is one Baton process serving the API and the console.
type site struct {
	pool   *pgxpool.Pool
	engine *engine.Engine
	api    *httpapi.Server
	server *httptest.Server
}

type siteOpts struct {
	// devTenant serves without authentication and signs browsers in as it.
	devTenant string
	// jobs mounts River UI at /console/jobs/.
	jobs bool
	// readLimit is the API's per-tenant read rate limit, which pages share.
	readLimit httpapi.RateLimit
	// noOperators serves with no operator secret: no operator token is
	// taken.
	noOperators bool
	// writeLimit is the API's per-tenant write rate limit, which sign-ins
	// share.
	writeLimit httpapi.RateLimit
	// wrap, when set, wraps the site's handler (to time it).
	wrap func(http.Handler) http.Handler
	// tls serves the site over TLS (httptest.NewTLSServer).
	tls bool
	// trustedProxies are the API's trusted proxies.
	trustedProxies []netip.Prefix
	// pool, when set, is the site's database: two sites on one pool are
	// two baton processes of one deployment. Nil gives the site a
	// database of its own.
	pool *pgxpool.Pool
}

func newSite(t *testing.T, opts siteOpts) *site {
	t.Helper()
	pool := opts.pool
	if pool == nil {
		pool = pgtest.NewPool(t)
	}
	eng, err := engine.New(engine.Config{Pool: pool, Channel: &engine.MemoryChannel{}})
	require.NoError(t, err)
	client, err := jobs.NewClient(pool, jobs.Config{Engine: eng})
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(ctx)
	})
	t.Cleanup(eng.DeliverPromptly(4))
	hub, err := live.NewHub(live.Config{Pool: pool})
	require.NoError(t, err)
	hub.Start()
	t.Cleanup(hub.Stop)
	cfg := httpapi.Config{Engine: eng, Pool: pool, JWTSecret: secret, OperatorSecret: operatorSecret, Hub: hub, RateLimits: httpapi.RateLimits{Read: opts.readLimit, Write: opts.writeLimit},
		TrustedProxies: opts.trustedProxies}
	if opts.noOperators {
		cfg.OperatorSecret = nil
	}
	if opts.devTenant != "" {
		cfg.JWTSecret, cfg.Insecure = nil, true
	}
	api, err := httpapi.New(cfg)
	require.NoError(t, err)
	var jobsUI http.Handler
	if opts.jobs {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		ui, err := console.NewJobsUI(ctx, console.JobsUIConfig{Client: client})
		require.NoError(t, err)
		jobsUI = ui
	}
	con, err := console.New(console.Config{Engine: eng, Pool: pool, API: api, DevTenant: opts.devTenant, Jobs: jobsUI})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/console/", con.Handler())
	mux.Handle("/", api.Handler())
	var h http.Handler = mux
	if opts.wrap != nil {
		h = opts.wrap(mux)
	}
	srv := httptest.NewUnstartedServer(h)
	if opts.tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return &site{pool: pool, engine: eng, api: api, server: srv}
}

func newTenant() string { return fmt.Sprintf("tenant-%d", tenantSeq.Add(1)) }

func (s *site) token(t *testing.T, tenant string, scopes ...string) string {
	t.Helper()
	tok, err := httpapi.MintToken(secret, tenant, "console-test", scopes, time.Hour)
	require.NoError(t, err)
	return tok
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects, so tests see them.
type browser struct {
	t      *testing.T
	site   *site
	client *http.Client
}

func (s *site) browser(t *testing.T) *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{t: t, site: s, client: &http.Client{Jar: jar, Transport: s.server.Client().Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// page is one answer.
type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(method, path string, form url.Values, headers map[string]string) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.site.server.URL+path, body)
	require.NoError(b.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := b.client.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	return page{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

func (b *browser) get(path string) page { return b.do(http.MethodGet, path, nil, nil) }

// signIn posts a token to the sign-in form, from the console's origin.
func (b *browser) signIn(token string) page {
	b.t.Helper()
	return b.do(http.MethodPost, "/console/signin", url.Values{"token": {token}, "next": {"/console/executions"}},
		map[string]string{"Origin": b.site.server.URL})
}

// csrf reads the session's CSRF token from a page's meta tag.
func csrfOf(t *testing.T, body string) string {
	t.Helper()
	const marker = `<meta name="csrf-token" content="`
	i := strings.Index(body, marker)
	require.GreaterOrEqual(t, i, 0, "no csrf meta tag")
	rest := body[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}

// define stores a workflow definition for a tenant.
func (s *site) define(t *testing.T, tenant, definition string) {
	t.Helper()
	_, _, err := s.engine.DefineWorkflow(context.Background(), s.pool, tenant, []byte(definition))
	require.NoError(t, err)
}

// start starts an execution through the engine.
func (s *site) start(t *testing.T, p engine.StartParams) string {
	t.Helper()
	var id string
	err := s.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
		x, err := s.engine.StartExecution(context.Background(), tx, p)
		if err == nil {
			id = x.ExecutionID
		}
		return err
	})
	require.NoError(t, err)
	return id
}

// dbProxy forwards TCP connections to PostgreSQL; while it is down it cuts
// the connections it carries and closes new ones, as a database that went
// away would.
type dbProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

// proxiedPool is a pool on a new database reached through a dbProxy.
func proxiedPool(t *testing.T) (*pgxpool.Pool, *dbProxy) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabase(t))
	require.NoError(t, err)
	require.False(t, strings.HasPrefix(cfg.ConnConfig.Host, "/"), "the proxy forwards TCP only")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &dbProxy{ln: ln, target: net.JoinHostPort(cfg.ConnConfig.Host, fmt.Sprint(cfg.ConnConfig.Port)), conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.setDown(true)
	})
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = "127.0.0.1", uint16(ln.Addr().(*net.TCPAddr).Port), nil
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, p
}

func (p *dbProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(client)
	}
}

func (p *dbProxy) forward(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
	_ = client.Close()
	_ = server.Close()
}

func (p *dbProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			_ = c.Close()
		}
	}
}
