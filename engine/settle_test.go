package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/engine/workflow"
)

// TestFirstStepSettles: a start can skip its lane only when every path of
// its first step ends the run or makes it wait, with no tool call on the way
// and within the step's node budget.
func TestFirstStepSettles(t *testing.T) {
	tools := engine.NewTools()
	tools.Register("work", nil)
	node := func(id, body string) string { return fmt.Sprintf(`{"id": %q, %s}`, id, body) }
	def := func(nodes ...string) *workflow.Definition {
		raw := `{"workflow_id": "w", "version": "1", "nodes": [`
		for i, n := range nodes {
			if i > 0 {
				raw += ","
			}
			raw += n
		}
		d, err := workflow.ParseDefinition([]byte(raw + `]}`))
		require.NoError(t, err)
		require.NoError(t, d.Validate(tools, workflow.Limits{}))
		return d
	}
	end := node("end", `"type": "end"`)
	straight := def(node("start", `"type": "start", "next": "say"`),
		node("say", `"type": "action", "actionType": "send_message", "parameters": {"message": "hola"}, "next": "end"`), end)
	require.True(t, straight.FirstStepSettles(100))
	require.True(t, straight.FirstStepSettles(3), "three nodes fit a budget of three")
	require.False(t, straight.FirstStepSettles(2), "over the step's node budget")

	waits := def(node("start", `"type": "start", "next": "ask"`),
		node("ask", `"type": "action", "actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "work"`),
		node("work", `"type": "task", "task": "work", "next": "end"`), end)
	require.True(t, waits.FirstStepSettles(100), "the task comes after the wait, in a later step")

	branchTask := def(node("start", `"type": "start", "next": "pick"`),
		node("pick", `"type": "decision", "condition": "${x} > 1", "branches": {"true": "work", "false": "end"}`),
		node("work", `"type": "task", "task": "work", "next": "end"`), end)
	require.False(t, branchTask.FirstStepSettles(100), "one branch calls a tool")

	child := def(node("start", `"type": "start", "next": "kid"`),
		node("kid", `"type": "action", "actionType": "trigger_agent", "parameters": {"workflow_id": "k", "waitForCompletion": true}, "next": "end"`), end)
	require.False(t, child.FirstStepSettles(100), "a child is admitted in the parent's transaction, which must hold its slot")

	loop := def(node("start", `"type": "start", "next": "ask"`),
		node("ask", `"type": "action", "actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "pick"`),
		node("pick", `"type": "decision", "condition": "${done}", "branches": {"true": "end", "false": "ask"}`), end)
	require.True(t, loop.FirstStepSettles(100), "a loop through a wait commits at the wait")
}

// greetWorkflow's first step settles in its start transaction: start,
// set_variables, send_message, end.
const greetWorkflow = `{"workflow_id": "greet", "version": "1.0.0", "nodes": [
  {"id": "start", "type": "start", "next": "set"},
  {"id": "set", "type": "action", "actionType": "set_variables", "parameters": {"values": {"who": "Ana"}}, "next": "say"},
  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "Hola {{who}}"}, "next": "end"},
  {"id": "end", "type": "end", "result": {"summary": "ok"}}]}`

