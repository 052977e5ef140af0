package jobs

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/pgtest"
)

// cutProxy forwards TCP connections to a server until it is cut: then it
// forwards nothing more either way and closes nothing, as a network that
// went silent, and refuses new connections. It remembers the local ports
// of its connections to the server, which the server sees as client_port.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
	ports  []int
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.isCut() {
			_ = client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.ports = append(p.ports, server.LocalAddr().(*net.TCPAddr).Port)
		p.mu.Unlock()
		go p.pipe(client, server)
		go p.pipe(server, client)
	}
}

// pipe copies from src to dst until cut, then reads and drops.
func (p *cutProxy) pipe(src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.isCut() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !p.isCut() {
				_ = dst.Close()
			}
			return
		}
	}
}

func (p *cutProxy) isCut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

// port is the port the proxy listens on.
func (p *cutProxy) port() uint16 { return uint16(p.ln.Addr().(*net.TCPAddr).Port) }

// serverPorts are the client ports the server sees for the proxy's
// connections.
func (p *cutProxy) serverPorts() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.ports...)
}

// silence cuts the proxy.
func (p *cutProxy) silence() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
}

// close stops the proxy and closes every connection.
func (p *cutProxy) close() {
	p.silence()
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// proxiedPool is a pool on the database of dbURL that reaches it through a
// new cutProxy.
func proxiedPool(t *testing.T, dbURL string) (*pgxpool.Pool, *cutProxy) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	require.NoError(t, err)
	proxy := newCutProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", proxy.port()
	cfg.ConnConfig.ConnectTimeout = time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, proxy
}

// events is an ordered record of what happened, from any goroutine.
type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) add(what string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, what)
}

func (e *events) has(what string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, w := range e.list {
		if w == what {
			return true
		}
	}
	return false
}

func (e *events) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.list...)
}

// A live process cut off from the database: the network goes silent (it
// sees no error, its pings get no answer) and the server ends its
// sessions, which frees its presence lock. Another process's sweep hands
// its running job away once the lock has been free for Grace; the cut-off
// process has stopped working the job before that sweep began, and the
// job goes back to the queue without using an attempt.
func TestCutOffProcessStopsItsJobsBeforeTheyAreHandedAway(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	eng, err := engine.New(engine.Config{Pool: pool})
	require.NoError(t, err)
	const grace = 2 * time.Second
	sweeper := startPresence(t, pool, eng, "sweeper", grace)

	cutPool, proxy := proxiedPool(t, dbURL)
	cutEngine, err := engine.New(engine.Config{Pool: cutPool})
	require.NoError(t, err)
	fence := NewFence()
	cutOff, err := StartPresence(ctx, cutPool, PresenceConfig{Engine: cutEngine, ClientID: "cut-off", Fence: fence,
		SweepInterval: 100 * time.Millisecond, Grace: grace, FenceAfter: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() {
		proxy.close()
		cutOff.Stop(ctx)
	})

	// The job the cut-off process is working: River runs it through the
	// fence, and it works until its context ends.
	job := runningJob(t, pool, 1, 25, `{}`, "cut-off")
	log := &events{}
	worked := make(chan error, 1)
	go func() {
		worked <- fence.Work(ctx, &rivertype.JobRow{ID: job}, func(ctx context.Context) error {
			log.add("working")
			<-ctx.Done()
			if errors.Is(context.Cause(ctx), ErrFenced) {
				log.add("stopped: fenced")
			}
			return ctx.Err()
		})
	}()
	require.Eventually(t, func() bool { return log.has("working") }, 10*time.Second, 5*time.Millisecond)

	proxy.silence()
	// The server ends the cut-off process's sessions (a failover, or its
	// own dead-peer detection): its presence lock is free.
	ports := proxy.serverPorts()
	require.NotEmpty(t, ports)
	_, err = pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE client_port = ANY($1)`, ports)
	require.NoError(t, err)

	deadline := time.Now().Add(30 * time.Second)
	for {
		require.True(t, time.Now().Before(deadline), "the sweep never declared the cut-off process dead: %v", log.all())
		stoppedBefore := log.has("stopped: fenced")
		s, err := sweeper.Sweep(ctx)
		require.NoError(t, err)
		if len(s.Dead) > 0 {
			require.Equal(t, []string{"cut-off"}, s.Dead)
			require.Equal(t, 1, s.HandedBack)
			log.add("handed away")
			require.True(t, stoppedBefore, "the job was still worked when the sweep that handed it away began: %v", log.all())
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, []string{"working", "stopped: fenced", "handed away"}, log.all())
	var snooze *rivertype.JobSnoozeError
	require.ErrorAs(t, <-worked, &snooze, "a fenced job is snoozed, not failed")
	require.Zero(t, snooze.Duration)
	require.True(t, fence.Fenced(), "still cut off: it works nothing")
	require.Equal(t, "available", readJob(t, pool, job).State)
}

// blockArgs are the args of a job that works until its context ends or
// the test lets it finish.
type blockArgs struct{}

func (blockArgs) Kind() string { return "test.block" }

type blockWorker struct {
	river.WorkerDefaults[blockArgs]
	started chan struct{}
	finish  chan struct{}
	causes  chan error
}

func (w *blockWorker) Work(ctx context.Context, _ *river.Job[blockArgs]) error {
	w.started <- struct{}{}
	select {
	case <-w.finish:
		return nil
	case <-ctx.Done():
		w.causes <- context.Cause(ctx)
		return ctx.Err()
	}
}

// Through River: a job running when the fence goes up has its context
// cancelled and goes back to the queue without using an attempt; while
// the fence is up the job is not worked; once it is lifted the job runs
// again and completes.
func TestFencedRiverJobGoesBackAndRunsOnceLifted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	fence := NewFence()
	w := &blockWorker{started: make(chan struct{}, 4), finish: make(chan struct{}), causes: make(chan error, 4)}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	rc, err := RiverConfig(Config{Fence: fence}, workers)
	require.NoError(t, err)
	client, err := river.NewClient(riverpgxv5.New(pool), rc)
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(stopCtx)
	})
	inserted, err := client.Insert(ctx, blockArgs{}, &river.InsertOpts{Queue: QueueHigh})
	require.NoError(t, err)
	id := inserted.Job.ID

	waitStarted := func() {
		select {
		case <-w.started:
		case <-time.After(20 * time.Second):
			t.Fatal("the job never started")
		}
	}
	waitStarted()
	require.True(t, fence.fence())
	require.ErrorIs(t, <-w.causes, ErrFenced)
	require.Eventually(t, func() bool {
		var snoozes int
		err := pool.QueryRow(ctx, `SELECT coalesce((metadata->>'snoozes')::int, 0) FROM river_job WHERE id = $1`, id).Scan(&snoozes)
		return err == nil && snoozes >= 2
	}, 20*time.Second, 20*time.Millisecond, "snoozed when fenced, and again when fetched while fenced")
	select {
	case <-w.started:
		t.Fatal("a job was worked while the fence was up")
	default:
	}
	var attempt int
	var errs []byte
	require.NoError(t, pool.QueryRow(ctx, `SELECT attempt, coalesce(errors::text, '')::bytea FROM river_job WHERE id = $1`, id).Scan(&attempt, &errs))
	require.LessOrEqual(t, attempt, 1, "snoozes use no attempt")
	require.Empty(t, string(errs), "a fenced job has not failed")

	require.True(t, fence.lift())
	waitStarted()
	close(w.finish)
	require.Eventually(t, func() bool { return readJob(t, pool, id).State == "completed" }, 20*time.Second, 20*time.Millisecond)
}
