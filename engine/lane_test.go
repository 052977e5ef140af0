package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
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
)

// taskWorkflow is start → work (the tool) → end.
func taskWorkflow(id, tool string) string {
	return fmt.Sprintf(`{"workflow_id": %q, "version": "1.0.0", "nodes": [
	  {"id": "start", "type": "start", "next": "work"},
	  {"id": "work", "type": "task", "task": %q, "inputs": {"lane": "{{lane}}"}, "next": "end"},
	  {"id": "end", "type": "end", "result": {"summary": "ok"}}]}`, id, tool)
}

// laneProcess is one "process": its own pool, engine and River client.
func laneProcess(t *testing.T, dbURL string, limits map[string]int, tools *engine.Tools) *engine.Engine {
	t.Helper()
	return laneProcessWith(t, dbURL, engine.Config{LaneLimits: limits, Tools: tools})
}

// laneProcessWith is laneProcess with the engine configured by cfg (its
// pool is set here, and its channel when cfg has none); it delivers
// promptly, as baton serve does.
func laneProcessWith(t *testing.T, dbURL string, cfg engine.Config) *engine.Engine {
	t.Helper()
	return laneProcessJobs(t, dbURL, cfg, jobs.Config{Workers: 16})
}

// laneProcessJobs is laneProcessWith with the River client configured by
// jc (its Engine is set here).
func laneProcessJobs(t *testing.T, dbURL string, cfg engine.Config, jc jobs.Config) *engine.Engine {
	t.Helper()
	poolCfg, err := pgxpool.ParseConfig(dbURL)
	require.NoError(t, err)
	poolCfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(context.Background(), poolCfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	cfg.Pool = pool
	if cfg.Channel == nil {
		cfg.Channel = &engine.MemoryChannel{}
	}
	eng, err := engine.New(cfg)
	require.NoError(t, err)
	jc.Engine = eng
	client, err := jobs.NewClient(pool, jc)
	require.NoError(t, err)
	startClient(t, client)
	t.Cleanup(eng.DeliverPromptly(8))
	return eng
}

// TestLaneInvariantAcrossTwoProcesses drives 200 executions over three lanes
// with two River clients on separate pools: a sampler never sees a lane
// running above its limit, nor a lane with a free slot and pending work for
// long; each lane admits in FIFO order.
func TestLaneInvariantAcrossTwoProcesses(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	limits := map[string]int{"main": 3, "subagent": 2, "batch": 1}
	var inTool sync.Map // lane → *atomic.Int32
	var overTool atomic.Int32
	tools := engine.NewTools()
	tools.Register("work", func(ctx context.Context, call engine.ToolCall) (map[string]any, error) {
		lane, _ := call.Inputs["lane"].(string)
		c, _ := inTool.LoadOrStore(lane, &atomic.Int32{})
		n := c.(*atomic.Int32).Add(1)
		defer c.(*atomic.Int32).Add(-1)
		if int(n) > limits[lane] {
			overTool.Add(1)
		}
		time.Sleep(time.Duration(2+rand.IntN(6)) * time.Millisecond)
		return map[string]any{"done": true}, nil
	})
	a := laneProcess(t, dbURL, limits, tools)
	b := laneProcess(t, dbURL, limits, tools)
	ctx := context.Background()
	tenant := "tenant-lanes"
	_, _, err := a.DefineWorkflow(ctx, a.Pool(), tenant, []byte(taskWorkflow("lw", "work")))
	require.NoError(t, err)

	// The sampler reads every lane's running and pending counts in one
	// snapshot.
	stop := make(chan struct{})
	samplerDone := make(chan struct{})
	var samples, overLimit atomic.Int64
	var maxStarved atomic.Int64
	go func() {
		defer close(samplerDone)
		starvedSince := map[string]time.Time{}
		for {
			select {
			case <-stop:
				return
			default:
			}
			rows, err := b.Pool().Query(ctx, `SELECT lane, count(*) FILTER (WHERE status = 'running'), count(*) FILTER (WHERE status = 'pending')
				FROM agent_execution GROUP BY lane`)
			if err != nil {
				continue
			}
			now := time.Now()
			for rows.Next() {
				var lane string
				var running, pending int
				if rows.Scan(&lane, &running, &pending) != nil {
					continue
				}
				if running > limits[lane] {
					overLimit.Add(1)
				}
				if running < limits[lane] && pending > 0 {
					if _, ok := starvedSince[lane]; !ok {
						starvedSince[lane] = now
					}
					if d := now.Sub(starvedSince[lane]).Milliseconds(); d > maxStarved.Load() {
						maxStarved.Store(d)
					}
				} else {
					delete(starvedSince, lane)
				}
			}
			rows.Close()
			samples.Add(1)
			time.Sleep(2 * time.Millisecond)
		}
	}()

	lanes := []string{"main", "subagent", "batch"}
	ids := make([]string, 0, 200)
	for i := range 200 {
		lane := lanes[i%3]
		eng := a
		if i%2 == 1 {
			eng = b
		}
		var x *engine.Execution
		require.NoError(t, eng.WithTx(ctx, func(tx pgx.Tx) error {
			var err error
			x, err = eng.StartExecution(ctx, tx, engine.StartParams{TenantID: tenant, WorkflowID: "lw", Lane: lane,
				Input: map[string]any{"lane": lane}, Priority: 5})
			return err
		}))
		ids = append(ids, x.ExecutionID)
	}
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, a.Pool().QueryRow(ctx, `SELECT count(*) FROM agent_execution WHERE status <> 'completed'`).Scan(&n))
		return n == 0
	}, 90*time.Second, 50*time.Millisecond)
	close(stop)
	<-samplerDone
	t.Logf("samples=%d max starved=%dms", samples.Load(), maxStarved.Load())
	require.Greater(t, samples.Load(), int64(10))
	require.Zero(t, overLimit.Load(), "a sample saw a lane running above its limit")
	require.Zero(t, overTool.Load(), "more tool calls of a lane ran at once than its limit")
	// Loose bound: a free slot with pending work is filled inline or by one
	// lane.dispatch hop, never left for the sweep.
	require.Less(t, maxStarved.Load(), int64(1000))

	// FIFO per lane: admission order (started_at, taken under the lane row
	// lock) is creation order.
	rows, err := a.Pool().Query(ctx, `SELECT lane, id FROM agent_execution ORDER BY lane, started_at`)
	require.NoError(t, err)
	byLane := map[string][]int64{}
	for rows.Next() {
		var lane string
		var id int64
		require.NoError(t, rows.Scan(&lane, &id))
		byLane[lane] = append(byLane[lane], id)
	}
	require.NoError(t, rows.Err())
	for lane, order := range byLane {
		require.True(t, sort.SliceIsSorted(order, func(i, j int) bool { return order[i] < order[j] }), "lane %s admitted out of order: %v", lane, order)
	}
	require.Len(t, ids, 200)
}