// TestSettlingStartsTakeNoSlot: a start whose first step ends the run (or
// makes it wait) in its own transaction needs no lane slot while the lane has
// room and no queue; in a full lane it queues like any other, FIFO. Many at
// once on lane main (limit 1) all end, none ever shows as running, and none
// needed a step job.
func TestSettlingStartsTakeNoSlot(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := setupLanes(t, map[string]int{"main": 1}, map[string]engine.ToolFunc{
		"block": blockUntil(release),
	})
	ctx := context.Background()
	b.define(t, greetWorkflow)
	b.define(t, taskWorkflow("slow", "block"))

	// A full lane: the settling start queues behind the running run.
	slow := b.start(t, engine.StartParams{WorkflowID: "slow"})
	require.Equal(t, engine.StatusRunning, slow.Status)
	queued := b.start(t, engine.StartParams{WorkflowID: "greet"})
	require.Equal(t, engine.StatusPending, queued.Status, "main is full: a settling start waits its turn")
	close(release)
	q := b.waitFor(t, queued.ExecutionID, terminal)
	require.Equal(t, engine.StatusCompleted, q.Status)
	require.False(t, q.StartedAt.Before(*b.get(t, slow.ExecutionID).CompletedAt), "admitted only once the slot was free")

	// Room and no queue: 40 concurrent settling starts, a sampler watching.
	stopWatch := watchRunning(ctx, b.pool, "main", 1)
	const n = 40
	ids := make([]int64, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = b.engine.WithTx(ctx, func(tx pgx.Tx) error {
				x, err := b.engine.StartExecution(ctx, tx, engine.StartParams{TenantID: b.tenant, WorkflowID: "greet", ThreadID: fmt.Sprintf("greet-%d", i), Priority: 5})
				if err == nil {
					ids[i] = x.ID
					if x.Status != engine.StatusCompleted {
						err = fmt.Errorf("start %d ended %s in its transaction", i, x.Status)
					}
				}
				return err
			})
		})
	}
	wg.Wait()
	samples, overLimit := stopWatch()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Positive(t, samples)
	require.Zero(t, overLimit, "a sample saw main running above its limit")
	var stepJobs int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'execution.step' AND (args->>'execution_id')::bigint = ANY($1)`, ids).Scan(&stepJobs))
	require.Zero(t, stepJobs, "a settling start needed a step job")
	require.Eventually(t, func() bool { return len(b.channel.Messages()) >= n+1 }, 10*time.Second, 20*time.Millisecond, "every greeting is delivered")
}

// TestChildInTheParentsLaneIsNotStranded: a parent that triggers a child in
// its own lane (limit 1) and waits for it. The child is admitted once the
// parent waits — by the parent's own transaction, which frees the slot — and
// both end promptly, not after the periodic lane sweep.
func TestChildInTheParentsLaneIsNotStranded(t *testing.T) {
	t.Parallel()
	b := setupLanes(t, map[string]int{"solo": 1}, nil)
	b.define(t, `{"workflow_id": "kid", "version": "1", "lane": "solo", "nodes": [
	  {"id": "start", "type": "start", "next": "end"},
	  {"id": "end", "type": "end", "result": {"summary": "ok"}}]}`)
	b.define(t, `{"workflow_id": "boss", "version": "1", "lane": "solo", "nodes": [
	  {"id": "start", "type": "start", "next": "kid"},
	  {"id": "kid", "type": "action", "actionType": "trigger_agent", "parameters": {"workflow_id": "kid", "waitForCompletion": true, "timeout": "1m"}, "next": "end"},
	  {"id": "end", "type": "end", "result": {"summary": "ok"}}]}`)
	for range 3 {
		began := time.Now()
		boss := b.start(t, engine.StartParams{WorkflowID: "boss"})
		x := b.waitFor(t, boss.ExecutionID, terminal)
		require.Equal(t, engine.StatusCompleted, x.Status)
		require.Less(t, time.Since(began), 3*time.Second, "the child waited for the lane sweep")
	}
}

// askWorkflow's first step says something, then waits for an answer: the
// run keeps its voice on the thread while it waits.
const askWorkflow = `{"workflow_id": "ask", "version": "1.0.0", "nodes": [
  {"id": "start", "type": "start", "next": "say"},
  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "¿Me mandas tu INE?"}, "next": "wait"},
  {"id": "wait", "type": "action", "actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "end"},
  {"id": "end", "type": "end"}]}`

// TestPrivateLockIsWrittenOnlyWhenKept: a settling start that creates its
// thread, or finds it with its lock free and nothing queued, holds the
// thread's lock in memory (its transaction holds the thread row: no other
// transaction can take the lock or queue until it commits). A run that
// talks and ends leaves the row as it was, a run that talks and waits
// stores its lock once, and that stored lock is a real lock: another
// execution's message queues behind it. A free lock with messages queued
// is the drain's: a new run's message queues behind them.
func TestPrivateLockIsWrittenOnlyWhenKept(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, greetWorkflow)
	b.define(t, askWorkflow)
	ctx := context.Background()

	// start runs workflow on thread and returns the execution with the
	// number of thread rows its transaction updated (the backend's pending
	// counts can include earlier transactions': the difference is this
	// one's).
	start := func(workflow, thread string) (*engine.Execution, int64) {
		t.Helper()
		const updated = `SELECT coalesce(sum(n_tup_upd), 0) FROM pg_stat_xact_user_tables WHERE relname = 'thread'`
		var x *engine.Execution
		var before, after int64
		require.NoError(t, b.engine.WithTx(ctx, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, updated).Scan(&before); err != nil {
				return err
			}
			var err error
			if x, err = b.engine.StartExecution(ctx, tx, engine.StartParams{TenantID: b.tenant, WorkflowID: workflow, ThreadID: thread}); err != nil {
				return err
			}
			return tx.QueryRow(ctx, updated).Scan(&after)
		}))
		return x, after - before
	}
	holder := func(thread string) *string {
		t.Helper()
		var key *string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT x.execution_id FROM thread t LEFT JOIN agent_execution x ON x.id = t.active_execution_id
		                                          WHERE t.tenant_id = $1 AND t.thread_id = $2`, b.tenant, thread).Scan(&key))
		return key
	}
	actions := func(x *engine.Execution) []string {
		t.Helper()
		logs, err := b.engine.Logs(ctx, b.pool, b.tenant, x.ExecutionID, 0, 100)
		require.NoError(t, err)
		var out []string
		for _, l := range logs {
			out = append(out, l.Action)
		}
		return out
	}

	greet, updates := start("greet", "new-greet")
	require.Equal(t, engine.StatusCompleted, greet.Status)
	require.Zero(t, updates, "a run that took the new thread's lock and ended wrote no lock")
	require.Nil(t, holder("new-greet"))
	require.Subset(t, actions(greet), []string{engine.EventLockAcquired, engine.EventLockReleased})
	require.Eventually(t, func() bool { return len(b.channel.Messages()) == 1 }, 10*time.Second, 10*time.Millisecond, "the greeting is delivered")

	ask, updates := start("ask", "new-ask")
	require.Equal(t, engine.StatusWaiting, ask.Status)
	require.Equal(t, int64(1), updates, "a run that waits stores its lock once")
	require.Equal(t, &ask.ExecutionID, holder("new-ask"))
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM monitor_active_locks WHERE active_execution_id = $1`, ask.ExecutionID))

	other, updates := start("greet", "new-ask")
	require.Equal(t, engine.StatusCompleted, other.Status)
	require.Equal(t, int64(0), updates, "queued behind the waiting holder, the lock untouched")
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM thread_message m JOIN agent_execution x ON x.id = m.execution_id
	                                          WHERE x.execution_id = $1 AND m.status = 'queued'`, other.ExecutionID))
	require.Equal(t, &ask.ExecutionID, holder("new-ask"))

	again, updates := start("greet", "new-greet")
	require.Equal(t, engine.StatusCompleted, again.Status)
	require.Zero(t, updates, "an existing thread with a free lock and nothing queued: no lock written")
	require.Nil(t, holder("new-greet"))
	require.Subset(t, actions(again), []string{engine.EventLockAcquired, engine.EventLockReleased})
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM thread_message m JOIN agent_execution x ON x.id = m.execution_id
	                                          WHERE x.execution_id = $1 AND m.status <> 'queued'`, again.ExecutionID))

	// The waiting holder's lock is gone (as when it ends) while other's
	// message is still queued, before any drain ran: the lock is free, and
	// the drain's. River stops first, so that no drain job can deliver the
	// queued message before late starts.
	require.NoError(t, b.client.Stop(ctx))
	_, err := b.pool.Exec(ctx, `UPDATE thread SET active_execution_id = NULL, execution_locked_at = NULL
	                            WHERE tenant_id = $1 AND thread_id = 'new-ask'`, b.tenant)
	require.NoError(t, err)
	late, _ := start("greet", "new-ask")
	require.Equal(t, engine.StatusCompleted, late.Status)
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM thread_message m JOIN agent_execution x ON x.id = m.execution_id
	                                          WHERE x.execution_id = $1 AND m.status = 'queued'`, late.ExecutionID),
		"behind the queued message, not ahead of it")
}

