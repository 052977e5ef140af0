package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/pgtest"
)

// A lane whose limit is a few slots above what the cluster can have in
// flight is entered in share mode while it is nearly empty and under its
// row lock near the limit. Two processes resume 160 waiting runs and start
// 160 runs that call a slow tool, all at once: a sampler never sees the
// lane above its limit, nor a free slot beside pending work for long, and
// every run completes.
func TestSharedAdmissionAcrossTwoProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDatabase(t)
	tools := engine.NewTools()
	var inTool, maxInTool atomic.Int32
	tools.Register("work", func(ctx context.Context, call engine.ToolCall) (map[string]any, error) {
		n := inTool.Add(1)
		defer inTool.Add(-1)
		for m := maxInTool.Load(); n > m && !maxInTool.CompareAndSwap(m, n); m = maxInTool.Load() {
		}
		time.Sleep(time.Duration(50+rand.IntN(50)) * time.Millisecond)
		return map[string]any{"done": true}, nil
	})
	// The limit needs the server's own bound on transactions in flight.
	probe := laneProcess(t, dbURL, nil, tools)
	var inFlight int
	require.NoError(t, probe.Pool().QueryRow(ctx, `SELECT current_setting('max_connections')::int
		+ current_setting('max_prepared_transactions')::int`).Scan(&inFlight))
	const shareRoom = 6
	limit := inFlight + shareRoom
	limits := map[string]int{"main": limit}
	a := laneProcess(t, dbURL, limits, tools)
	b := laneProcess(t, dbURL, limits, tools)
	const tenant = "tenant-shared"
	_, _, err := a.DefineWorkflow(ctx, a.Pool(), tenant, []byte(taskWorkflow("tw", "work")))
	require.NoError(t, err)
	_, _, err = a.DefineWorkflow(ctx, a.Pool(), tenant, []byte(`{"workflow_id": "rw", "version": "1", "nodes": [
	  {"id": "start", "type": "start", "next": "wait"},
	  {"id": "wait", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "go", "timeout": "1h"}, "next": "work"},
	  {"id": "work", "type": "task", "task": "work", "inputs": {"lane": "main"}, "next": "end"},
	  {"id": "end", "type": "end"}]}`))
	require.NoError(t, err)

	const n = 160
	waiting := make([]string, n)
	for i := range waiting {
		var x *engine.Execution
		require.NoError(t, a.WithTx(ctx, func(tx pgx.Tx) error {
			x, err = a.StartExecution(ctx, tx, engine.StartParams{TenantID: tenant, WorkflowID: "rw"})
			return err
		}))
		require.Equal(t, engine.StatusWaiting, x.Status)
		waiting[i] = x.ExecutionID
	}

	stop := make(chan struct{})
	sampled := make(chan struct{})
	var samples, over, maxRunning, maxStarved atomic.Int64
	go func() {
		defer close(sampled)
		var starvedSince time.Time
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			var running, pending int64
			if b.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'running'), count(*) FILTER (WHERE status = 'pending')
				FROM agent_execution WHERE lane = 'main'`).Scan(&running, &pending) != nil {
				continue
			}
			samples.Add(1)
			if running > int64(limit) {
				over.Add(1)
			}
			maxRunning.Store(max(maxRunning.Load(), running))
			switch {
			case running >= int64(limit) || pending == 0:
				starvedSince = time.Time{}
			case starvedSince.IsZero():
				starvedSince = time.Now()
			default:
				maxStarved.Store(max(maxStarved.Load(), time.Since(starvedSince).Milliseconds()))
			}
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for w := range 16 {
		eng := []*engine.Engine{a, b}[w%2]
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				_, err := eng.PublishEvent(ctx, engine.PublishEventParams{TenantID: tenant, EventType: engine.EventTypeEventCompleted,
					EventID: fmt.Sprint("go-", i), ExecutionID: waiting[i], Data: map[string]any{"event_id": "go"}})
				if err != nil {
					errs <- err
				}
				if err := eng.WithTx(ctx, func(tx pgx.Tx) error {
					_, err := eng.StartExecution(ctx, tx, engine.StartParams{TenantID: tenant, WorkflowID: "tw", Input: map[string]any{"lane": "main"}})
					return err
				}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		var left int
		require.NoError(t, a.Pool().QueryRow(ctx, `SELECT count(*) FROM agent_execution WHERE status <> 'completed'`).Scan(&left))
		return left == 0
	}, 90*time.Second, 50*time.Millisecond)
	close(stop)
	<-sampled
	t.Logf("limit=%d samples=%d max running=%d max in tool=%d max starved=%dms", limit, samples.Load(), maxRunning.Load(), maxInTool.Load(), maxStarved.Load())
	require.Greater(t, samples.Load(), int64(10))
	require.Zero(t, over.Load(), "a sample saw the lane above its limit")
	require.Greater(t, maxRunning.Load(), int64(shareRoom), "admission went past the share-mode room to the exclusive lock")
	require.Less(t, maxStarved.Load(), int64(1000), "a free slot beside pending work is filled inline or by one dispatch hop")
	var count int
	require.NoError(t, a.Pool().QueryRow(ctx, `SELECT count(*) FROM agent_execution WHERE status = 'completed'`).Scan(&count))
	require.Equal(t, 2*n, count)
}
