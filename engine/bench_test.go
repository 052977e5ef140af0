package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/benchkit"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/jobs"
)

// Engine benchmarks. They report latencies with b.ReportMetric
// and are run by `make bench`; `make test` only compiles them.

type benchBundle struct {
	pool    *pgxpool.Pool
	engine  *engine.Engine
	channel *engine.MemoryChannel
	tenant  string
}

// benchLaneLimits let every benchmark run as many executions at once as it
// starts: they measure the engine, not the lane limits (main 4 by default).
var benchLaneLimits = map[string]int{engine.LaneMain: 10_000, engine.LaneSubagent: 10_000}

func benchSetup(b *testing.B, tools map[string]engine.ToolFunc) *benchBundle {
	b.Helper()
	return benchSetupLanes(b, tools, benchLaneLimits)
}

// benchSetupLanes is benchSetup with the given lane limits.
func benchSetupLanes(b *testing.B, tools map[string]engine.ToolFunc, limits map[string]int) *benchBundle {
	b.Helper()
	pool := pgtest.NewPool(b)
	reg := engine.NewTools()
	for name, fn := range tools {
		reg.Register(name, fn)
	}
	ch := &engine.MemoryChannel{}
	eng, err := engine.New(engine.Config{Pool: pool, Tools: reg, Channel: ch, LaneLimits: limits})
	benchNoError(b, err)
	client, err := jobs.NewClient(pool, jobs.Config{Engine: eng})
	benchNoError(b, err)
	benchNoError(b, client.Start(context.Background()))
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.StopAndCancel(ctx)
	})
	return &benchBundle{pool: pool, engine: eng, channel: ch, tenant: "bench"}
}

func benchNoError(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

func (bb *benchBundle) define(b *testing.B, def string) {
	b.Helper()
	_, _, err := bb.engine.DefineWorkflow(context.Background(), bb.pool, bb.tenant, []byte(def))
	benchNoError(b, err)
}

func (bb *benchBundle) start(b *testing.B, workflow, thread string, input map[string]any) string {
	b.Helper()
	var x *engine.Execution
	benchNoError(b, bb.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
		var err error
		x, err = bb.engine.StartExecution(context.Background(), tx, engine.StartParams{TenantID: bb.tenant, WorkflowID: workflow, ThreadID: thread, Input: input})
		return err
	}))
	return x.ExecutionID
}

func (bb *benchBundle) count(b *testing.B, sql string, args ...any) int {
	b.Helper()
	var n int
	benchNoError(b, bb.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// waitCount polls until the count query returns want.
func (bb *benchBundle) waitCount(b *testing.B, want int, timeout time.Duration, sql string, args ...any) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for bb.count(b, sql, args...) != want {
		if time.Now().After(deadline) {
			b.Fatalf("still %d, want %d: %s", bb.count(b, sql, args...), want, sql)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reportPercentiles reports the p50 and p99 of samples in milliseconds under
// the given prefix.
func reportPercentiles(b *testing.B, prefix string, samples []time.Duration) {
	b.Helper()
	if len(samples) == 0 {
		b.Fatalf("no %s samples", prefix)
	}
	slices.Sort(samples)
	at := func(q float64) float64 {
		return float64(samples[min(int(q*float64(len(samples))), len(samples)-1)]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), prefix+"p50_ms")
	b.ReportMetric(at(0.99), prefix+"p99_ms")
}

// loadWaiting inserts n waiting executions (each on its own thread) with
// generate_series, as table weight for the resume benchmark.
func loadWaiting(b *testing.B, pool *pgxpool.Pool, n int) {
	b.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		INSERT INTO thread (tenant_id, thread_id, channel, contact)
		SELECT 'filler', 'f-' || g, 'api', 'f-' || g FROM generate_series(1, $1::int) g`, n)
	benchNoError(b, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO agent_execution (tenant_id, execution_id, workflow_id, version, status, thread_id, current_node_id,
		                             waiting_for, waiting_until, waiting_data, wait_seq, step_seq, started_at)
		SELECT 'filler', t.thread_id, 'resume', '1', 'waiting', t.id, 'w',
		       'event', now() + interval '7 days', jsonb_build_object('eventId', 'ev', 'timeout', '7d'), 1, 1, now()
		FROM thread t WHERE t.tenant_id = 'filler'`)
	benchNoError(b, err)
	_, err = pool.Exec(ctx, `ANALYZE thread; ANALYZE agent_execution`)
	benchNoError(b, err)
}

// BenchmarkResumeLatency measures, with 1k and 100k other executions
// waiting in the table, the time from an EVENT_COMPLETED being accepted
// (PublishEvent, what POST /events runs, has committed) to the next node
// having run (the execution completed by its end node). One event at a
// time; p50_ms and p99_ms over b.N resumes.
func BenchmarkResumeLatency(b *testing.B) {
	for _, waiting := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("waiting=%d", waiting), func(b *testing.B) {
			bb := benchSetup(b, nil)
			bb.define(b, `{"workflow_id": "resume", "version": "1", "nodes": [
			  {"id": "start", "type": "start", "next": "w"},
			  {"id": "w", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "ev", "timeout": "7d"}, "next": "end"},
			  {"id": "end", "type": "end"}]}`)
			loadWaiting(b, bb.pool, waiting-b.N)
			ids := make([]string, b.N)
			for i := range ids {
				ids[i] = bb.start(b, "resume", fmt.Sprintf("r-%d", i), nil)
			}
			bb.waitCount(b, waiting, 5*time.Minute, `SELECT count(*) FROM agent_execution WHERE status = 'waiting'`)
			samples := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				_, err := bb.engine.PublishEvent(context.Background(), engine.PublishEventParams{
					TenantID: bb.tenant, EventType: "EVENT_COMPLETED", EventID: fmt.Sprintf("e-%d", i),
					ExecutionID: ids[i], Data: map[string]any{"event_id": "ev"}})
				benchNoError(b, err)
				accepted := time.Now()
				for {
					var status string
					benchNoError(b, bb.pool.QueryRow(context.Background(), `SELECT status::text FROM agent_execution WHERE tenant_id = $1 AND execution_id = $2`, bb.tenant, ids[i]).Scan(&status))
					if status == "completed" {
						break
					}
					time.Sleep(500 * time.Microsecond)
				}
				samples = append(samples, time.Since(accepted))
			}
			b.StopTimer()
			reportPercentiles(b, "", samples)
		})
	}
}

