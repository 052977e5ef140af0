package engine_test

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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/jobs"
)

// gateChannel records deliveries; while failing is set it refuses them, and
// while gate is open (not nil) a delivery waits until the gate closes or
// its context ends.
type gateChannel struct {
	engine.MemoryChannel
	failing atomic.Bool
	mu      sync.Mutex
	gate    chan struct{}
	calls   atomic.Int32
}

func (c *gateChannel) Deliver(ctx context.Context, msg engine.OutboundMessage) error {
	c.calls.Add(1)
	c.mu.Lock()
	gate := c.gate
	c.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if c.failing.Load() {
		return errors.New("channel down")
	}
	return c.MemoryChannel.Deliver(ctx, msg)
}

// promptBundle is an engine with prompt delivery on and a River client
// working jobs, over a channel.
type promptBundle struct {
	eng  *engine.Engine
	pool *pgxpool.Pool
	stop func()
}

func newPromptBundle(t *testing.T, channel engine.ChannelAdapter, workers int) *promptBundle {
	t.Helper()
	pool := pgtest.NewPool(t)
	// The outbox reaper stays out of these tests: what they show are the
	// hand-overs to jobs of a live process.
	eng, err := engine.New(engine.Config{Pool: pool, Channel: channel, DeliveryRescueAfter: time.Hour})
	require.NoError(t, err)
	client, err := jobs.NewClient(pool, jobs.Config{Engine: eng})
	require.NoError(t, err)
	startClient(t, client)
	var once sync.Once
	stop := eng.DeliverPromptly(workers)
	b := &promptBundle{eng: eng, pool: pool, stop: func() { once.Do(stop) }}
	t.Cleanup(b.stop)
	_, _, err = eng.DefineWorkflow(context.Background(), pool, "tenant-prompt", []byte(greetWorkflow))
	require.NoError(t, err)
	return b
}

// greet starts a run that sends one message on the thread, in a WithTx
// transaction.
func (b *promptBundle) greet(t *testing.T, thread string) {
	t.Helper()
	require.NoError(t, b.eng.WithTx(context.Background(), func(tx pgx.Tx) error {
		_, err := b.eng.StartExecution(context.Background(), tx, engine.StartParams{TenantID: "tenant-prompt", WorkflowID: "greet", ThreadID: thread})
		return err
	}))
}

// Conditions on message.deliver jobs, for deliveryJobs.
const (
	// anyJob: in any state.
	anyJob = `true`
	// liveJob: not finalized.
	liveJob = `state NOT IN ('completed', 'discarded', 'cancelled')`
	// failed: an attempt of it failed.
	failed = `cardinality(errors) >= 1`
	// running: being worked.
	running = `state = 'running'`
)

// deliveryJobs counts the message.deliver jobs that meet cond.
func (b *promptBundle) deliveryJobs(t *testing.T, cond string) int {
	return countRows(t, b.pool, `SELECT count(*) FROM river_job WHERE kind = 'message.deliver' AND `+cond)
}

// A message sent from a WithTx transaction goes out right after the commit,
// without River: no delivery job is inserted.
func TestPromptDeliveryInsertsNoJob(t *testing.T) {
	t.Parallel()
	channel := &gateChannel{}
	b := newPromptBundle(t, channel, 20) // a slot for each: none is handed to a job for want of one
	for i := range 20 {
		b.greet(t, fmt.Sprintf("prompt-%d", i))
	}
	require.Eventually(t, func() bool { return len(channel.Messages()) == 20 && b.deliveryJobs(t, anyJob) == 0 }, 10*time.Second, 10*time.Millisecond,
		"every message delivered, none by River")
	require.Equal(t, int32(20), channel.calls.Load(), "each message went to the channel once")
}

