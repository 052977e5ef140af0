package benchkit

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/engine"
)

// ResumeConfig configures Resume.
type ResumeConfig struct {
	// Tenant owns the executions; WaitWorkflow must be stored for it.
	Tenant string
	// Waiting is how many executions wait for their event.
	Waiting int
	// Budget bounds the time spent resuming: no resume starts after it
	// (the first always does).
	Budget time.Duration
}

// Resume measures the resume round trip: cfg.Waiting executions of
// WaitWorkflow wait for an event; one at a time, the event is published
// (engine.PublishEvent, what POST /events runs; accepted when its
// transaction commits) and the clock stops when the execution, polled
// every 0.5 ms, has run its next nodes to its end. It returns the latencies
// and the execution ids it resumed.
func Resume(ctx context.Context, pool *pgxpool.Pool, b *Baton, cfg ResumeConfig) (Latencies, []string, error) {
	ids := make([]string, 0, cfg.Waiting)
	for range cfg.Waiting {
		x, err := b.Start(ctx, engine.StartParams{TenantID: cfg.Tenant, WorkflowID: "bench-wait", Priority: 5, LaneFirst: true})
		if err != nil {
			return nil, nil, err
		}
		ids = append(ids, x.ExecutionID)
	}
	var out Latencies
	deadline := time.Now().Add(cfg.Budget)
	for i, id := range ids {
		if i > 0 && time.Now().After(deadline) {
			return out, ids[:i], nil
		}
		began := time.Now()
		if _, err := b.Engine.PublishEvent(ctx, engine.PublishEventParams{TenantID: cfg.Tenant, EventType: engine.EventTypeEventCompleted,
			EventID: "bench-" + id, ExecutionID: id, Data: map[string]any{"event_id": "go"}}); err != nil {
			return nil, nil, fmt.Errorf("publishing: %w", err)
		}
		if err := awaitTerminal(ctx, pool, b, cfg.Tenant, id); err != nil {
			return nil, nil, err
		}
		out = append(out, time.Since(began))
	}
	return out, ids, nil
}

// awaitTerminal polls the execution every 0.5 ms until it is terminal.
func awaitTerminal(ctx context.Context, pool *pgxpool.Pool, b *Baton, tenant, id string) error {
	for {
		x, err := b.Engine.GetExecution(ctx, pool, tenant, id)
		if err != nil {
			return err
		}
		if engine.IsTerminal(x.Status) {
			return nil
		}
		if err := SleepCtx(ctx, 500*time.Microsecond); err != nil {
			return err
		}
	}
}
