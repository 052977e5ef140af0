package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/jobs"
)

// benchWaitWorkflow waits for an event, then runs two nodes and ends: the
// resume round trip is from the event's acceptance to the end.
const benchWaitWorkflow = `{"workflow_id": "bench-wait", "version": "1", "nodes": [
  {"id": "start", "type": "start", "next": "wait"},
  {"id": "wait", "type": "action", "actionType": "wait_for_event", "parameters": {"event_id": "go", "timeout": "1h"}, "next": "note"},
  {"id": "note", "type": "action", "actionType": "set_variables", "parameters": {"values": {"resumed": true}}, "next": "end"},
  {"id": "end", "type": "end"}]}`

// benchHotWorkflow talks three times on its thread and ends.
const benchHotWorkflow = `{"workflow_id": "bench-hot", "version": "1", "nodes": [
  {"id": "start", "type": "start", "next": "a"},
  {"id": "a", "type": "action", "actionType": "send_message", "parameters": {"message": "uno"}, "next": "b"},
  {"id": "b", "type": "action", "actionType": "send_message", "parameters": {"message": "dos"}, "next": "c"},
  {"id": "c", "type": "action", "actionType": "send_message", "parameters": {"message": "tres"}, "next": "end"},
  {"id": "end", "type": "end"}]}`

// latencies is a set of measured durations.
type latencies []time.Duration

func (l latencies) percentile(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// resumeRoundTrip measures (c): executions wait for an event; one at a time,
// the event is published (accepted when its transaction commits) and the
// clock stops when the execution has run its next nodes to the end.
func (b *bencher) resumeRoundTrip(ctx context.Context) (latencies, error) {
	eng, client, err := b.batonEngine(ctx, benchWaitWorkflow)
	if err != nil {
		return nil, err
	}
	defer stopClient(ctx, client)
	const waiting = 200
	ids := make([]string, 0, waiting)
	for range waiting {
		var x *engine.Execution
		err := eng.WithTx(ctx, func(tx pgx.Tx) error {
			var err error
			x, err = eng.StartExecution(ctx, tx, engine.StartParams{TenantID: benchTenant, WorkflowID: "bench-wait", Priority: 5, LaneFirst: true})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("starting a waiting execution: %w", err)
		}
		ids = append(ids, x.ExecutionID)
	}
	var out latencies
	deadline := time.Now().Add(b.cfg.duration)
	for i, id := range ids {
		if i > 0 && time.Now().After(deadline) {
			break
		}
		began := time.Now()
		if _, err := eng.PublishEvent(ctx, engine.PublishEventParams{TenantID: benchTenant, EventType: engine.EventTypeEventCompleted,
			EventID: "bench-" + id, ExecutionID: id, Data: map[string]any{"event_id": "go"}}); err != nil {
			return nil, fmt.Errorf("publishing: %w", err)
		}
		for {
			x, err := eng.GetExecution(ctx, b.pool, benchTenant, id)
			if err != nil {
				return nil, err
			}
			if engine.IsTerminal(x.Status) {
				break
			}
			time.Sleep(500 * time.Microsecond)
		}
		out = append(out, time.Since(began))
	}
	return out, nil
}

// hotThread measures (d): 10 loops start executions of a three-message
// workflow on one thread for the measured window. Each execution must hold
// the thread's lock to talk; acquisition is timed from the start call to
// the moment its start transaction, which took the thread row and the lock,
// committed. Messages count when delivered.
func (b *bencher) hotThread(ctx context.Context) (perSecond float64, acquire latencies, err error) {
	eng, client, err := b.batonEngine(ctx, benchHotWorkflow)
	if err != nil {
		return 0, nil, err
	}
	defer stopClient(ctx, client)
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
				err := eng.WithTx(runCtx, func(tx pgx.Tx) error {
					_, err := eng.StartExecution(runCtx, tx, engine.StartParams{TenantID: benchTenant, WorkflowID: "bench-hot", ThreadID: "hot", Priority: 5, LaneFirst: true})
					return err
				})
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

// benchLaneLimit is the limit of lane main in the bench: above every
// concurrency it drives, so that the figures measure the engine, not the
// lane limit (main is 4 by default).
const benchLaneLimit = 10_000

// batonEngine is an engine and a started River client with the workflow
// stored.
func (b *bencher) batonEngine(ctx context.Context, workflow string) (*engine.Engine, *river.Client[pgx.Tx], error) {
	eng, err := engine.New(engine.Config{Pool: b.pool, LaneLimits: map[string]int{engine.LaneMain: benchLaneLimit}})
	if err != nil {
		return nil, nil, err
	}
	client, err := jobs.NewClient(b.pool, b.jobsConfig(eng))
	if err != nil {
		return nil, nil, err
	}
	if err := client.Start(ctx); err != nil {
		return nil, nil, fmt.Errorf("starting River: %w", err)
	}
	if _, _, err := eng.DefineWorkflow(ctx, b.pool, benchTenant, []byte(workflow)); err != nil {
		return nil, nil, fmt.Errorf("storing a bench workflow: %w", err)
	}
	return eng, client, nil
}