// TestNewThreadFirstUseRace: many starts race to create one thread and talk
// on it. Whichever creates it holds its lock in memory; the others wait for
// its row and see the lock it stored. With a run that waits, exactly one
// talks and the rest queue behind it; with runs that end, every message goes
// out and the thread ends free.
func TestNewThreadFirstUseRace(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, greetWorkflow)
	b.define(t, askWorkflow)
	const n = 12
	race := func(workflow, thread string) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				errs <- b.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
					_, err := b.engine.StartExecution(context.Background(), tx, engine.StartParams{TenantID: b.tenant, WorkflowID: workflow, ThreadID: thread})
					return err
				})
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
	statuses := func(thread string) map[string]int {
		t.Helper()
		rows, err := b.pool.Query(context.Background(), `SELECT m.status, count(*)::int FROM thread_message m JOIN thread t ON t.id = m.thread_id
		                                                 WHERE t.tenant_id = $1 AND t.thread_id = $2 GROUP BY m.status`, b.tenant, thread)
		require.NoError(t, err)
		out := map[string]int{}
		for rows.Next() {
			var s string
			var c int
			require.NoError(t, rows.Scan(&s, &c))
			out[s] = c
		}
		require.NoError(t, rows.Err())
		return out
	}

	race("ask", "race-ask")
	got := statuses("race-ask")
	require.Equal(t, n-1, got["queued"], "all but the holder queue: %v", got)
	require.Equal(t, 1, got["pending"]+got["delivered"], "one voice: %v", got)
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM thread t JOIN thread_message m ON m.execution_id = t.active_execution_id
	                                          WHERE t.tenant_id = $1 AND t.thread_id = 'race-ask' AND m.status <> 'queued'`, b.tenant),
		"the holder is the execution whose message went out")

	race("greet", "race-greet")
	require.Eventually(t, func() bool { return statuses("race-greet")["delivered"] == n }, 20*time.Second, 20*time.Millisecond, "every greeting goes out")
	require.Equal(t, 0, countRows(t, b.pool, `SELECT count(*) FROM thread WHERE tenant_id = $1 AND thread_id = 'race-greet' AND active_execution_id IS NOT NULL`, b.tenant))
}

// strandedWorkflow fails at its decision in its first step: no branch
// matches false.
const strandedWorkflow = `{"workflow_id": "stranded", "version": "1.0.0", "nodes": [
  {"id": "start", "type": "start", "next": "say"},
  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "Un momento"}, "next": "pick"},
  {"id": "pick", "type": "decision", "condition": "${who} == 'Ana'", "branches": {"true": "end"}},
  {"id": "end", "type": "end"}]}`

// TestSettlingStartWritesItsRowOnce: a settling start writes its execution
// row once, in the state its start transaction leaves it in, when its step
// ends it without needing the row before: one insert and no update. A run
// that waits, or that talks on a thread that already existed, writes the
// row first and updates it as before. Either way the stored row is the one
// an update would have left, a duplicate execution_id is refused, and a
// message still cannot name an execution that does not exist.
func TestSettlingStartWritesItsRowOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, greetWorkflow)
	b.define(t, askWorkflow)
	b.define(t, strandedWorkflow)
	ctx := context.Background()

	// start returns the execution with the rows of agent_execution its
	// transaction inserted and updated (differences of the backend's pending
	// counts, which can include earlier transactions').
	start := func(p engine.StartParams) (x *engine.Execution, inserted, updated int64, err error) {
		t.Helper()
		const writes = `SELECT coalesce(sum(n_tup_ins), 0), coalesce(sum(n_tup_upd), 0) FROM pg_stat_xact_user_tables WHERE relname = 'agent_execution'`
		p.TenantID = b.tenant
		var ins0, upd0, ins1, upd1 int64
		err = b.engine.WithTx(ctx, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, writes).Scan(&ins0, &upd0); err != nil {
				return err
			}
			var err error
			if x, err = b.engine.StartExecution(ctx, tx, p); err != nil {
				return err
			}
			return tx.QueryRow(ctx, writes).Scan(&ins1, &upd1)
		})
		return x, ins1 - ins0, upd1 - upd0, err
	}
	stored := func(x *engine.Execution) *engine.Execution {
		t.Helper()
		got, err := b.engine.GetExecution(ctx, b.pool, b.tenant, x.ExecutionID)
		require.NoError(t, err)
		return got
	}

	greet, ins, upd, err := start(engine.StartParams{WorkflowID: "greet", ThreadID: "once-greet", ExecutionID: "exec-once"})
	require.NoError(t, err)
	require.Equal(t, [2]int64{1, 0}, [2]int64{ins, upd}, "ended in its step: inserted once, never updated")
	row := stored(greet)
	requireReturnedAsStored(t, greet, row)
	require.Equal(t, engine.StatusCompleted, row.Status)
	require.Equal(t, []string{"start", "set", "say", "end"}, row.NodePath)
	require.Equal(t, 4, row.StepsCompleted)
	require.Equal(t, "Ana", row.Variables["who"])
	require.NotNil(t, row.StartedAt)
	require.NotNil(t, row.CompletedAt)
	require.False(t, row.CompletedAt.Before(*row.StartedAt))
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM thread_message m JOIN agent_execution x ON x.id = m.execution_id
	                                          WHERE x.execution_id = $1`, greet.ExecutionID))
	require.Eventually(t, func() bool { return len(b.channel.Messages()) == 1 }, 10*time.Second, 10*time.Millisecond, "the greeting is delivered")

	_, _, _, err = start(engine.StartParams{WorkflowID: "greet", ThreadID: "once-other", ExecutionID: "exec-once"})
	var conflict *engine.ConflictError
	require.ErrorAs(t, err, &conflict, "a duplicate execution_id is refused at the row's only insert")
	require.Equal(t, "workflow.execute.duplicate_execution_id", conflict.Code)
	require.Zero(t, countRows(t, b.pool, `SELECT count(*) FROM thread WHERE tenant_id = $1 AND thread_id = 'once-other'`, b.tenant),
		"the refused start left nothing")

	stranded, ins, upd, err := start(engine.StartParams{WorkflowID: "stranded", ThreadID: "once-stranded", Input: map[string]any{"who": "Luis"}})
	require.NoError(t, err)
	require.Equal(t, [2]int64{1, 0}, [2]int64{ins, upd}, "failed in its step: inserted once, never updated")
	row = stored(stranded)
	requireReturnedAsStored(t, stranded, row)
	require.Equal(t, engine.StatusFailed, row.Status)
	require.Equal(t, "pick", *row.FailedNodeID)

	ask, ins, upd, err := start(engine.StartParams{WorkflowID: "ask", ThreadID: "once-ask"})
	require.NoError(t, err)
	require.Equal(t, [2]int64{1, 1}, [2]int64{ins, upd}, "a run that waits writes its row, then its wait")
	require.Equal(t, engine.StatusWaiting, stored(ask).Status)

	// The row written once is the row an update leaves, but for what
	// identifies the run and when it ran.
	ended := func(x *engine.Execution) map[string]any {
		var out map[string]any
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT to_jsonb(x) - '{id,execution_id,thread_id,created_at,started_at,current_step_started_at,updated_at,completed_at,queued_at}'::text[]
		                                          FROM agent_execution x WHERE tenant_id = $1 AND execution_id = $2`, b.tenant, x.ExecutionID).Scan(&out))
		return out
	}
	again, ins, upd, err := start(engine.StartParams{WorkflowID: "greet", ThreadID: "once-greet"})
	require.NoError(t, err)
	require.Equal(t, [2]int64{1, 0}, [2]int64{ins, upd}, "talking on an existing thread with its lock free: inserted once")
	require.Equal(t, ended(again), ended(greet))

	queued, ins, upd, err := start(engine.StartParams{WorkflowID: "greet", ThreadID: "once-ask"})
	require.NoError(t, err)
	require.Equal(t, [2]int64{1, 1}, [2]int64{ins, upd}, "talking on a thread another run holds needs the row first")
	row = stored(queued)
	require.Equal(t, engine.StatusCompleted, row.Status)
	require.False(t, row.CompletedAt.Before(*row.StartedAt))
	require.Equal(t, ended(queued), ended(greet))

	// The message's reference to its execution is checked at commit.
	err = b.engine.WithTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO thread_message (tenant_id, thread_id, direction, execution_id, body, status)
		                        SELECT tenant_id, id, 'out', -1, 'nadie', 'pending' FROM thread WHERE tenant_id = $1 AND thread_id = 'once-greet'`, b.tenant)
		return err
	})
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "23503", pgErr.Code, "a message of no execution is refused")
}

