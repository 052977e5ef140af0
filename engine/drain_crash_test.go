package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

// hookReceiver is a webhook that records every POST it gets, in arrival
// order, and can hang on one of them until the sender goes away.
type hookReceiver struct {
	mu       sync.Mutex
	arrivals []hookArrival
	// blockAt is the arrival (1-based) the receiver hangs on; 0 never.
	blockAt atomic.Int32
	blocked chan struct{}
}

type hookArrival struct{ id, text string }

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var msg struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(body, &msg)
	h.mu.Lock()
	h.arrivals = append(h.arrivals, hookArrival{id: r.Header.Get("X-Baton-Message-ID"), text: msg.Text})
	n := len(h.arrivals)
	h.mu.Unlock()
	if int32(n) == h.blockAt.Load() {
		close(h.blocked)
		<-r.Context().Done() // the sender dies with this message in flight
		return
	}
}

// deduped returns the texts in first-arrival order and how often each
// message id arrived.
func (h *hookReceiver) deduped() ([]string, map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var texts []string
	seen := map[string]int{}
	for _, a := range h.arrivals {
		if seen[a.id] == 0 {
			texts = append(texts, a.text)
		}
		seen[a.id]++
	}
	return texts, seen
}

// worker is one process's engine and River client on its own pool.
type worker struct {
	pool   *pgxpool.Pool
	engine *engine.Engine
	client *river.Client[pgx.Tx]
	gate   *gate
}

func newWorker(t *testing.T, url, hookURL string) *worker {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	g := newGate()
	tools := engine.NewTools()
	tools.Register("gate", g.tool)
	eng, err := engine.New(engine.Config{Pool: pool, Tools: tools, Channel: &engine.WebhookChannel{URL: hookURL}})
	require.NoError(t, err)
	client, err := jobs.NewClient(pool, jobs.Config{Engine: eng})
	require.NoError(t, err)
	startClient(t, client)
	return &worker{pool: pool, engine: eng, client: client, gate: g}
}

