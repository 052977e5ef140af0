package main

import (
	"context"
	"sync"
	"time"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/benchkit"
)

// benchHotWorkflow talks three times on its thread and ends.
const benchHotWorkflow = `{"workflow_id": "bench-hot", "version": "1", "nodes": [
  {"id": "start", "type": "start", "next": "a"},
  {"id": "a", "type": "action", "actionType": "send_message", "parameters": {"message": "uno"}, "next": "b"},
  {"id": "b", "type": "action", "actionType": "send_message", "parameters": {"message": "dos"}, "next": "c"},
  {"id": "c", "type": "action", "actionType": "send_message", "parameters": {"message": "tres"}, "next": "end"},
  {"id": "end", "type": "end"}]}`

// resumeRoundTrip measures (c): 200 executions wait for an event; one at a
// time, the event is published and the clock stops when the execution has
// run its next nodes to the end (benchkit.Resume).
func (b *bencher) resumeRoundTrip(ctx context.Context) (benchkit.Latencies, error) {
	baton, err := benchkit.StartBaton(ctx, b.pool, b.jobsConfig(), benchTenant, benchkit.WaitWorkflow)
	if err != nil {
		return nil, err
	}
	defer baton.Stop(ctx)
	lat, _, err := benchkit.Resume(ctx, b.pool, baton, benchkit.ResumeConfig{Tenant: benchTenant, Waiting: 200, Budget: b.cfg.duration})
	return lat, err
}

// hotThread measures (d): 10 loops start executions of a three-message
// workflow on one thread for the measured window. Each execution must hold
// the thread's lock to talk; acquisition is timed from the start call to
// the moment its start transaction, which took the thread row and the lock,
// committed. Messages count when delivered.
func (b *bencher) hotThread(ctx context.Context) (perSecond float64, acquire benchkit.Latencies, err error) {
	baton, err := benchkit.StartBaton(ctx, b.pool, b.jobsConfig(), benchTenant, benchHotWorkflow)
	if err != nil {
		return 0, nil, err
	}
	defer baton.Stop(ctx)
	runCtx, cancel := context.WithTimeout(ctx, b.cfg.duration)
	defer cancel()
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	began := time.Now()
	for range 10 {
		wg.Go(func() {
			for runCtx.Err() == nil {
				t0 := time.Now()
				_, err := baton.Start(runCtx, engine.StartParams{TenantID: benchTenant, WorkflowID: "bench-hot", ThreadID: "hot", Priority: 5, LaneFirst: true})
				if err != nil {
					return
				}
				mu.Lock()
				acquire = append(acquire, time.Since(t0))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Let the outbox catch up, then count what went out.
	for range 200 {
		var pending int
		if err := b.pool.QueryRow(ctx, sqlPendingOut).Scan(&pending); err != nil {
			return 0, nil, err
		}
		if pending == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var delivered int
	if err := b.pool.QueryRow(ctx, sqlDeliveredOut).Scan(&delivered); err != nil {
		return 0, nil, err
	}
	return float64(delivered) / time.Since(began).Seconds(), acquire, nil
}

// Bench-only reads of the scratch database.
const (
	sqlPendingOut   = `SELECT count(*) FROM thread_message WHERE status IN ('pending', 'queued')`
	sqlDeliveredOut = `SELECT count(*) FROM thread_message WHERE status = 'delivered'`
)