// A prompt delivery the channel refuses hands the message to a job, due at
// once; River retries it until the channel takes it.
func TestPromptDeliveryFailureGoesToItsJob(t *testing.T) {
	t.Parallel()
	channel := &gateChannel{}
	channel.failing.Store(true)
	b := newPromptBundle(t, channel, 4)
	b.greet(t, "refused")
	require.Eventually(t, func() bool { return b.deliveryJobs(t, failed) == 1 }, 10*time.Second, 10*time.Millisecond,
		"a job tried again after the prompt delivery failed")
	channel.failing.Store(false)
	require.Eventually(t, func() bool { return len(channel.Messages()) == 1 && b.deliveryJobs(t, liveJob) == 0 }, 20*time.Second, 10*time.Millisecond)
}

// A prompt delivery cut short by the process stopping hands the message to
// a job, which delivers it.
func TestPromptDeliveryCutShortGoesToAJob(t *testing.T) {
	t.Parallel()
	channel := &gateChannel{gate: make(chan struct{})}
	b := newPromptBundle(t, channel, 4)
	b.greet(t, "cut-short")
	require.Eventually(t, func() bool { return channel.calls.Load() == 1 }, 10*time.Second, 10*time.Millisecond)
	b.stop() // the delivery in flight ends with its context
	channel.mu.Lock()
	channel.gate = nil
	channel.mu.Unlock()
	require.Empty(t, channel.Messages())
	require.Eventually(t, func() bool { return len(channel.Messages()) == 1 && b.deliveryJobs(t, liveJob) == 0 }, 20*time.Second, 10*time.Millisecond,
		"the job delivered the message")
}

// With every prompt slot busy, a new delivery goes to a job at once.
func TestPromptDeliveryWhenBusyGoesToItsJob(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	channel := &gateChannel{gate: gate}
	b := newPromptBundle(t, channel, 1)
	b.greet(t, "busy-a")
	require.Eventually(t, func() bool { return channel.calls.Load() == 1 }, 10*time.Second, 10*time.Millisecond)
	b.greet(t, "busy-b") // its thread's delivery cannot get the one goroutine
	require.Eventually(t, func() bool { return channel.calls.Load() == 2 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, b.deliveryJobs(t, running), "River took the second delivery at once")
	close(gate)
	require.Eventually(t, func() bool { return len(channel.Messages()) == 2 && b.deliveryJobs(t, liveJob) == 0 }, 10*time.Second, 10*time.Millisecond)
}

// A delivery job that finds its thread's outbox held by another session
// while messages are pending does not end: it snoozes until the outbox is
// free, then delivers, so a holder that dies before delivering never
// leaves a message without a job.
func TestDeliveryJobWaitsForAHeldOutbox(t *testing.T) {
	t.Parallel()
	channel := &gateChannel{}
	b := newPromptBundle(t, channel, 4)
	ctx := context.Background()
	holder, err := b.pool.Acquire(ctx)
	require.NoError(t, err)
	defer holder.Release()
	// Not a WithTx transaction: the job is due at once, and nothing
	// delivers promptly.
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = b.eng.StartExecution(ctx, tx, engine.StartParams{TenantID: "tenant-prompt", WorkflowID: "greet", ThreadID: "held"})
	require.NoError(t, err)
	var threadID int64
	require.NoError(t, tx.QueryRow(ctx, `SELECT id FROM thread WHERE thread_id = 'held'`).Scan(&threadID))
	_, err = holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, engine.OutboxLockBase|threadID)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	ok := assert.Eventually(t, func() bool {
		return b.deliveryJobs(t, `state IN ('scheduled', 'available') AND (metadata->>'snoozes')::int >= 1`) == 1
	}, 10*time.Second, 10*time.Millisecond, "the job found the outbox held and snoozed")
	if !ok {
		rows, _ := b.pool.Query(ctx, `SELECT state, attempt, metadata::text, coalesce(errors::text,'') FROM river_job WHERE kind = 'message.deliver'`)
		for rows.Next() {
			var st, md, er string
			var at int
			_ = rows.Scan(&st, &at, &md, &er)
			t.Logf("job %s attempt %d metadata %s errors %s", st, at, md, er)
		}
		t.FailNow()
	}
	require.Empty(t, channel.Messages())
	_, err = holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, engine.OutboxLockBase|threadID)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(channel.Messages()) == 1 && b.deliveryJobs(t, liveJob) == 0 }, 10*time.Second, 10*time.Millisecond,
		"once the outbox was free the job delivered the message")
}