// BenchmarkTimeoutLateness measures how late wait timeouts fire: from
// waiting_until to the transaction that wrote the timeout's
// workflow.wait_timeout event. b.N executions enter their wait 10 ms apart.
// A 2 s timer is inserted available (it is due within jobs.TimerLookahead);
// an 8 s timer is inserted scheduled and made available ahead of its time
// by the timers loop every serving process runs (jobs.StartTimers), or by
// River's scheduler.
func BenchmarkTimeoutLateness(b *testing.B) {
	for _, timeout := range []string{"2s", "8s"} {
		b.Run(timeout, func(b *testing.B) { benchTimeoutLateness(b, timeout) })
	}
}

func benchTimeoutLateness(b *testing.B, timeout string) {
	bb := benchSetup(b, nil)
	timers := jobs.StartTimers(context.Background(), bb.pool, jobs.TimersConfig{})
	b.Cleanup(timers.Stop)
	bb.define(b, fmt.Sprintf(`{"workflow_id": "late", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "w"},
	  {"id": "w", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "ev", "timeout": %q, "onTimeout": "continue"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`, timeout))
	b.ResetTimer()
	for i := range b.N {
		bb.start(b, "late", fmt.Sprintf("l-%d", i), nil)
		time.Sleep(10 * time.Millisecond)
	}
	bb.waitCount(b, b.N, 2*time.Minute, `SELECT count(*) FROM agent_execution WHERE status = 'completed'`)
	b.StopTimer()
	rows, err := bb.pool.Query(context.Background(), `
		SELECT (extract(epoch FROM created_at - (payload->>'waiting_until')::timestamptz) * 1e6)::bigint
		FROM execution_event WHERE action = 'workflow.wait_timeout'`)
	benchNoError(b, err)
	micros, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	benchNoError(b, err)
	samples := make([]time.Duration, len(micros))
	for i, us := range micros {
		samples[i] = time.Duration(us) * time.Microsecond
	}
	reportPercentiles(b, "", samples)
}

