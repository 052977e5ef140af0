package live_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/live"
)

// proxy forwards TCP connections to the test server. It can stop forwarding
// without closing anything, as a server whose machine vanished does.
type proxy struct {
	ln            net.Listener
	network, addr string // the server
	closed        chan struct{}

	mu    sync.Mutex
	held  chan struct{} // while non-nil, new connections wait for it to close
	conns map[*proxyConn]struct{}
}

type proxyConn struct {
	client, server net.Conn
	dead           atomic.Bool // bytes are dropped, the connection stays open
}

func startProxy(t *testing.T, network, addr string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, network: network, addr: addr, closed: make(chan struct{}), conns: map[*proxyConn]struct{}{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) port() uint16 { return uint16(p.ln.Addr().(*net.TCPAddr).Port) }

func (p *proxy) serve(client net.Conn) {
	p.mu.Lock()
	held := p.held
	p.mu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-p.closed:
			_ = client.Close()
			return
		}
	}
	server, err := net.Dial(p.network, p.addr)
	if err != nil {
		_ = client.Close()
		return
	}
	pc := &proxyConn{client: client, server: server}
	p.mu.Lock()
	p.conns[pc] = struct{}{}
	p.mu.Unlock()
	go pc.pump(server, client)
	pc.pump(client, server)
}

func (pc *proxyConn) pump(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !pc.dead.Load() {
			if _, err := dst.Write(buf[:n]); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = pc.client.Close()
	_ = pc.server.Close()
}

// hold makes new connections wait until restore.
func (p *proxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
}

// blackhole holds new connections and silently drops every byte of the
// open ones, for good.
func (p *proxy) blackhole() {
	p.hold()
	p.mu.Lock()
	defer p.mu.Unlock()
	for pc := range p.conns {
		pc.dead.Store(true)
	}
}

// restore lets new connections through again.
func (p *proxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

func (p *proxy) close() {
	close(p.closed)
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for pc := range p.conns {
		_ = pc.client.Close()
		_ = pc.server.Close()
	}
}

// warnings is a slog handler that passes on the hub's warnings.
type warnings chan warning

type warning struct {
	at       time.Time
	msg, err string
}

func (w warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w warnings) WithAttrs([]slog.Attr) slog.Handler           { return w }
func (w warnings) WithGroup(string) slog.Handler                { return w }
func (w warnings) Handle(_ context.Context, r slog.Record) error {
	wr := warning{at: time.Now(), msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "error" {
			wr.err = a.Value.String()
		}
		return true
	})
	select {
	case w <- wr:
	default:
	}
	return nil
}

func (w warnings) next(t *testing.T, within time.Duration) warning {
	t.Helper()
	select {
	case wr := <-w:
		return wr
	case <-time.After(within):
		t.Fatalf("no warning from the hub within %s", within)
		return warning{}
	}
}

type proxiedBundle struct {
	*testBundle
	proxy *proxy
	warns warnings
	// appName is the application_name of the hub's connection.
	appName string
}

// setupProxied is setup with a hub that reaches the database through a
// proxy, with queryTimeout and a log of its warnings.
func setupProxied(t *testing.T, queryTimeout time.Duration) *proxiedBundle {
	t.Helper()
	dbURL := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := &proxiedBundle{testBundle: newBundle(t, pool), warns: make(warnings, 100)}

	cc := pool.Config().ConnConfig
	network, addr := "tcp", net.JoinHostPort(cc.Host, fmt.Sprint(cc.Port))
	if strings.HasPrefix(cc.Host, "/") {
		network, addr = "unix", filepath.Join(cc.Host, fmt.Sprintf(".s.PGSQL.%d", cc.Port))
	}
	b.proxy = startProxy(t, network, addr)
	hubCfg, err := pgxpool.ParseConfig(dbURL)
	require.NoError(t, err)
	b.appName = fmt.Sprintf("live-hub-%s", b.tenant)
	hubCfg.ConnConfig.RuntimeParams["application_name"] = b.appName
	hubCfg.ConnConfig.Host, hubCfg.ConnConfig.Port = "127.0.0.1", b.proxy.port()
	for _, fb := range hubCfg.ConnConfig.Fallbacks {
		fb.Host, fb.Port = "127.0.0.1", b.proxy.port()
	}
	hubPool, err := pgxpool.NewWithConfig(context.Background(), hubCfg) // connects lazily: only the hub's own connection is used
	require.NoError(t, err)
	t.Cleanup(hubPool.Close)

	hub, err := live.NewHub(live.Config{Pool: hubPool, QueryTimeout: queryTimeout, Logger: slog.New(b.warns)})
	require.NoError(t, err)
	hub.Start()
	t.Cleanup(hub.Stop)
	b.hub = hub
	return b
}

// receive reads n events from sub, each within the time given.
func receive(t *testing.T, sub *live.Subscription, n int, within time.Duration) []int64 {
	t.Helper()
	var ids []int64
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		ev, err := sub.Next(ctx)
		cancel()
		require.NoError(t, err, "event %d of %d after %v", len(ids)+1, n, ids)
		ids = append(ids, ev.ID)
	}
	return ids
}