// requireReturnedAsStored checks that what a settling start returned is
// the row its held-back insert wrote, times included: the start computes
// the row it returns instead of reading it back.
func requireReturnedAsStored(t *testing.T, returned, stored *engine.Execution) {
	t.Helper()
	times := func(x *engine.Execution) []string {
		out := []string{x.CreatedAt.UTC().String(), x.UpdatedAt.UTC().String()}
		for _, at := range []*time.Time{x.StartedAt, x.CurrentStepAt, x.CompletedAt} {
			if at == nil {
				out = append(out, "nil")
				continue
			}
			out = append(out, at.UTC().String())
		}
		return out
	}
	require.Equal(t, times(stored), times(returned), "created, updated, started, current step, completed")
	require.Equal(t, stored.Status, returned.Status)
	require.Equal(t, stored.NodePath, returned.NodePath)
	require.Equal(t, stored.CurrentNodeID, returned.CurrentNodeID)
	require.Equal(t, [3]int64{int64(stored.StepsCompleted), int64(stored.TotalSteps), stored.StepSeq},
		[3]int64{int64(returned.StepsCompleted), int64(returned.TotalSteps), returned.StepSeq})
	require.Equal(t, stored.Variables, returned.Variables)
	require.Equal(t, stored.ResultType, returned.ResultType)
	require.Equal(t, stored.ResultSummary, returned.ResultSummary)
	require.Equal(t, stored.ErrorCode, returned.ErrorCode)
	require.Equal(t, stored.FailedNodeID, returned.FailedNodeID)
	for _, doc := range [][2]json.RawMessage{{stored.Result, returned.Result}, {stored.ErrorDetailsJSON, returned.ErrorDetailsJSON}} {
		if doc[0] == nil || doc[1] == nil {
			require.Equal(t, doc[0] == nil, doc[1] == nil)
			continue
		}
		require.JSONEq(t, string(doc[0]), string(doc[1]))
	}
}

