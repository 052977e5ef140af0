package retention_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/jobs"
	"github.com/batonrun/baton/retention"
)

// week is the test policy's execution and inbound retention; day its
// replay window. Tests age rows past them with SQL rather than wait.
const (
	week = 7 * 24 * time.Hour
	day  = 24 * time.Hour
)

// policy is the configuration's default policy.
var policy = retention.Policy{Executions: week, Idempotency: day, Inbound: week}

type bundle struct {
	pool    *pgxpool.Pool
	engine  *engine.Engine
	channel *switchChannel
	tenant  string
}

type setupOpts struct {
	tools map[string]engine.ToolFunc
	// sweeper, when set, runs the periodic retention.sweep job.
	sweeper func(*pgxpool.Pool) *retention.Sweeper
	// allowHosts and secret enable callbacks.
	allowHosts []string
	secret     string
}

var tenantSeq atomic.Int64

// setup runs an engine and its River workers on a database of the test's
// own. The lock reaper does not run: a test that records a lock holder by
// hand keeps it.
func setup(t *testing.T, opts setupOpts) *bundle {
	t.Helper()
	pool := pgtest.NewPool(t)
	tools := engine.NewTools()
	for name, fn := range opts.tools {
		tools.Register(name, fn)
	}
	channel := &switchChannel{}
	eng, err := engine.New(engine.Config{Pool: pool, Tools: tools, Channel: channel,
		CallbackAllowHosts: opts.allowHosts, CallbackSecret: []byte(opts.secret)})
	require.NoError(t, err)
	cfg := jobs.Config{Engine: eng, LockReapInterval: -1}
	if opts.sweeper != nil {
		cfg.Retention = opts.sweeper(pool)
	}
	client, err := jobs.NewClient(pool, cfg)
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(ctx)
	})
	t.Cleanup(eng.DeliverPromptly(8))
	return &bundle{pool: pool, engine: eng, channel: channel, tenant: fmt.Sprintf("tenant-%d", tenantSeq.Add(1))}
}

// switchChannel is the outbound channel: it delivers to memory, or refuses
// every message while failing is set.
type switchChannel struct {
	engine.MemoryChannel
	failing atomic.Bool
}

func (c *switchChannel) Deliver(ctx context.Context, msg engine.OutboundMessage) error {
	if c.failing.Load() {
		return errors.New("channel down")
	}
	return c.MemoryChannel.Deliver(ctx, msg)
}

func (b *bundle) define(t *testing.T, definition string) {
	t.Helper()
	_, _, err := b.engine.DefineWorkflow(context.Background(), b.pool, b.tenant, []byte(definition))
	require.NoError(t, err)
}

func (b *bundle) start(t *testing.T, p engine.StartParams) *engine.Execution {
	t.Helper()
	if p.TenantID == "" {
		p.TenantID = b.tenant
	}
	var x *engine.Execution
	require.NoError(t, b.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
		var err error
		x, err = b.engine.StartExecution(context.Background(), tx, p)
		return err
	}))
	return x
}

func (b *bundle) get(t *testing.T, executionID string) *engine.Execution {
	t.Helper()
	x, err := b.engine.GetExecution(context.Background(), b.pool, b.tenant, executionID)
	require.NoError(t, err)
	return x
}

// waitFor polls until the execution satisfies done.
func (b *bundle) waitFor(t *testing.T, executionID string, done func(*engine.Execution) bool) *engine.Execution {
	t.Helper()
	var x *engine.Execution
	require.Eventually(t, func() bool {
		x = b.get(t, executionID)
		return done(x)
	}, 20*time.Second, 20*time.Millisecond, "execution %s never reached the state", executionID)
	return x
}

func terminal(x *engine.Execution) bool { return engine.IsTerminal(x.Status) }

func waiting(x *engine.Execution) bool { return x.Status == engine.StatusWaiting }

// inbound sends a user's message to a thread.
func (b *bundle) inbound(t *testing.T, thread, text, messageID string) *engine.InboundResult {
	t.Helper()
	var res *engine.InboundResult
	require.NoError(t, b.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
		var err error
		res, err = b.engine.ReceiveInboundTx(context.Background(), tx, engine.InboundParams{TenantID: b.tenant, ThreadID: thread, Text: text, MessageID: messageID})
		return err
	}))
	return res
}

func (b *bundle) thread(t *testing.T, thread, defaultWorkflow string) {
	t.Helper()
	_, _, err := b.engine.UpsertThread(context.Background(), b.pool, engine.ThreadUpsert{TenantID: b.tenant, ThreadID: thread,
		Channel: "whatsapp", Contact: "+52" + thread, DefaultWorkflowID: defaultWorkflow})
	require.NoError(t, err)
}

// age moves an ended execution's end back by ago.
func (b *bundle) age(t *testing.T, executionID string, ago time.Duration) {
	t.Helper()
	tag, err := b.pool.Exec(context.Background(), `UPDATE agent_execution SET completed_at = completed_at - make_interval(secs => $3)
		WHERE tenant_id = $1 AND execution_id = $2 AND completed_at IS NOT NULL`, b.tenant, executionID, ago.Seconds())
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), "execution %s has not ended", executionID)
}

// exists reports whether the execution's row is still there.
func (b *bundle) exists(t *testing.T, executionID string) bool {
	t.Helper()
	_, err := b.engine.GetExecution(context.Background(), b.pool, b.tenant, executionID)
	if errors.Is(err, engine.ErrNotFound) {
		return false
	}
	require.NoError(t, err)
	return true
}

// rowID is the execution's row id.
func (b *bundle) rowID(t *testing.T, executionID string) int64 {
	t.Helper()
	return b.get(t, executionID).ID
}

// sweep runs one sweep with cfg (the test policy when cfg.Default is zero).
func (b *bundle) sweep(t *testing.T, cfg retention.Config) retention.Result {
	t.Helper()
	if cfg.Default == (retention.Policy{}) {
		cfg.Default = policy
	}
	res, err := retention.New(b.pool, cfg).Sweep(context.Background())
	require.NoError(t, err)
	require.False(t, res.More)
	return res
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// gate is a tool that holds each call until the test opens its key.
type gate struct {
	mu   sync.Mutex
	open map[string]chan struct{}
	in   chan string
}

func newGate() *gate { return &gate{open: map[string]chan struct{}{}, in: make(chan string, 64)} }

func (g *gate) ch(key string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open[key] == nil {
		g.open[key] = make(chan struct{})
	}
	return g.open[key]
}

func (g *gate) tool(ctx context.Context, call engine.ToolCall) (map[string]any, error) {
	key, _ := call.Inputs["key"].(string)
	g.in <- key
	select {
	case <-g.ch(key):
		return map[string]any{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (g *gate) release(key string) { close(g.ch(key)) }

// entered waits until a call with key is held.
func (g *gate) entered(t *testing.T, key string) {
	t.Helper()
	select {
	case got := <-g.in:
		require.Equal(t, key, got)
	case <-time.After(20 * time.Second):
		t.Fatalf("tool call %q never came", key)
	}
}
