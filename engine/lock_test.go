package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
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

// gate is a tool that blocks each call until the test opens its gate.
type gate struct {
	mu      sync.Mutex
	entered chan string
	open    map[string]chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan string, 16), open: map[string]chan struct{}{}} }

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
	g.entered <- key
	select {
	case <-g.ch(key):
		return map[string]any{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (g *gate) release(key string) { close(g.ch(key)) }

func (g *gate) waitEntered(t *testing.T, key string) {
	t.Helper()
	select {
	case got := <-g.entered:
		require.Equal(t, key, got)
	case <-time.After(20 * time.Second):
		t.Fatalf("tool call %q never came", key)
	}
}

// talker sends its messages, then holds its turn in a gated tool call, then
// optionally sends more.
func talker(id string, before []string, after []string) string {
	var nodes []string
	prev := "start"
	add := func(node string, id string) {
		nodes = append(nodes, node)
		_ = prev
		prev = id
	}
	nodes = append(nodes, `{"id": "start", "type": "start", "next": "b0"}`)
	for i, m := range before {
		next := fmt.Sprintf("b%d", i+1)
		if i == len(before)-1 {
			next = "hold"
		}
		add(fmt.Sprintf(`{"id": "b%d", "type": "action", "actionType": "send_message", "parameters": {"message": %q}, "next": %q}`, i, m, next), fmt.Sprintf("b%d", i))
	}
	afterFirst := "end"
	if len(after) > 0 {
		afterFirst = "a0"
	}
	nodes = append(nodes, fmt.Sprintf(`{"id": "hold", "type": "task", "task": "gate", "inputs": {"key": "{{key}}"}, "next": %q}`, afterFirst))
	for i, m := range after {
		next := fmt.Sprintf("a%d", i+1)
		if i == len(after)-1 {
			next = "end"
		}
		nodes = append(nodes, fmt.Sprintf(`{"id": "a%d", "type": "action", "actionType": "send_message", "parameters": {"message": %q}, "next": %q}`, i, m, next))
	}
	nodes = append(nodes, `{"id": "end", "type": "end"}`)
	return fmt.Sprintf(`{"workflow_id": %q, "version": "1", "nodes": [%s]}`, id, strings.Join(nodes, ","))
}

func (b *testBundle) deliveredBodies(t *testing.T, thread string) []string {
	t.Helper()
	var out []string
	for _, m := range b.channel.Messages() {
		if m.ThreadID == thread {
			out = append(out, m.Body)
		}
	}
	return out
}

func (b *testBundle) waitDelivered(t *testing.T, thread string, n int) []string {
	t.Helper()
	require.Eventually(t, func() bool { return len(b.deliveredBodies(t, thread)) >= n }, 20*time.Second, 20*time.Millisecond,
		"delivered so far: %v", b.deliveredBodies(t, thread))
	return b.deliveredBodies(t, thread)
}

// Two independent agents: agent A holds the thread; agent B's message queues
// and goes out when A releases the lock.
func TestLockScenarioIndependentAgents(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, setupOpts{tools: map[string]engine.ToolFunc{"gate": g.tool}})
	b.define(t, talker("agent-a", []string{"Hola! Necesito tus documentos", "Por favor sube tu INE"}, nil))
	b.define(t, talker("agent-b", []string{"Ahora tienes una evaluacion pendiente"}, nil))

	a := b.start(t, engine.StartParams{WorkflowID: "agent-a", ThreadID: "juan", Input: map[string]any{"key": "a"}})
	g.waitEntered(t, "a")
	bx := b.start(t, engine.StartParams{WorkflowID: "agent-b", ThreadID: "juan", Input: map[string]any{"key": "b"}})
	g.waitEntered(t, "b") // B carried on past its queued message

	msgs := b.waitDelivered(t, "juan", 2)
	time.Sleep(200 * time.Millisecond) // B's message must not slip out while A holds the thread
	require.Equal(t, []string{"Hola! Necesito tus documentos", "Por favor sube tu INE"}, b.deliveredBodies(t, "juan"), "got %v", msgs)
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM thread_message WHERE execution_id = $1 AND status = 'queued'`, bx.ID))
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM monitor_active_locks WHERE active_execution_id = $1`, a.ExecutionID))

	g.release("a") // A finishes and releases the lock
	b.waitFor(t, a.ExecutionID, terminal)
	require.Equal(t, []string{"Hola! Necesito tus documentos", "Por favor sube tu INE", "Ahora tienes una evaluacion pendiente"},
		b.waitDelivered(t, "juan", 3))
	// B took the lock through the drain; it still runs, so it holds it.
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM monitor_active_locks WHERE active_execution_id = $1`, bx.ExecutionID))
	g.release("b")
	b.waitFor(t, bx.ExecutionID, terminal)
	require.Eventually(t, func() bool {
		return countRows(t, b.pool, `SELECT count(*) FROM thread WHERE thread_id = 'juan' AND active_execution_id IS NULL`) == 1
	}, 10*time.Second, 20*time.Millisecond)
}

// A stale lock: agent A hangs holding the lock; after the lock
// timeout agent B finds it stale, clears it and talks.
func TestLockScenarioStaleLock(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, setupOpts{lockTimeout: time.Second, tools: map[string]engine.ToolFunc{"gate": g.tool}})
	b.define(t, talker("agent-a", []string{"Mensaje de A"}, []string{"A otra vez"}))
	b.define(t, talker("agent-b", []string{"Mensaje de B"}, nil))

	a := b.start(t, engine.StartParams{WorkflowID: "agent-a", ThreadID: "pedro", Input: map[string]any{"key": "a"}})
	g.waitEntered(t, "a")
	require.Equal(t, []string{"Mensaje de A"}, b.waitDelivered(t, "pedro", 1))
	time.Sleep(1200 * time.Millisecond) // A's lock goes stale

	bx := b.start(t, engine.StartParams{WorkflowID: "agent-b", ThreadID: "pedro", Input: map[string]any{"key": "b"}})
	g.waitEntered(t, "b")
	require.Equal(t, []string{"Mensaje de A", "Mensaje de B"}, b.waitDelivered(t, "pedro", 2))
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM monitor_active_locks WHERE active_execution_id = $1`, bx.ExecutionID))

	// A wakes up: B holds the thread now, so A's next message queues until B ends.
	g.release("a")
	b.waitFor(t, a.ExecutionID, terminal)
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, []string{"Mensaje de A", "Mensaje de B"}, b.deliveredBodies(t, "pedro"))
	g.release("b")
	b.waitFor(t, bx.ExecutionID, terminal)
	require.Equal(t, []string{"Mensaje de A", "Mensaje de B", "A otra vez"}, b.waitDelivered(t, "pedro", 3))
}

