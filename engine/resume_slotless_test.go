package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/pgtest"
)

// holdWorkflow waits for an event, then says so and ends: the step after
// its wait settles.
const holdWorkflow = `{"workflow_id": "hold", "version": "1", "nodes": [
  {"id": "start", "type": "start", "next": "wait"},
  {"id": "wait", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "go", "timeout": "1h"}, "next": "say"},
  {"id": "say", "type": "action", "actionType": "send_message", "parameters": {"message": "seguimos"}, "next": "end"},
  {"id": "end", "type": "end", "result": {"summary": "ok"}}]}`

// TestSettlingResumesTakeNoSlot: an event whose run's next nodes settle
// runs them in its own transaction, and without a slot when the run's lane
// has room and no queue, as a settling start does. Two processes share
// lane main (limit 1):
//   - with main full, a resumed run waits its turn (pending) and runs only
//     once the slot is free;
//   - with its thread row held by another transaction, a resumed run is
//     admitted and its step goes to a job;
//   - with main's row held by another transaction, a resumed run with room
//     still ends in the event's transaction: it never takes the row;
//   - another tenant's event naming the run is not found and resumes
//     nothing;
//   - with room, 40 events published at once from both processes each end
//     their run before they commit, no step job is inserted for any, and a
//     sampler never sees main running above its limit.
func TestSettlingResumesTakeNoSlot(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	release := make(chan struct{})
	tools := engine.NewTools()
	tools.Register("block", blockUntil(release))
	channel := &engine.MemoryChannel{}
	cfg := engine.Config{LaneLimits: map[string]int{"main": 1}, Tools: tools, Channel: channel}
	a := laneProcessWith(t, dbURL, cfg)
	b := laneProcessWith(t, dbURL, cfg)
	ctx := context.Background()
	const tenant = "tenant-resume-slotless"
	for _, def := range []string{holdWorkflow, taskWorkflow("slow", "block")} {
		_, _, err := a.DefineWorkflow(ctx, a.Pool(), tenant, []byte(def))
		require.NoError(t, err)
	}
	start := func(workflowID string) *engine.Execution {
		var x *engine.Execution
		require.NoError(t, a.WithTx(ctx, func(tx pgx.Tx) error {
			var err error
			x, err = a.StartExecution(ctx, tx, engine.StartParams{TenantID: tenant, WorkflowID: workflowID, Priority: 5})
			return err
		}))
		return x
	}
	publish := func(eng *engine.Engine, x *engine.Execution) *engine.EventResult {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		res, err := eng.PublishEvent(ctx, engine.PublishEventParams{TenantID: tenant, EventType: engine.EventTypeEventCompleted,
			EventID: "go-" + x.ExecutionID, ExecutionID: x.ExecutionID, Data: map[string]any{"event_id": "go"}})
		require.NoError(t, err)
		require.Equal(t, []string{x.ExecutionID}, res.Resumed)
		return res
	}
	get := func(x *engine.Execution) *engine.Execution {
		got, err := a.GetExecution(ctx, a.Pool(), tenant, x.ExecutionID)
		require.NoError(t, err)
		return got
	}
	stepJobs := func(ids ...int64) int {
		var n int
		require.NoError(t, a.Pool().QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'execution.step'
			AND (args->>'execution_id')::bigint = ANY($1)`, ids).Scan(&n))
		return n
	}
	const n = 40
	held := make([]*engine.Execution, n+3)
	for i := range held {
		held[i] = start("hold")
		require.Equal(t, engine.StatusWaiting, held[i].Status)
	}

	// A full lane: the resumed run is pending until the slot is free.
	slow := start("slow")
	require.Equal(t, engine.StatusRunning, slow.Status)
	publish(b, held[0])
	require.Equal(t, engine.StatusPending, get(held[0]).Status, "main is full: a resumed run waits its turn")
	close(release)
	require.Eventually(t, func() bool { return get(held[0]).Status == engine.StatusCompleted }, 30*time.Second, 10*time.Millisecond)
	require.False(t, get(held[0]).CompletedAt.Before(*get(slow).CompletedAt), "resumed only once the slot was free")

	// Its thread row held by another transaction: admitted, its step a job.
	thread, err := a.Pool().Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = thread.Rollback(ctx) })
	_, err = thread.Exec(ctx, `SELECT 1 FROM thread WHERE id = (SELECT thread_id FROM agent_execution WHERE id = $1) FOR UPDATE`, held[1].ID)
	require.NoError(t, err)
	publish(a, held[1])
	require.Equal(t, engine.StatusRunning, get(held[1]).Status)
	require.Equal(t, 1, stepJobs(held[1].ID), "a resumed run whose thread is held goes on in a job")
	require.NoError(t, thread.Rollback(ctx))
	require.Eventually(t, func() bool { return get(held[1]).Status == engine.StatusCompleted }, 30*time.Second, 10*time.Millisecond)

	// Main's row held by another transaction: a run with room does not
	// need it, and ends in the event's transaction.
	lane, err := a.Pool().Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lane.Rollback(ctx) })
	_, err = lane.Exec(ctx, `SELECT 1 FROM lane WHERE tenant_id = '' AND name = 'main' FOR UPDATE`)
	require.NoError(t, err)
	publish(b, held[2])
	require.Equal(t, engine.StatusCompleted, get(held[2]).Status, "a resume with room took main's row")
	require.NoError(t, lane.Rollback(ctx))

	// Another tenant's event naming this tenant's run resumes nothing: the
	// run still waits, and its own event resumes it below.
	_, err = b.PublishEvent(ctx, engine.PublishEventParams{TenantID: "tenant-intruder", EventType: engine.EventTypeEventCompleted,
		EventID: "go-" + held[3].ExecutionID, ExecutionID: held[3].ExecutionID, Data: map[string]any{"event_id": "go"}})
	require.ErrorIs(t, err, engine.ErrNotFound)
	require.Equal(t, engine.StatusWaiting, get(held[3]).Status)

	// Room and no queue: 40 events at once from two processes, a sampler
	// watching.
	stopWatch := watchRunning(ctx, a.Pool(), "main", 1)
	delivered := len(channel.Messages())
	var wg sync.WaitGroup
	ids := make([]int64, n)
	for i, x := range held[3:] {
		ids[i] = x.ID
		eng := []*engine.Engine{a, b}[i%2]
		wg.Go(func() {
			publish(eng, x)
			if got := get(x); got.Status != engine.StatusCompleted {
				t.Errorf("run %d is %s after its event committed, not completed", i, got.Status)
			}
		})
	}
	wg.Wait()
	samples, overLimit := stopWatch()
	require.Positive(t, samples)
	require.Zero(t, overLimit, "a sample saw main running above its limit")
	require.Zero(t, stepJobs(ids...), "a settling resume needed a step job")
	require.Eventually(t, func() bool { return len(channel.Messages()) >= delivered+n }, 10*time.Second, 20*time.Millisecond,
		"every resumed run's message is delivered")
	var pending int
	require.NoError(t, a.Pool().QueryRow(ctx, `SELECT count(*) FROM agent_execution WHERE status NOT IN ('completed')`).Scan(&pending))
	require.Zero(t, pending, fmt.Sprintf("%d runs did not complete", pending))
}
