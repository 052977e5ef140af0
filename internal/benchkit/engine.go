package benchkit

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/jobs"
)

// LaneLimit is the limit of lane main in the benches: above every
// concurrency they drive, so that the figures measure the engine, not the
// lane limit (main is 4 by default).
const LaneLimit = 10_000

// Baton is an engine with its River client started.
type Baton struct {
	Engine *engine.Engine
	River  *river.Client[pgx.Tx]
	// stopDelivery ends prompt delivery.
	stopDelivery func()
}

// StartBaton returns an engine on pool, lane main limited to LaneLimit, and
// a started River client with the settings of jc (its Engine is set here),
// with each workflow stored for tenant. The engine delivers promptly, as
// baton serve's does (engine.DeliverPromptly with engine.DefaultPromptSlots).
// Stop stops the River client, then prompt delivery.
func StartBaton(ctx context.Context, pool *pgxpool.Pool, jc jobs.Config, tenant string, workflows ...string) (*Baton, error) {
	eng, err := engine.New(engine.Config{Pool: pool, LaneLimits: map[string]int{engine.LaneMain: LaneLimit}})
	if err != nil {
		return nil, err
	}
	jc.Engine = eng
	client, err := jobs.NewClient(pool, jc)
	if err != nil {
		return nil, err
	}
	if err := client.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting River: %w", err)
	}
	b := &Baton{Engine: eng, River: client, stopDelivery: eng.DeliverPromptly(engine.DefaultPromptSlots)}
	for _, w := range workflows {
		if _, _, err := eng.DefineWorkflow(ctx, pool, tenant, []byte(w)); err != nil {
			b.Stop(ctx)
			return nil, fmt.Errorf("storing a bench workflow: %w", err)
		}
	}
	return b, nil
}

// Stop stops the River client, then prompt delivery (whose cut-short
// deliveries the backstop jobs would deliver).
func (b *Baton) Stop(ctx context.Context) {
	StopClient(ctx, b.River)
	b.stopDelivery()
}

// Start starts an execution in a transaction of its own.
func (b *Baton) Start(ctx context.Context, p engine.StartParams) (*engine.Execution, error) {
	var x *engine.Execution
	err := b.Engine.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		x, err = b.Engine.StartExecution(ctx, tx, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("starting an execution: %w", err)
	}
	return x, nil
}