// The worker dies in the middle of delivering a drain (the webhook
// hangs on a message, the River client is stopped with its jobs cancelled
// and its pool closed). A new worker on its own pool sends the rest in
// order: the receiver sees each message id at most twice (at least once
// delivery, the one in flight again), the deduplicated sequence is the
// thread's FIFO order, and every message is in the outbox exactly once.
func TestDrainSurvivesWorkerDeath(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	hook := &hookReceiver{blocked: make(chan struct{})}
	hook.blockAt.Store(8) // H#0, X1#0..4, X2#0, then hang on X2#1
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)

	observer, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(observer.Close)
	a := newWorker(t, url, srv.URL)
	const tenant = "tenant-drain-crash"
	define := func(def string) {
		_, _, err := a.engine.DefineWorkflow(context.Background(), a.pool, tenant, []byte(def))
		require.NoError(t, err)
	}
	msgs := func(who string, from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("%s#%d", who, i))
		}
		return out
	}
	define(talker("holder", msgs("H", 0, 1), nil))
	for _, who := range []string{"X1", "X2", "X3", "X5", "X6"} {
		define(sender(who, msgs(who, 0, 5)))
	}
	define(talker("X4", msgs("X4", 0, 5), msgs("X4", 5, 6)))
	start := func(workflow, key string) string {
		var x *engine.Execution
		require.NoError(t, a.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
			var err error
			x, err = a.engine.StartExecution(context.Background(), tx, engine.StartParams{TenantID: tenant, WorkflowID: workflow,
				ThreadID: "hot", Input: map[string]any{"key": key}})
			return err
		}))
		return x.ExecutionID
	}
	status := func(executionID string) string {
		var s string
		require.NoError(t, observer.QueryRow(context.Background(), `SELECT status::text FROM agent_execution WHERE execution_id = $1`, executionID).Scan(&s))
		return s
	}
	waitStatus := func(executionID, want string) {
		require.Eventually(t, func() bool { return status(executionID) == want }, 30*time.Second, 20*time.Millisecond,
			"execution %s: %s", executionID, status(executionID))
	}

	// H holds the thread; X1..X6 queue five messages each in turn. X4 stays
	// live (in a gated tool call) after queueing, the others end.
	h := start("holder", "h")
	a.gate.waitEntered(t, "h")
	var ids []string
	for _, who := range []string{"X1", "X2", "X3", "X4", "X5", "X6"} {
		ids = append(ids, start(who, strings.ToLower(who)))
		if who == "X4" {
			a.gate.waitEntered(t, "x4")
		} else {
			waitStatus(ids[len(ids)-1], "completed")
		}
	}
	require.Equal(t, 30, countRows(t, a.pool, `SELECT count(*) FROM thread_message WHERE status = 'queued'`))

	// H ends: the drain hands X1..X3's messages and X4's queued ones to the
	// outbox and makes X4 the holder; the webhook hangs on the eighth.
	a.gate.release("h")
	select {
	case <-hook.blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook never got its eighth message")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	require.NoError(t, a.client.StopAndCancel(ctx))
	cancel()
	a.pool.Close()

	before, _ := hook.deduped()
	require.Equal(t, []string{"H#0", "X1#0", "X1#1", "X1#2", "X1#3", "X1#4", "X2#0", "X2#1"}, before)

	// A new worker takes over; X4's interrupted tool call runs again there.
	b := newWorker(t, url, srv.URL)
	b.gate.waitEntered(t, "x4")
	b.gate.release("x4")
	require.Eventually(t, func() bool {
		return countRows(t, b.pool, `SELECT count(*) FROM agent_execution WHERE status <> 'completed'`) == 0 &&
			countRows(t, b.pool, `SELECT count(*) FROM thread_message WHERE status <> 'delivered'`) == 0
	}, 60*time.Second, 50*time.Millisecond)
	require.Equal(t, "completed", status(h))

	want := msgs("H", 0, 1)
	for _, who := range []string{"X1", "X2", "X3"} {
		want = append(want, msgs(who, 0, 5)...)
	}
	want = append(want, msgs("X4", 0, 6)...)
	want = append(want, msgs("X5", 0, 5)...)
	want = append(want, msgs("X6", 0, 5)...)
	got, seen := hook.deduped()
	require.Equal(t, want, got, "deduplicated delivery order")
	twice, arrivals := 0, 0
	for id, n := range seen {
		arrivals += n
		require.LessOrEqual(t, n, 2, "message %s arrived %d times", id, n)
		if n == 2 {
			twice++
		}
	}
	require.LessOrEqual(t, twice, 1, "only the message in flight may arrive again")
	t.Logf("%d arrivals, %d message(s) arrived twice", arrivals, twice)
	require.Len(t, seen, len(want))

	// The outbox holds each message exactly once, delivered, in delivery
	// order.
	rows, err := b.pool.Query(context.Background(), `SELECT body FROM thread_message ORDER BY delivery_seq, id`)
	require.NoError(t, err)
	bodies, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, want, bodies)
	require.Equal(t, len(want), countRows(t, b.pool, `SELECT count(DISTINCT body) FROM thread_message WHERE status = 'delivered'`))
}

// sender is start → its messages → end.
func sender(id string, messages []string) string {
	nodes := []string{`{"id": "start", "type": "start", "next": "m0"}`}
	for i, m := range messages {
		next := fmt.Sprintf("m%d", i+1)
		if i == len(messages)-1 {
			next = "end"
		}
		nodes = append(nodes, fmt.Sprintf(`{"id": "m%d", "type": "action", "actionType": "send_message", "parameters": {"message": %q}, "next": %q}`, i, m, next))
	}
	nodes = append(nodes, `{"id": "end", "type": "end"}`)
	return fmt.Sprintf(`{"workflow_id": %q, "version": "1", "nodes": [%s]}`, id, strings.Join(nodes, ","))
}