// TestImplicitThreads: a settling start given neither a thread nor an
// execution id creates its implicit thread under the id its reservation
// drew, the row the same as a thread created by insert-if-absent; a start
// given an execution id whose implicit thread exists talks on that thread.
func TestImplicitThreads(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, greetWorkflow)
	ctx := context.Background()
	start := func(p engine.StartParams) *engine.Execution {
		t.Helper()
		p.TenantID, p.WorkflowID = b.tenant, "greet"
		var x *engine.Execution
		require.NoError(t, b.engine.WithTx(ctx, func(tx pgx.Tx) error {
			var err error
			x, err = b.engine.StartExecution(ctx, tx, p)
			return err
		}))
		require.Equal(t, engine.StatusCompleted, x.Status)
		return x
	}
	// thread is the run's thread row without what names it, and whether it
	// was created in the run's transaction.
	thread := func(x *engine.Execution) (row map[string]any, sameTx bool) {
		t.Helper()
		require.NoError(t, b.pool.QueryRow(ctx, `
			SELECT to_jsonb(t) - '{id,thread_id,contact,created_at,updated_at}'::text[], t.created_at = x.created_at AND t.updated_at = x.created_at
			FROM agent_execution x JOIN thread t ON t.id = x.thread_id
			WHERE x.tenant_id = $1 AND x.execution_id = $2 AND t.thread_id = 'implicit:' || x.execution_id AND t.contact = t.thread_id`,
			b.tenant, x.ExecutionID).Scan(&row, &sameTx))
		return row, sameTx
	}

	fresh := start(engine.StartParams{})
	named := start(engine.StartParams{ExecutionID: "exec-named"})
	freshRow, freshSameTx := thread(fresh)
	namedRow, namedSameTx := thread(named)
	require.True(t, freshSameTx)
	require.True(t, namedSameTx)
	require.Equal(t, namedRow, freshRow)
	require.Equal(t, "api", freshRow["channel"])
	require.Eventually(t, func() bool { return len(b.channel.Messages()) == 2 }, 10*time.Second, 10*time.Millisecond)

	start(engine.StartParams{ExecutionID: "exec-first", ThreadID: "implicit:exec-later"})
	later := start(engine.StartParams{ExecutionID: "exec-later"})
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(DISTINCT thread_id) FROM agent_execution
	                                          WHERE tenant_id = $1 AND execution_id IN ('exec-first', $2)`, b.tenant, later.ExecutionID),
		"the later run talks on the thread the first created")
}

// TestSettlingDuplicateExecutionIDRace: starts that race with one
// execution_id, each on a thread of its own, each run their whole first step
// before their row's only insert, where the duplicate shows. Exactly one
// commits; the others get the duplicate_execution_id error, not a raw
// constraint violation, and leave no thread, message or job behind, so
// exactly one greeting goes out.
func TestSettlingDuplicateExecutionIDRace(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.define(t, greetWorkflow)
	const n = 10
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- b.engine.WithTx(context.Background(), func(tx pgx.Tx) error {
				_, err := b.engine.StartExecution(context.Background(), tx, engine.StartParams{
					TenantID: b.tenant, WorkflowID: "greet", ThreadID: fmt.Sprintf("dup-%d", i), ExecutionID: "exec-dup",
				})
				return err
			})
		})
	}
	wg.Wait()
	close(errs)
	var ok, refused int
	for err := range errs {
		var conflict *engine.ConflictError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &conflict) && conflict.Code == "workflow.execute.duplicate_execution_id":
			refused++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	require.Equal(t, [2]int{1, n - 1}, [2]int{ok, refused})
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM thread WHERE tenant_id = $1 AND thread_id LIKE 'dup-%'`, b.tenant))
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM thread_message m JOIN thread t ON t.id = m.thread_id
	                                          WHERE t.tenant_id = $1 AND t.thread_id LIKE 'dup-%'`, b.tenant))
	require.Equal(t, 1, countRows(t, b.pool, `SELECT count(*) FROM execution_event e JOIN agent_execution x ON x.id = e.execution_id
	                                          WHERE x.tenant_id = $1 AND e.action = $2`, b.tenant, engine.EventStarted))
	// The committed start's job is gone too once its prompt delivery has
	// emptied the outbox.
	require.LessOrEqual(t, countRows(t, b.pool, `SELECT count(*) FROM river_job WHERE kind = 'message.deliver'`), 1,
		"at most one delivery job: the refused starts' jobs went with their transactions")
	require.Eventually(t, func() bool { return len(b.channel.Messages()) == 1 }, 10*time.Second, 10*time.Millisecond)
}