// A process that dies between a commit and its prompt delivery leaves the
// message pending with no job; the outbox reaper of another process finds
// it once it has waited DeliveryRescueAfter and enqueues its delivery,
// which that process's River delivers, once.
func TestOutboxReaperDeliversWhatADeadProcessLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)

	// The process that dies: it delivers promptly, works no jobs, and its
	// channel never answers.
	deadConfig, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	deadConfig.ConnConfig.RuntimeParams["application_name"] = "dying-process"
	// Once dead, it reaches the database no more, not even through a
	// connection whose session has not ended yet: what it left is the
	// reaper's.
	var died atomic.Bool
	deadConfig.BeforeConnect = func(context.Context, *pgx.ConnConfig) error {
		if died.Load() {
			return errors.New("the process is dead")
		}
		return nil
	}
	deadConfig.PrepareConn = func(context.Context, *pgx.Conn) (bool, error) {
		if died.Load() {
			return false, errors.New("the process is dead")
		}
		return true, nil
	}
	deadPool, err := pgxpool.NewWithConfig(ctx, deadConfig)
	require.NoError(t, err)
	t.Cleanup(deadPool.Close)
	stuck := &gateChannel{gate: make(chan struct{})}
	dead, err := engine.New(engine.Config{Pool: deadPool, Channel: stuck})
	require.NoError(t, err)
	_, err = jobs.NewClient(deadPool, jobs.Config{Engine: dead, InsertOnly: true}) // its job inserter
	require.NoError(t, err)
	t.Cleanup(dead.DeliverPromptly(4))

	// The survivor works River jobs, its outbox reaper among them.
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	channel := &gateChannel{}
	survivor, err := engine.New(engine.Config{Pool: pool, Channel: channel, DeliveryRescueAfter: 500 * time.Millisecond})
	require.NoError(t, err)
	client, err := jobs.NewClient(pool, jobs.Config{Engine: survivor, DeliverReapInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	startClient(t, client)
	_, _, err = survivor.DefineWorkflow(ctx, pool, "tenant-prompt", []byte(greetWorkflow))
	require.NoError(t, err)

	require.NoError(t, dead.WithTx(ctx, func(tx pgx.Tx) error {
		_, err := dead.StartExecution(ctx, tx, engine.StartParams{TenantID: "tenant-prompt", WorkflowID: "greet", ThreadID: "orphan"})
		return err
	}))
	require.Eventually(t, func() bool { return stuck.calls.Load() == 1 }, 10*time.Second, 10*time.Millisecond,
		"the dying process took the message to its channel")
	require.Equal(t, 0, countRows(t, pool, `SELECT count(*) FROM river_job WHERE kind = 'message.deliver'`),
		"a prompt delivery has no job")
	// It dies: its sessions end, and with them its outbox lock.
	died.Store(true)
	require.Equal(t, 0, countRows(t, pool, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = 'dying-process') k WHERE NOT pg_terminate_backend`))

	require.Eventually(t, func() bool { return len(channel.Messages()) == 1 }, 20*time.Second, 10*time.Millisecond,
		"the survivor delivered the message")
	require.Eventually(t, func() bool {
		return countRows(t, pool, `SELECT count(*) FROM river_job WHERE kind = 'message.deliver' AND `+liveJob) == 0
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM thread_message WHERE status = 'delivered'`))
	require.Equal(t, 1, countRows(t, pool, `SELECT count(*) FROM river_job WHERE kind = 'message.deliver'`),
		"one job delivered it")
	require.Equal(t, int32(1), channel.calls.Load(), "the survivor's channel was offered it once")
	require.Equal(t, int32(1), stuck.calls.Load(), "the dead process offered it once")
	reaps := countRows(t, pool, `SELECT count(*) FROM river_job WHERE kind = 'message.deliver_reap' AND state = 'completed'`)
	require.Positive(t, reaps, "the outbox reaper ran as a River job")
}
