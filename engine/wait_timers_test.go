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
)

// timerWorkflows wait an hour in each way a wait can end early: an event,
// an input, an inbound message, and a child's completion (the child waits
// for an event). A node between the wait and the end lets a resume settle
// in its own transaction (a wait followed directly by an end node does not
// count as settling, Definition.StepSettlesFrom).
var timerWorkflows = []string{
	`{"workflow_id": "t-event", "version": "1.0.0", "nodes": [
	  {"id": "start", "type": "start", "next": "w"},
	  {"id": "w", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "go", "timeout": "1h"}, "next": "done"},
	  {"id": "done", "type": "action", "actionType": "set_variables", "parameters": {"values": {"done": true}}, "next": "end"},
	  {"id": "end", "type": "end"}]}`,
	`{"workflow_id": "t-input", "version": "1.0.0", "nodes": [
	  {"id": "start", "type": "start", "next": "w"},
	  {"id": "w", "type": "action", "actionType": "request_input", "parameters": {"prompt": "¿Nombre?", "timeout": "1h"}, "next": "done"},
	  {"id": "done", "type": "action", "actionType": "set_variables", "parameters": {"values": {"done": true}}, "next": "end"},
	  {"id": "end", "type": "end"}]}`,
	`{"workflow_id": "t-response", "version": "1.0.0", "nodes": [
	  {"id": "start", "type": "start", "next": "w"},
	  {"id": "w", "type": "action", "actionType": "wait_for_response", "parameters": {"timeout": "1h"}, "next": "done"},
	  {"id": "done", "type": "action", "actionType": "set_variables", "parameters": {"values": {"done": true}}, "next": "end"},
	  {"id": "end", "type": "end"}]}`,
	`{"workflow_id": "t-parent", "version": "1.0.0", "nodes": [
	  {"id": "start", "type": "start", "next": "w"},
	  {"id": "w", "type": "action", "actionType": "trigger_agent",
	   "parameters": {"workflow_id": "t-event", "waitForCompletion": true, "timeout": "1h"}, "next": "done"},
	  {"id": "done", "type": "action", "actionType": "set_variables", "parameters": {"values": {"done": true}}, "next": "end"},
	  {"id": "end", "type": "end"}]}`,
}

// liveTimers counts the execution.wait_timeout jobs still to fire
// (scheduled, available or retryable) of executions in the states given.
func liveTimers(t *testing.T, b *testBundle, states ...string) int {
	t.Helper()
	return countRows(t, b.pool, `
		SELECT count(*) FROM river_job j
		JOIN agent_execution e ON e.id = (j.args->>'execution_id')::bigint
		WHERE j.kind = 'execution.wait_timeout'
		  AND j.state IN ('scheduled', 'available', 'retryable')
		  AND e.status::text = ANY($1)`, states)
}