// sendTimes reports, per execution, the wait from its first send attempt
// (its first thread_message row) to its first message delivered: the time
// it took the execution to get its turn on the thread, whether it took the
// lock at once, after a holder, or through the drain. And per message, send
// to delivered.
func sendTimes(b *testing.B, pool *pgxpool.Pool) {
	b.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT (extract(epoch FROM min(delivered_at) - min(created_at)) * 1e6)::bigint
		FROM thread_message WHERE direction = 'out' GROUP BY execution_id`)
	benchNoError(b, err)
	turns, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	benchNoError(b, err)
	rows, err = pool.Query(context.Background(), `
		SELECT (extract(epoch FROM delivered_at - created_at) * 1e6)::bigint FROM thread_message WHERE direction = 'out'`)
	benchNoError(b, err)
	sends, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	benchNoError(b, err)
	toDurations := func(us []int64) []time.Duration {
		out := make([]time.Duration, len(us))
		for i, v := range us {
			out[i] = time.Duration(v) * time.Microsecond
		}
		return out
	}
	reportPercentiles(b, "turn_", toDurations(turns))
	reportPercentiles(b, "deliver_", toDurations(sends))
	// Lock acquisition in the narrow sense: first send attempt to the
	// execution's first thread.lock_acquired event, for the executions that
	// took the lock while live (one that ended before the drain reached its
	// queued messages never holds the lock; one that took a free lock did so
	// in its send's transaction, 0 ms).
	rows, err = pool.Query(context.Background(), `
		SELECT (extract(epoch FROM min(e.created_at) - min(m.created_at)) * 1e6)::bigint
		FROM thread_message m JOIN execution_event e ON e.execution_id = m.execution_id AND e.action = 'thread.lock_acquired'
		WHERE m.direction = 'out' GROUP BY m.execution_id`)
	benchNoError(b, err)
	locks, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	benchNoError(b, err)
	b.ReportMetric(float64(len(locks)), "lock_samples")
	if len(locks) > 0 {
		reportPercentiles(b, "lock_", toDurations(locks))
	}
}

// chattyFlow sends n messages with a short pause tool call between them, so
// an execution stays live (and holds its lock) while it talks.
func chattyFlow(n int) string {
	nodes := []string{`{"id": "start", "type": "start", "next": "m0"}`}
	for i := range n {
		next := fmt.Sprintf("p%d", i)
		if i == n-1 {
			next = "end"
		}
		nodes = append(nodes, fmt.Sprintf(`{"id": "m%d", "type": "action", "actionType": "send_message", "parameters": {"message": "{{who}}#%d"}, "next": %q}`, i, i, next))
		if i < n-1 {
			nodes = append(nodes, fmt.Sprintf(`{"id": "p%d", "type": "task", "task": "pause", "next": "m%d"}`, i, i+1))
		}
	}
	nodes = append(nodes, `{"id": "end", "type": "end"}`)
	return fmt.Sprintf(`{"workflow_id": "chatty", "version": "1", "nodes": [%s]}`, strings.Join(nodes, ","))
}

func pauseTool(ctx context.Context, _ engine.ToolCall) (map[string]any, error) {
	select {
	case <-time.After(2 * time.Millisecond):
		return map[string]any{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// runChatty starts executions × perExec messages over threads threads (8 at
// a time) and waits until every execution ended and every message was
// delivered; it returns the wall time.
func runChatty(b *testing.B, bb *benchBundle, round, executions, threads int) time.Duration {
	b.Helper()
	began := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range executions {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			bb.start(b, "chatty", fmt.Sprintf("thread-%d", i%threads), map[string]any{"who": fmt.Sprintf("r%d-x%d", round, i)})
		}()
	}
	wg.Wait()
	// Both counts read small partial indexes, so polling stays cheap as the
	// tables grow.
	bb.waitCount(b, 0, 10*time.Minute, `SELECT (SELECT count(*) FROM agent_execution WHERE status IN ('pending', 'running', 'waiting'))
		+ (SELECT count(*) FROM thread_message WHERE status IN ('queued', 'pending'))`)
	return time.Since(began)
}

// BenchmarkHotThread: each b.N iteration is 10 executions competing for one
// thread, 10 messages each with 2 ms pauses. msgs/s is delivered messages
// over wall time; turn_p50_ms/turn_p99_ms is an execution's wait from its
// first send attempt to its first message delivered (its lock acquisition,
// direct, after a holder, or through the drain), deliver_* the same per
// message.
func BenchmarkHotThread(b *testing.B) {
	bb := benchSetup(b, map[string]engine.ToolFunc{"pause": pauseTool})
	bb.define(b, chattyFlow(10))
	b.ResetTimer()
	var elapsed time.Duration
	for i := range b.N {
		elapsed += runChatty(b, bb, i, 10, 1)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*100)/elapsed.Seconds(), "msgs/s")
	sendTimes(b, bb.pool)
}

// BenchmarkManyThreads: each b.N iteration is 1,000 executions on 1,000
// threads, 10 messages each with 2 ms pauses; the same metrics as
// BenchmarkHotThread.
func BenchmarkManyThreads(b *testing.B) {
	bb := benchSetup(b, map[string]engine.ToolFunc{"pause": pauseTool})
	bb.define(b, chattyFlow(10))
	b.ResetTimer()
	var elapsed time.Duration
	for i := range b.N {
		elapsed += runChatty(b, bb, i, 1000, 1000)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*10_000)/elapsed.Seconds(), "msgs/s")
	sendTimes(b, bb.pool)
}

// BenchmarkSettlingStart starts baton bench's five-node run (five nodes,
// one message) one at a time: each settles in its start transaction and
// its message is delivered promptly, as in baton serve. It reports what
// the process allocates per start (B/op, allocs/op, with the run's
// delivery and River's polling in the background), which the Go
// collector's share of the five-node figure follows; its ns/op is one
// client's latency, not a throughput.
func BenchmarkSettlingStart(b *testing.B) {
	bb := benchSetup(b, nil)
	b.Cleanup(bb.engine.DeliverPromptly(engine.DefaultPromptSlots))
	bb.define(b, benchkit.FiveNodeWorkflow)
	b.ReportAllocs()
	for b.Loop() {
		bb.start(b, "bench", "", benchkit.FiveNodeInput())
	}
}