// TestHubBlackholedServer: when the server stops answering without closing
// the connection (a primary whose machine vanished), the hub gives up on the
// connection within its QueryTimeout, its reconnection attempts are bounded
// the same way, and once the server is reachable again the events committed
// meanwhile reach the subscriber, all of them, in order.
func TestHubBlackholedServer(t *testing.T) {
	t.Parallel()
	const queryTimeout = time.Second
	b := setupProxied(t, queryTimeout)
	sub := b.subscribe(t)

	first := b.insertEvent(t, b.pool, "before")
	require.Equal(t, []int64{first}, receive(t, sub, 1, 5*time.Second))

	b.proxy.blackhole()
	blackholed := time.Now()
	var want []int64
	for i := range 3 {
		want = append(want, b.insertEvent(t, b.pool, fmt.Sprintf("during-%d", i)))
	}

	lost := b.warns.next(t, queryTimeout+3*time.Second)
	noticed := lost.at.Sub(blackholed)
	require.Contains(t, lost.msg, "lost its connection")
	require.Less(t, noticed, queryTimeout+time.Second, "the hub noticed the silent server after %s", noticed)
	// The reconnection a second later hangs too, and is given up as well.
	again := b.warns.next(t, queryTimeout+3*time.Second)
	require.Contains(t, again.err, "connecting")
	retried := again.at.Sub(lost.at)

	want = append(want, b.insertEvent(t, b.pool, "after"))
	b.proxy.restore()
	restored := time.Now()
	require.Equal(t, want, receive(t, sub, len(want), 5*time.Second), "every event committed meanwhile, in order")
	t.Logf("first error: %s; second: %s", lost.err, again.err)
	t.Logf("hub noticed the blackhole after %s (QueryTimeout %s); gave up the held reconnection %s later; delivered %d events %s after the server came back",
		noticed.Round(time.Millisecond), queryTimeout, retried.Round(time.Millisecond), len(want), time.Since(restored).Round(time.Millisecond))
}

// TestHubRaisesSequenceAfterFailover: a promoted standby's event id
// sequence can be behind the ids the hub saw on the old primary. Simulated
// here by moving the sequence back below the hub's cursor (over ids burnt
// by a rolled-back transaction, so no row is duplicated) while the hub is
// cut off. On reconnecting the hub moves it up again, so the events written
// afterwards get ids over its cursor and all reach the subscriber, in order.
func TestHubRaisesSequenceAfterFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupProxied(t, 5*time.Second)
	sub := b.subscribe(t)

	first := b.insertEvent(t, b.pool, "before")
	require.Equal(t, []int64{first}, receive(t, sub, 1, 5*time.Second))
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	var burnt int64
	for i := range 5 {
		burnt = b.insertEvent(t, tx, fmt.Sprintf("rolled-back-%d", i))
	}
	require.NoError(t, tx.Rollback(ctx))
	require.Eventually(t, func() bool { return b.hub.CursorForTest() >= burnt }, 5*time.Second, 10*time.Millisecond,
		"the hub's cursor passes the rolled-back ids")

	// Cut the hub off, and move the sequence back to the last row while
	// it cannot reconnect.
	b.proxy.hold()
	var terminated int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
		FROM (SELECT pid FROM pg_stat_activity WHERE application_name = $1 OFFSET 0) hub`, b.appName).Scan(&terminated))
	require.Equal(t, 1, terminated, "the hub's backend")
	_, err = b.pool.Exec(ctx, "SELECT setval('execution_event_id_seq', $1)", first)
	require.NoError(t, err)
	lost := b.warns.next(t, 5*time.Second)
	require.Contains(t, lost.msg, "lost its connection")
	b.proxy.restore()

	// Once the hub's new connection takes fences, it is past the point
	// where it checks the sequence. (Events written on the new server
	// before that get ids the hub has passed: see raiseSequence.)
	require.Eventually(t, func() bool {
		var polling bool
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE application_name = $1
			  AND (query LIKE '%execution_event_fence%' OR query LIKE '%execution_event_writers_xmin%'))`, b.appName).Scan(&polling))
		return polling
	}, 10*time.Second, 10*time.Millisecond, "the hub reconnects")

	var want []int64
	for i := range 3 {
		want = append(want, b.insertEvent(t, b.pool, fmt.Sprintf("after-%d", i)))
	}
	require.Equal(t, want, receive(t, sub, len(want), 5*time.Second), "every event written after the failover, in order")
	require.Greater(t, want[0], burnt, "fresh ids past the hub's cursor")
	raised := b.warns.next(t, time.Second)
	require.Contains(t, raised.msg, "raised the event id sequence")
}