// A cancelled execution's queued messages are dropped, never sent.
func TestCancelledRunsQueuedMessagesAreDropped(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, setupOpts{tools: map[string]engine.ToolFunc{"gate": g.tool}})
	b.define(t, talker("agent-a", []string{"A habla"}, nil))
	b.define(t, talker("agent-b", []string{"B encolado"}, nil))
	a := b.start(t, engine.StartParams{WorkflowID: "agent-a", ThreadID: "t", Input: map[string]any{"key": "a"}})
	g.waitEntered(t, "a")
	bx := b.start(t, engine.StartParams{WorkflowID: "agent-b", ThreadID: "t", Input: map[string]any{"key": "b"}})
	g.waitEntered(t, "b")
	_, err := b.engine.Cancel(context.Background(), b.tenant, bx.ExecutionID, "user", "no longer needed")
	require.NoError(t, err)
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM thread_message WHERE execution_id = $1 AND status = 'dropped'`, bx.ID))
	g.release("a")
	g.release("b")
	b.waitFor(t, a.ExecutionID, terminal)
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, []string{"A habla"}, b.deliveredBodies(t, "t"))
}

// cleanup_stale_locks() clears stale locks in SQL and the reaper drains them.
func TestCleanupStaleLocksDrainsTheQueue(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, setupOpts{lockTimeout: time.Hour, tools: map[string]engine.ToolFunc{"gate": g.tool}})
	b.define(t, talker("agent-a", []string{"A"}, nil))
	b.define(t, talker("agent-b", []string{"B"}, nil))
	a := b.start(t, engine.StartParams{WorkflowID: "agent-a", ThreadID: "t", Input: map[string]any{"key": "a"}})
	g.waitEntered(t, "a")
	bx := b.start(t, engine.StartParams{WorkflowID: "agent-b", ThreadID: "t", Input: map[string]any{"key": "b"}})
	g.waitEntered(t, "b")
	g.release("b")
	b.waitFor(t, bx.ExecutionID, terminal) // B ended with its message still queued

	// An operator clears the (not yet stale) lock by hand with a zero timeout.
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM cleanup_stale_locks(interval '0 seconds')`))
	_, err := b.engine.ReapLocks(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"A", "B"}, b.waitDelivered(t, "t", 2))
	g.release("a")
	b.waitFor(t, a.ExecutionID, terminal)
}