// TestWaitingRunFreesItsSlotAndResumesAheadOfNewWork: with main limited to
// 1, a run waiting (for an event) does not block others; resumed while main
// is full, it goes pending and is admitted before newer work.
func TestWaitingRunFreesItsSlotAndResumesAheadOfNewWork(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := setupLanes(t, map[string]int{"main": 1}, map[string]engine.ToolFunc{
		"block": blockUntil(release),
		"noop":  func(context.Context, engine.ToolCall) (map[string]any, error) { return map[string]any{}, nil },
	})
	b.define(t, waitWorkflow("parent", `{"id": "w", "type": "action", "actionType": "wait_for_event",
	  "parameters": {"event_id": "go", "timeout": "1h"}, "next": "bye"}`))
	b.define(t, taskWorkflow("quick", "noop"))
	b.define(t, taskWorkflow("slow", "block"))

	parent := b.start(t, engine.StartParams{WorkflowID: "parent", ThreadID: "t-parent"})
	b.waitFor(t, parent.ExecutionID, waiting)
	// The waiting parent holds no slot: another main run is admitted and ends.
	q := b.start(t, engine.StartParams{WorkflowID: "quick"})
	require.Equal(t, engine.StatusCompleted, b.waitFor(t, q.ExecutionID, terminal).Status)

	slow := b.start(t, engine.StartParams{WorkflowID: "slow"})
	b.waitFor(t, slow.ExecutionID, func(x *engine.Execution) bool { return x.Status == engine.StatusRunning })
	res, err := b.engine.PublishEvent(context.Background(), engine.PublishEventParams{TenantID: b.tenant,
		EventType: engine.EventTypeEventCompleted, EventID: "ev-go", ExecutionID: parent.ExecutionID, Data: map[string]any{"event_id": "go"}})
	require.NoError(t, err)
	require.Equal(t, []string{parent.ExecutionID}, res.Resumed)
	require.Equal(t, engine.StatusPending, b.get(t, parent.ExecutionID).Status, "main is full: the resumed run waits for a slot")
	newer := b.start(t, engine.StartParams{WorkflowID: "quick"})
	require.Equal(t, engine.StatusPending, newer.Status)

	close(release)
	require.Equal(t, engine.StatusCompleted, b.waitFor(t, slow.ExecutionID, terminal).Status)
	p := b.waitFor(t, parent.ExecutionID, terminal)
	n := b.waitFor(t, newer.ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, p.Status)
	require.Equal(t, engine.StatusCompleted, n.Status)
	require.False(t, n.StartedAt.Before(*p.CompletedAt), "the resumed run went ahead of new work")
	var running int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT running FROM monitor_lanes WHERE lane = 'main'`).Scan(&running))
	require.Zero(t, running)
}

// TestPendingWhenLaneFullAndMonitor: a start into a full lane stays pending
// and monitor_lanes reports it; freeing the slot admits it.
func TestPendingWhenLaneFullAndMonitor(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := setupLanes(t, map[string]int{"cron": 1}, map[string]engine.ToolFunc{
		"block": blockUntil(release),
	})
	b.define(t, taskWorkflow("slow", "block"))
	first := b.start(t, engine.StartParams{WorkflowID: "slow", Lane: "cron"})
	require.Equal(t, engine.StatusRunning, first.Status)
	second := b.start(t, engine.StartParams{WorkflowID: "slow", Lane: "cron"})
	require.Equal(t, engine.StatusPending, second.Status)
	lanes, err := b.engine.ListLanes(context.Background(), b.pool, b.tenant, engine.LanePage{})
	require.NoError(t, err)
	found := false
	for _, l := range lanes {
		if l.Lane == "cron" {
			found = true
			require.NotNil(t, l.OldestPendingAgeMS)
			require.Equal(t, engine.LaneStatus{Lane: "cron", MaxConcurrent: 1, Running: 1, Pending: 1, OldestPendingAgeMS: l.OldestPendingAgeMS}, l)
		}
		if l.Lane == "main" {
			require.Equal(t, 4, l.MaxConcurrent)
		}
	}
	require.True(t, found)
	close(release)
	require.Equal(t, engine.StatusCompleted, b.waitFor(t, second.ExecutionID, terminal).Status)
}

// setupLanes is setup with lane limits.
func setupLanes(t *testing.T, limits map[string]int, tools map[string]engine.ToolFunc) *testBundle {
	t.Helper()
	return setup(t, setupOpts{tools: tools, laneLimits: limits})
}

// watchRunning samples how many runs of lane are running, one query after
// the other, until the returned stop is called; stop reports how many
// samples it took and how many saw more than limit.
func watchRunning(ctx context.Context, pool *pgxpool.Pool, lane string, limit int) (stop func() (samples, overLimit int64)) {
	done, sampled := make(chan struct{}), make(chan struct{})
	var n, over int64
	go func() {
		defer close(sampled)
		for {
			select {
			case <-done:
				return
			default:
			}
			var running int
			if pool.QueryRow(ctx, `SELECT count(*) FROM agent_execution WHERE lane = $1 AND status = 'running'`, lane).Scan(&running) == nil {
				n++
				if running > limit {
					over++
				}
			}
		}
	}()
	return func() (int64, int64) {
		close(done)
		<-sampled
		return n, over
	}
}

// TestParentInFullMainWaitsForChildInSubagent: main holds one run at a time
// and every main run triggers a child in subagent (limit 1) and waits for
// it. A waiting parent frees its main slot, so the children run, the parents
// resume in turn, and all of them end: no deadlock, and neither lane ever
// runs more than its limit.
func TestParentInFullMainWaitsForChildInSubagent(t *testing.T) {
	t.Parallel()
	b := setupLanes(t, map[string]int{"main": 1, "subagent": 1}, nil)
	b.define(t, `{"workflow_id": "kid", "version": "1", "lane": "subagent", "nodes": [
	  {"id": "start", "type": "start", "next": "set"},
	  {"id": "set", "type": "action", "actionType": "set_variables", "parameters": {"values": {"answer": "listo {{n}}"}}, "next": "end"},
	  {"id": "end", "type": "end", "result": {"summary": "ok"}}]}`)
	b.define(t, `{"workflow_id": "boss", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "kid"},
	  {"id": "kid", "type": "action", "actionType": "trigger_agent", "parameters": {"workflow_id": "kid", "waitForCompletion": true, "timeout": "1m", "input": {"n": "{{n}}"}}, "next": "end"},
	  {"id": "end", "type": "end", "result": {"summary": "ok"}}]}`)

	stop := make(chan struct{})
	sampled := make(chan map[string]int, 1)
	go func() {
		peak := map[string]int{}
		for {
			select {
			case <-stop:
				sampled <- peak
				return
			case <-time.After(5 * time.Millisecond):
			}
			rows, err := b.pool.Query(context.Background(), `SELECT lane, count(*) FROM agent_execution WHERE tenant_id = $1 AND status = 'running' GROUP BY lane`, b.tenant)
			if err != nil {
				continue
			}
			for rows.Next() {
				var lane string
				var n int
				if rows.Scan(&lane, &n) == nil && n > peak[lane] {
					peak[lane] = n
				}
			}
			rows.Close()
		}
	}()
	var parents []string
	for i := range 6 {
		parents = append(parents, b.start(t, engine.StartParams{WorkflowID: "boss", Input: map[string]any{"n": i}}).ExecutionID)
	}
	for i, id := range parents {
		x := b.waitFor(t, id, terminal)
		require.Equal(t, engine.StatusCompleted, x.Status, id)
		require.Equal(t, fmt.Sprintf("listo %d", i), x.Variables["answer"])
		require.Equal(t, true, x.Variables["childExecutionSuccess"])
	}
	close(stop)
	peak := <-sampled
	require.LessOrEqual(t, peak["main"], 1)
	require.LessOrEqual(t, peak["subagent"], 1)
	require.Equal(t, 6, countRows(t, b.pool, `SELECT count(*) FROM agent_execution WHERE tenant_id = $1 AND lane = 'subagent' AND status = 'completed'`, b.tenant))
}

// TestSessionLaneAcrossTwoProcesses: inbound messages for four threads
// arrive at two processes at once (followup, no debounce). A session runs
// one execution at a time — no sample and no tool call ever sees two — and
// every message gets exactly one run of its own.
func TestSessionLaneAcrossTwoProcesses(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	var inTool sync.Map // thread → *atomic.Int32
	var overTool atomic.Int32
	tools := engine.NewTools()
	tools.Register("work", func(ctx context.Context, call engine.ToolCall) (map[string]any, error) {
		text, _ := call.Inputs["text"].(string)
		thread, _, _ := strings.Cut(text, " ")
		c, _ := inTool.LoadOrStore(thread, &atomic.Int32{})
		if c.(*atomic.Int32).Add(1) > 1 {
			overTool.Add(1)
		}
		defer c.(*atomic.Int32).Add(-1)
		time.Sleep(time.Duration(1+rand.IntN(5)) * time.Millisecond)
		return map[string]any{"done": true}, nil
	})
	limits := map[string]int{"main": 8}
	a := laneProcess(t, dbURL, limits, tools)
	b := laneProcess(t, dbURL, limits, tools)
	ctx := context.Background()
	tenant := "tenant-sessions"
	_, _, err := a.DefineWorkflow(ctx, a.Pool(), tenant, []byte(`{"workflow_id": "agent", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "work"},
	  {"id": "work", "type": "task", "task": "work", "inputs": {"text": "{{lastResponse}}"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`))
	require.NoError(t, err)
	threads := []string{"ta", "tb", "tc", "td"}
	for _, th := range threads {
		_, _, err := a.UpsertThread(ctx, a.Pool(), engine.ThreadUpsert{TenantID: tenant, ThreadID: th, Channel: "web", Contact: th,
			DefaultWorkflowID: "agent", Queue: &engine.QueueSettings{Mode: "followup", DebounceMS: new(int)}})
		require.NoError(t, err)
	}

	stop := make(chan struct{})
	samplerDone := make(chan struct{})
	var samples, overLimit atomic.Int64
	go func() {
		defer close(samplerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var over int
			if err := b.Pool().QueryRow(ctx, `SELECT count(*) FROM (SELECT session_key FROM agent_execution
				WHERE session_key IS NOT NULL AND status = 'running' GROUP BY session_key HAVING count(*) > 1) s`).Scan(&over); err == nil {
				samples.Add(1)
				if over > 0 {
					overLimit.Add(1)
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	const perThread = 10
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			eng := a
			if g%2 == 1 {
				eng = b
			}
			for i := range perThread / 2 {
				th := threads[g%4]
				text := fmt.Sprintf("%s m%d-%d", th, g, i)
				require.NoError(t, eng.WithTx(ctx, func(tx pgx.Tx) error {
					_, err := eng.ReceiveInboundTx(ctx, tx, engine.InboundParams{TenantID: tenant, ThreadID: th, Text: text, MessageID: text})
					return err
				}))
				time.Sleep(time.Duration(rand.IntN(4)) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	total := perThread * len(threads)
	require.Eventually(t, func() bool {
		var runs, open, queued int
		require.NoError(t, a.Pool().QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status <> 'completed'),
			(SELECT count(*) FROM thread_message WHERE direction = 'in' AND status <> 'consumed') FROM agent_execution`).Scan(&runs, &open, &queued))
		return runs == total && open == 0 && queued == 0
	}, 90*time.Second, 50*time.Millisecond)
	close(stop)
	<-samplerDone
	require.Greater(t, samples.Load(), int64(10))
	require.Zero(t, overLimit.Load(), "a sample saw a session running two executions")
	require.Zero(t, overTool.Load(), "two tool calls of one session ran at once")

	// Every message got exactly one run, whose prompt it is.
	rows, err := a.Pool().Query(ctx, `SELECT variables->>'lastResponse' FROM agent_execution`)
	require.NoError(t, err)
	prompts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	seen := map[string]int{}
	for _, p := range prompts {
		seen[p]++
	}
	require.Len(t, seen, total)
	for p, n := range seen {
		require.Equal(t, 1, n, p)
	}
}