// The transaction that ends a wait deletes the wait's timeout job: after
// 1,000 executions that waited an hour and then went on (by an event, an
// input, an inbound message, a child's completion) and completed, or were
// cancelled or restarted, no timeout job of theirs is left to fire, and
// River UI lists none of them as scheduled. The restarted executions'
// fresh runs, which still wait, keep theirs, one each, and each job names
// its execution as the API does.
func TestEndedWaitsLeaveNoTimers(t *testing.T) {
	t.Parallel()
	const runs = 1000
	// Room in the lanes, so that no run waits for admission.
	b := setup(t, setupOpts{laneLimits: map[string]int{"main": 64, "subagent": 64}})
	ctx := context.Background()
	for _, def := range timerWorkflows {
		b.define(t, def)
	}
	workflows := []string{"t-event", "t-input", "t-response", "t-parent", "t-event", "t-event"}
	ends := []func(x *engine.Execution) error{
		func(x *engine.Execution) error { return b.publishGo(x.ExecutionID) },
		func(x *engine.Execution) error {
			return b.engine.WithTx(ctx, func(tx pgx.Tx) error {
				_, err := b.engine.ProvideInputTx(ctx, tx, engine.InputParams{TenantID: b.tenant, ExecutionID: x.ExecutionID, Input: map[string]any{"name": "Ana"}})
				return err
			})
		},
		func(x *engine.Execution) error {
			return b.engine.WithTx(ctx, func(tx pgx.Tx) error {
				res, err := b.engine.ReceiveInboundTx(ctx, tx, engine.InboundParams{TenantID: b.tenant, ThreadID: x.ThreadID, Text: "hola"})
				if err == nil && (res.ExecutionID == nil || *res.ExecutionID != x.ExecutionID) {
					err = fmt.Errorf("the message did not resume %s: %s", x.ExecutionID, res.Outcome)
				}
				return err
			})
		},
		func(x *engine.Execution) error {
			child, err := b.engine.GetExecution(ctx, b.pool, b.tenant, x.ExecutionID)
			if err != nil {
				return err
			}
			return b.publishGo(child.Variables["triggeredExecutionId"].(string))
		},
		func(x *engine.Execution) error {
			_, err := b.engine.Cancel(ctx, b.tenant, x.ExecutionID, "", "")
			return err
		},
		func(x *engine.Execution) error {
			return b.engine.WithTx(ctx, func(tx pgx.Tx) error {
				_, err := b.engine.RestartTx(ctx, tx, b.tenant, x.ExecutionID, "", "")
				return err
			})
		},
	}
	t0 := time.Now()
	// The runs start fifty to a transaction, each on its own thread, and
	// all wait (a parent's child too).
	started := make([]*engine.Execution, 0, runs)
	for len(started) < runs {
		require.NoError(t, b.engine.WithTx(ctx, func(tx pgx.Tx) error {
			var batch []*engine.Execution
			for i := len(started); i < min(len(started)+50, runs); i++ {
				x, err := b.engine.StartExecution(ctx, tx, engine.StartParams{TenantID: b.tenant,
					WorkflowID: workflows[i%len(ends)], ThreadID: fmt.Sprintf("th-%d", i)})
				if err != nil {
					return err
				}
				batch = append(batch, x)
			}
			started = append(started, batch...)
			return nil
		}))
	}
	kind := func(k int) (n int) {
		for i := range runs {
			if i%len(ends) == k {
				n++
			}
		}
		return n
	}
	parents, restarts := kind(3), kind(5)
	b.waitForCount(t, runs+parents, `SELECT count(*) FROM agent_execution WHERE status = 'waiting'`)

	t.Logf("%d runs started and waiting in %s", runs, time.Since(t0))
	t0 = time.Now()
	// Eight at a time, each wait ends.
	next := make(chan int, runs)
	for i := range runs {
		next <- i
	}
	close(next)
	errs := make(chan error, runs)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range next {
				errs <- ends[i%len(ends)](started[i])
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, restarts, countRows(t, b.pool, `SELECT count(*) FROM agent_execution WHERE restarted_from IS NOT NULL`))
	// The runs and the parents' children end; the restarted runs' fresh
	// ones wait.
	b.waitForCount(t, runs+parents, `SELECT count(*) FROM agent_execution WHERE status IN ('completed', 'cancelled')`)
	b.waitForCount(t, restarts, `SELECT count(*) FROM agent_execution WHERE status = 'waiting'`)

	t.Logf("their waits ended in %s", time.Since(t0))
	require.Equal(t, 0, liveTimers(t, b, "completed", "failed", "timeout", "cancelled", "running", "pending"),
		"timeout jobs of waits that are over")
	require.Equal(t, restarts, liveTimers(t, b, "waiting"), "one timeout job per wait that goes on")
	require.Equal(t, restarts, countRows(t, b.pool, `
		SELECT count(*) FROM river_job j JOIN agent_execution e ON e.id = (j.args->>'execution_id')::bigint
		WHERE j.kind = 'execution.wait_timeout' AND j.state = 'scheduled'
		  AND j.args->>'execution' = e.execution_id AND j.args->>'tenant_id' = e.tenant_id`))
}

// waitForCount polls a count query until it gives want.
func (b *testBundle) waitForCount(t *testing.T, want int, sql string) {
	t.Helper()
	require.Eventually(t, func() bool { return countRows(t, b.pool, sql) == want }, time.Minute, 20*time.Millisecond, sql)
}

// publishGo resumes an execution waiting for the event "go".
func (b *testBundle) publishGo(executionID string) error {
	res, err := b.engine.PublishEvent(context.Background(), engine.PublishEventParams{TenantID: b.tenant, EventType: engine.EventTypeEventCompleted,
		EventID: "go-" + executionID, ExecutionID: executionID, Data: map[string]any{"event_id": "go"}})
	if err == nil && (len(res.Resumed) != 1 || res.Resumed[0] != executionID) {
		err = fmt.Errorf("the event did not resume %s: %v", executionID, res.Resumed)
	}
	return err
}