// The lock property under -race: two River clients with separate pools
// against one database, 50 executions × 10 messages over 5 threads, random
// pauses between messages. On every thread each execution's messages arrive
// as one unbroken run in their own order (a holder is never interrupted),
// every message is delivered exactly once, and nothing stays queued.
func TestLockPropertyTwoProcesses(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	const (
		executions = 50
		perExec    = 10
		threads    = 5
	)
	pause := func(ctx context.Context, _ engine.ToolCall) (map[string]any, error) {
		select {
		case <-time.After(time.Duration(rand.IntN(15)) * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return map[string]any{}, nil
	}
	type process struct {
		engine  *engine.Engine
		channel *engine.MemoryChannel
	}
	var procs []process
	for range 2 {
		pool, err := pgxpool.New(context.Background(), url)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		tools := engine.NewTools()
		tools.Register("pause", pause)
		ch := &engine.MemoryChannel{}
		eng, err := engine.New(engine.Config{Pool: pool, Tools: tools, Channel: ch})
		require.NoError(t, err)
		client, err := jobs.NewClient(pool, jobs.Config{Engine: eng, Workers: 16})
		require.NoError(t, err)
		startClient(t, client)
		procs = append(procs, process{eng, ch})
	}
	tenant := "tenant-property"
	// chatty sends perExec messages with pauses; chatty-parent does the same
	// but, after its fifth message, triggers a child that inherits the lock,
	// says three things and ends. (The child's variables merge into the
	// parent's when it resumes, so the child keeps its name in "kid".)
	chatty := func(id, child string) string {
		var nodes []string
		nodes = append(nodes, `{"id": "start", "type": "start", "next": "m0"}`)
		for i := range perExec {
			next := fmt.Sprintf("p%d", i)
			if i == perExec-1 {
				next = "end"
			}
			if i == 4 && child != "" {
				next = "kid"
			}
			nodes = append(nodes, fmt.Sprintf(`{"id": "m%d", "type": "action", "actionType": "send_message", "parameters": {"message": "{{who}}#%d"}, "next": %q}`, i, i, next))
			if i < perExec-1 {
				nodes = append(nodes, fmt.Sprintf(`{"id": "p%d", "type": "task", "task": "pause", "next": "m%d"}`, i, i+1))
			}
		}
		if child != "" {
			nodes = append(nodes, fmt.Sprintf(`{"id": "kid", "type": "action", "actionType": "trigger_agent", "parameters": {"workflow_id": %q, "waitForCompletion": true, "input": {"kid": "{{who}}c"}}, "next": "p4"}`, child))
		}
		nodes = append(nodes, `{"id": "end", "type": "end"}`)
		return fmt.Sprintf(`{"workflow_id": %q, "version": "1", "nodes": [%s]}`, id, strings.Join(nodes, ","))
	}
	kid := `{"workflow_id": "kid", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "k0"},
	  {"id": "k0", "type": "action", "actionType": "send_message", "parameters": {"message": "{{kid}}#0"}, "next": "q0"},
	  {"id": "q0", "type": "task", "task": "pause", "next": "k1"},
	  {"id": "k1", "type": "action", "actionType": "send_message", "parameters": {"message": "{{kid}}#1"}, "next": "q1"},
	  {"id": "q1", "type": "task", "task": "pause", "next": "k2"},
	  {"id": "k2", "type": "action", "actionType": "send_message", "parameters": {"message": "{{kid}}#2"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`
	for _, def := range []string{chatty("chatty", ""), chatty("chatty-parent", "kid"), kid} {
		_, _, err := procs[0].engine.DefineWorkflow(context.Background(), procs[0].engine.Pool(), tenant, []byte(def))
		require.NoError(t, err)
	}
	const parentEvery = 5

	ids := make([]string, executions)
	var wg sync.WaitGroup
	for i := range executions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond)
			p := procs[i%2]
			workflow := "chatty"
			if i%parentEvery == 0 {
				workflow = "chatty-parent"
			}
			err := p.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
				x, err := p.engine.StartExecution(context.Background(), tx, engine.StartParams{TenantID: tenant, WorkflowID: workflow,
					ThreadID: fmt.Sprintf("thread-%d", i%threads), Input: map[string]any{"who": fmt.Sprintf("x%02d", i)}})
				if err == nil {
					ids[i] = x.ExecutionID
				}
				return err
			})
			assert.NoError(t, err, "starting execution %d", i)
		}()
	}
	wg.Wait()
	pool := procs[0].engine.Pool()
	require.Eventually(t, func() bool {
		var live, undelivered int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM agent_execution WHERE status NOT IN ('completed')`).Scan(&live))
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM thread_message WHERE status <> 'delivered'`).Scan(&undelivered))
		return live == 0 && undelivered == 0
	}, 90*time.Second, 100*time.Millisecond)

	// Every message exactly once across both processes' channels.
	seen := map[int64]bool{}
	all := append(procs[0].channel.Messages(), procs[1].channel.Messages()...)
	for _, m := range all {
		require.False(t, seen[m.ID], "message %d delivered twice", m.ID)
		seen[m.ID] = true
	}
	require.Len(t, seen, executions*perExec+executions/parentEvery*3)
	// Delivery order per thread is the order of delivered_at (deliveries of
	// one thread are serialised by its outbox lock).
	rows, err := pool.Query(context.Background(), `
		SELECT t.thread_id, m.body FROM thread_message m JOIN thread t ON t.id = m.thread_id
		ORDER BY t.thread_id, m.delivered_at, m.delivery_seq`)
	require.NoError(t, err)
	order := map[string][]string{}
	for rows.Next() {
		var thread, body string
		require.NoError(t, rows.Scan(&thread, &body))
		order[thread] = append(order[thread], body)
	}
	require.NoError(t, rows.Err())
	// Each family (an execution and the child that inherits its lock) talks
	// as one unbroken run: the parent's first five messages, the child's
	// three, the parent's last five.
	expected := func(who string, parent bool) []string {
		var out []string
		for i := range perExec {
			out = append(out, fmt.Sprintf("%s#%d", who, i))
			if i == 4 && parent {
				out = append(out, who+"c#0", who+"c#1", who+"c#2")
			}
		}
		return out
	}
	for thread, bodies := range order {
		done := map[string]bool{}
		for i := 0; i < len(bodies); {
			who, _, _ := strings.Cut(bodies[i], "#")
			require.False(t, done[who], "thread %s: %s talks again after another family took over: %v", thread, who, bodies)
			done[who] = true
			var n int
			fmt.Sscanf(who, "x%d", &n)
			want := expected(who, n%parentEvery == 0)
			require.GreaterOrEqual(t, len(bodies)-i, len(want), "thread %s: %s's run is cut short: %v", thread, who, bodies)
			if !slices.Equal(want, bodies[i:i+len(want)]) {
				dbg, _ := pool.Query(context.Background(), `SELECT e.id, x.variables->>'who', x.variables->>'kid', e.action, e.message, x.status FROM execution_event e JOIN agent_execution x ON x.id = e.execution_id JOIN thread t ON t.id = x.thread_id WHERE t.thread_id = $1 AND e.action IN ('thread.lock_acquired','thread.lock_released','workflow.resumed','workflow.waiting','thread.message_queued','workflow.completed') ORDER BY e.id`, thread)
				for dbg.Next() {
					var id int64
					var who, kid, action, msg, st *string
					_ = dbg.Scan(&id, &who, &kid, &action, &msg, &st)
					t.Logf("%d %v %v %s %s", id, deref(who), deref(kid), *action, *msg)
				}
			}
			require.Equal(t, want, bodies[i:i+len(want)], "thread %s: %s was interrupted or reordered", thread, who)
			i += len(want)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}