// A run admitted after waiting more than 2 s for a slot says so ("queued
// for …ms"), in the log and as a workflow.admitted event; one
// admitted at once says nothing.
func TestQueuedNoticeAfterTwoSeconds(t *testing.T) {
	t.Parallel()
	g := newGate()
	logs := &logBuffer{}
	b := setup(t, setupOpts{laneLimits: map[string]int{"main": 1}, tools: map[string]engine.ToolFunc{"gate": g.tool},
		logger: slog.New(slog.NewJSONHandler(logs, nil))})
	b.define(t, talker("holder", []string{"un momento"}, nil))
	b.define(t, sender("late", []string{"hola"}))
	holder := b.start(t, engine.StartParams{WorkflowID: "holder", Input: map[string]any{"key": "h"}})
	g.waitEntered(t, "h")
	late := b.start(t, engine.StartParams{WorkflowID: "late"})
	require.Equal(t, engine.StatusPending, late.Status)
	time.Sleep(2200 * time.Millisecond)
	g.release("h")
	require.Equal(t, engine.StatusCompleted, b.waitFor(t, holder.ExecutionID, terminal).Status)
	require.Equal(t, engine.StatusCompleted, b.waitFor(t, late.ExecutionID, terminal).Status)

	var queuedMS int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT (payload->>'queued_ms')::bigint FROM execution_event
		WHERE execution_id = $1 AND action = 'workflow.admitted'`, late.ID).Scan(&queuedMS))
	require.GreaterOrEqual(t, queuedMS, int64(2000))
	require.Zero(t, countRows(t, b.pool, `SELECT count(*) FROM execution_event WHERE execution_id = $1 AND action = 'workflow.admitted'`, holder.ID))
	var notices int
	for _, line := range logs.lines(t) {
		if msg, _ := line["msg"].(string); strings.Contains(msg, "queued for") {
			notices++
			require.Equal(t, late.ExecutionID, line["execution_id"])
			require.Contains(t, msg, fmt.Sprintf("Execution %s queued for ", late.ExecutionID))
		}
	}
	require.Equal(t, 1, notices)
}

// A lane first used by a start that rolls back (here: a duplicate
// execution_id) leaves no row behind; the process that created and lost it
// creates it again on the next use, whether that start waits for the lane
// row (API starts) or only tries it (a lane.dispatch job then admits).
func TestLaneCreatedByARolledBackStart(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, sender("note", []string{"hola"}))
	b.start(t, engine.StartParams{WorkflowID: "note", ExecutionID: "taken"})
	for i, laneFirst := range []bool{true, false} {
		lane := fmt.Sprintf("custom-%d", i)
		err := b.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
			_, err := b.engine.StartExecution(context.Background(), tx, engine.StartParams{TenantID: b.tenant, WorkflowID: "note",
				ExecutionID: "taken", Lane: lane, LaneFirst: laneFirst})
			return err
		})
		var conflict *engine.ConflictError
		require.ErrorAs(t, err, &conflict)
		require.Zero(t, countRows(t, b.pool, `SELECT count(*) FROM lane WHERE name = $1`, lane), "the rolled-back start left no lane row")

		var x *engine.Execution
		require.NoError(t, b.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
			var err error
			x, err = b.engine.StartExecution(context.Background(), tx, engine.StartParams{TenantID: b.tenant, WorkflowID: "note",
				Lane: lane, LaneFirst: laneFirst})
			return err
		}))
		require.Equal(t, engine.StatusCompleted, b.waitFor(t, x.ExecutionID, terminal).Status, "lane %s", lane)
	}
}

// Admission is FIFO even while another transaction holds the head of the
// lane: the runs behind it wait, and it goes first once it is free.
func TestAdmissionWaitsForAHeldHead(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, setupOpts{laneLimits: map[string]int{"main": 1}, tools: map[string]engine.ToolFunc{"gate": g.tool}})
	b.define(t, talker("holder", []string{"un momento"}, nil))
	b.define(t, sender("next", []string{"hola"}))
	holder := b.start(t, engine.StartParams{WorkflowID: "holder", Input: map[string]any{"key": "h"}})
	g.waitEntered(t, "h")
	first := b.start(t, engine.StartParams{WorkflowID: "next"})
	second := b.start(t, engine.StartParams{WorkflowID: "next"})
	require.Equal(t, engine.StatusPending, first.Status)
	require.Equal(t, engine.StatusPending, second.Status)

	// Another transaction holds the head's row while the slot frees.
	ctx := context.Background()
	other, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = other.Rollback(ctx) }()
	_, err = other.Exec(ctx, `SELECT id FROM agent_execution WHERE id = $1 FOR UPDATE`, first.ID)
	require.NoError(t, err)
	g.release("h")
	require.Equal(t, engine.StatusCompleted, b.waitFor(t, holder.ExecutionID, terminal).Status)
	time.Sleep(400 * time.Millisecond)
	require.Equal(t, engine.StatusPending, b.get(t, second.ExecutionID).Status, "nothing jumps the queue")
	require.NoError(t, other.Commit(ctx))

	f := b.waitFor(t, first.ExecutionID, terminal)
	s := b.waitFor(t, second.ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, f.Status)
	require.Equal(t, engine.StatusCompleted, s.Status)
	require.True(t, f.StartedAt.Before(*s.StartedAt), "admitted in order")
}
