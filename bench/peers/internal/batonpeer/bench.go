package batonpeer

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/bench/peers/internal/report"
	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/benchkit"
	"github.com/batonrun/baton/jobs"
)

// Config configures the Baton figures.
type Config struct {
	// Pool is on a database Baton's migrations have run on.
	Pool *pgxpool.Pool
	// Jobs are the River settings (Baton's defaults when zero).
	Jobs   jobs.Config
	Window benchkit.Window
	// Clients drive the five-node figure (16).
	Clients int
	// Keys are the conversations of the one-run-at-a-time figure (40), and
	// KeyedClients its clients (80), client i on key i mod Keys.
	Keys, KeyedClients int
	// Chains are the River floor's (16).
	Chains int
	// Waiting is how many executions wait in the resume figure (200).
	Waiting int
}

// Bench runs the Baton figures.
type Bench struct {
	cfg Config
}

// New returns a bench on cfg.
func New(cfg Config) *Bench { return &Bench{cfg: cfg} }

// tenant is the tenant of a figure in a round: each has its own, so that the
// checks read exactly that figure's runs.
func tenant(round int, figure string) string { return fmt.Sprintf("r%d-%s", round, figure) }

// FiveNode is figure 1: the five-node workflow started through
// engine.StartExecution (LaneFirst), closed loop at Clients, as baton bench's
// (b); throughput and start → terminal latency by the client's clock.
func (b *Bench) FiveNode(ctx context.Context, round int) (report.Measurement, error) {
	t := tenant(round, "five")
	baton, err := benchkit.StartBaton(ctx, b.cfg.Pool, b.cfg.Jobs, t, benchkit.FiveNodeWorkflow)
	if err != nil {
		return report.Measurement{}, err
	}
	defer baton.Stop(ctx)
	params := func(int) engine.StartParams {
		return engine.StartParams{TenantID: t, WorkflowID: "bench", Input: benchkit.FiveNodeInput(), Priority: 5, LaneFirst: true}
	}
	r, err := benchkit.RunExecutions(ctx, b.cfg.Pool, baton, b.cfg.Window, b.cfg.Clients, benchkit.Nodes, params)
	if err != nil {
		return report.Measurement{}, err
	}
	if err := b.checkFiveNode(ctx, t); err != nil {
		return report.Measurement{}, err
	}
	return report.Measurement{Count: int(r.Count), PerSecond: r.PerSecond, P50: r.P50, P99: r.P99}, nil
}

// Resume is figure 2: baton bench's (c), event published → the run's next
// nodes done, one at a time, for at most the window's duration.
func (b *Bench) Resume(ctx context.Context, round int) (report.Measurement, error) {
	t := tenant(round, "resume")
	baton, err := benchkit.StartBaton(ctx, b.cfg.Pool, b.cfg.Jobs, t, benchkit.WaitWorkflow)
	if err != nil {
		return report.Measurement{}, err
	}
	defer baton.Stop(ctx)
	lat, resumed, err := benchkit.Resume(ctx, b.cfg.Pool, baton, benchkit.ResumeConfig{Tenant: t, Waiting: b.cfg.Waiting, Budget: b.cfg.Window.Duration})
	if err != nil {
		return report.Measurement{}, err
	}
	if err := checkCompleted(ctx, b.cfg.Pool, t, resumed, benchkit.WaitNodes); err != nil {
		return report.Measurement{}, err
	}
	if err := b.cancelWaiting(ctx, baton.Engine, t); err != nil {
		return report.Measurement{}, err
	}
	return report.Measurement{Count: len(lat), P50: lat.Percentile(0.5), P99: lat.Percentile(0.99)}, nil
}

// Floor is figure 4: bare River chained jobs, as baton bench's (a).
func (b *Bench) Floor(ctx context.Context, _ int) (report.Measurement, error) {
	r, err := benchkit.RiverFloor(ctx, b.cfg.Pool, benchkit.FloorConfig{Window: b.cfg.Window, Chains: b.cfg.Chains, Jobs: b.cfg.Jobs})
	if err != nil {
		return report.Measurement{}, err
	}
	return report.Measurement{Count: int(r.Count), PerSecond: r.PerSecond}, nil
}

// sqlWaiting lists the tenant's executions still waiting.
const sqlWaiting = `SELECT execution_id FROM agent_execution WHERE tenant_id = $1 AND status = 'waiting'`

// cancelWaiting cancels the executions the resume figure left waiting, as
// the DBOS figure cancels its workflows left in Recv.
func (b *Bench) cancelWaiting(ctx context.Context, eng *engine.Engine, t string) error {
	rows, err := b.cfg.Pool.Query(ctx, sqlWaiting, t)
	if err != nil {
		return fmt.Errorf("listing waiting executions: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("listing waiting executions: %w", err)
	}
	for _, id := range ids {
		if _, err := eng.Cancel(ctx, t, id, "bench", "left waiting by the resume figure"); err != nil {
			return fmt.Errorf("cancelling %s: %w", id, err)
		}
	}
	return nil
}
