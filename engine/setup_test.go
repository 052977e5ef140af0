package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/jobs"
)

type testBundle struct {
	pool    *pgxpool.Pool
	engine  *engine.Engine
	client  *river.Client[pgx.Tx]
	channel *engine.MemoryChannel
	tools   *engine.Tools
	tenant  string
}

type setupOpts struct {
	// insertOnly leaves jobs in the queue: nothing works them, and first
	// steps are jobs too.
	insertOnly bool
	// tools registers Go tools before the client starts.
	tools map[string]engine.ToolFunc
	// lockTimeout overrides the stale-lock age.
	lockTimeout time.Duration
	// deferFirstStep leaves first steps to River jobs.
	deferFirstStep bool
	// specs registers http and llm tools.
	specs map[string]engine.ToolSpec
	// allowHosts and secret configure callbacks.
	allowHosts []string
	secret     string
	// laneLimits overrides lane limits.
	laneLimits map[string]int
	// queue is the global inbound queue configuration.
	queue engine.QueueConfig
	// logger receives the engine's log lines; nil discards them.
	logger *slog.Logger
	// stepReapInterval, stepRescueAfter and maxStepRecoveries configure
	// the step reaper; zero values take the defaults.
	stepReapInterval  time.Duration
	stepRescueAfter   time.Duration
	maxStepRecoveries int
}

var tenantSeq atomic.Int64

func setup(t *testing.T, opts setupOpts) *testBundle {
	t.Helper()
	pool := pgtest.NewPool(t)
	tools := engine.NewTools()
	for name, fn := range opts.tools {
		tools.Register(name, fn)
	}
	for name, spec := range opts.specs {
		require.NoError(t, tools.RegisterSpec(name, spec))
	}
	channel := &engine.MemoryChannel{}
	eng, err := engine.New(engine.Config{Pool: pool, Tools: tools, Channel: channel, LockTimeout: opts.lockTimeout, DeferFirstStep: opts.insertOnly || opts.deferFirstStep,
		CallbackAllowHosts: opts.allowHosts, CallbackSecret: []byte(opts.secret), LaneLimits: opts.laneLimits, Queue: opts.queue, Logger: opts.logger,
		StepRescueAfter: opts.stepRescueAfter, MaxStepRecoveries: opts.maxStepRecoveries})
	require.NoError(t, err)
	client, err := jobs.NewClient(pool, jobs.Config{Engine: eng, InsertOnly: opts.insertOnly, StepReapInterval: opts.stepReapInterval})
	require.NoError(t, err)
	if !opts.insertOnly {
		startClient(t, client)
		t.Cleanup(eng.DeliverPromptly(8))
	}
	return &testBundle{
		pool: pool, engine: eng, client: client, channel: channel, tools: tools,
		tenant: fmt.Sprintf("tenant-%d", tenantSeq.Add(1)),
	}
}

func startClient(t *testing.T, client *river.Client[pgx.Tx]) {
	t.Helper()
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(ctx)
	})
}

func (b *testBundle) define(t *testing.T, definition string) *engine.StoredDefinition {
	t.Helper()
	def, _, err := b.engine.DefineWorkflow(context.Background(), b.pool, b.tenant, []byte(definition))
	require.NoError(t, err)
	return def
}

func (b *testBundle) start(t *testing.T, p engine.StartParams) *engine.Execution {
	t.Helper()
	if p.TenantID == "" {
		p.TenantID = b.tenant
	}
	var x *engine.Execution
	err := b.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
		var err error
		x, err = b.engine.StartExecution(context.Background(), tx, p)
		return err
	})
	require.NoError(t, err)
	return x
}

func (b *testBundle) get(t *testing.T, executionID string) *engine.Execution {
	t.Helper()
	x, err := b.engine.GetExecution(context.Background(), b.pool, b.tenant, executionID)
	require.NoError(t, err)
	return x
}

// waitFor polls until the execution satisfies done or the deadline passes.
func (b *testBundle) waitFor(t *testing.T, executionID string, done func(*engine.Execution) bool) *engine.Execution {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		x := b.get(t, executionID)
		if done(x) {
			return x
		}
		if time.Now().After(deadline) {
			raw, _ := json.Marshal(x)
			t.Fatalf("execution %s did not reach the expected state; last: %s", executionID, raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// blockUntil is a tool that returns once release is closed (or its call is
// cancelled).
func blockUntil(release <-chan struct{}) engine.ToolFunc {
	return func(ctx context.Context, call engine.ToolCall) (map[string]any, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return map[string]any{}, nil
	}
}

func terminal(x *engine.Execution) bool { return engine.IsTerminal(x.Status) }

// countRows runs a count query with arguments.
func countRows(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}
