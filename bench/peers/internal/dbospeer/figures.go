package dbospeer

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/bench/peers/internal/report"
	"github.com/batonrun/baton/internal/benchkit"
)

// resultTimeout bounds a client's wait for a workflow's result.
const resultTimeout = time.Minute

// prefix starts the ids of a figure's workflows in a round, so that the
// checks read exactly those.
func prefix(round int, figure string) string { return fmt.Sprintf("r%d-%s-", round, figure) }

// Workflow is one of the five-node workflows.
type Workflow string

// The five-node workflows.
const (
	// Steps is one DBOS step per node.
	Steps Workflow = wfSteps
	// Tx is one transactional step, the rest plain Go.
	Tx Workflow = wfTx
)

// fn is the registered function of w.
func (rt *runtime) fn(w Workflow) dbos.Workflow[Input, string] {
	if w == Tx {
		return rt.txWorkflow
	}
	return rt.stepsWorkflow
}

// FiveNode is figure 1: Clients each run the workflow w (dbos.RunWorkflow)
// and wait for its result (the handle's in-process outcome), closed loop;
// throughput and run call → result, by the client's clock.
func (b *Bench) FiveNode(ctx context.Context, round int, w Workflow) (report.Measurement, error) {
	rt, err := b.launch(ctx, "")
	if err != nil {
		return report.Measurement{}, err
	}
	defer rt.shutdown()
	pre := prefix(round, string(w))
	var seq atomic.Int64
	loop := benchkit.Loop{Clients: b.cfg.Clients, Window: b.cfg.Window}
	res, err := loop.Run(ctx, func(ctx context.Context, _ int) error {
		h, err := dbos.RunWorkflow(rt.dbos, rt.fn(w), benchInput(""), dbos.WithWorkflowID(fmt.Sprintf("%s%d", pre, seq.Add(1))))
		if err != nil {
			return fmt.Errorf("running a workflow: %w", err)
		}
		return checkResult(h)
	})
	if err != nil {
		return report.Measurement{}, err
	}
	if err := rt.checkRuns(ctx, pre); err != nil {
		return report.Measurement{}, err
	}
	return measurement(res), nil
}

// Keyed is figure 3: KeyedClients each enqueue the workflow w on the
// partitioned queue (concurrency 1 per partition key, QueuePoll base
// polling) with the key of the client (i mod Keys), and wait until it has
// ended — all clients' workflows polled together every 2 ms, as Baton's
// runs are (GetResult polls each workflow once a second by default) — then
// read its result. Throughput and enqueue → ended, by the client's clock.
func (b *Bench) Keyed(ctx context.Context, round int, w Workflow) (report.Measurement, error) {
	rt, err := b.launch(ctx, "peers-keys")
	if err != nil {
		return report.Measurement{}, err
	}
	defer rt.shutdown()
	pre := prefix(round, "keyed-"+string(w))
	watch := benchkit.NewWatch(endedLookup(rt))
	var seq atomic.Int64
	loop := benchkit.Loop{Clients: b.cfg.KeyedClients, Window: b.cfg.Window}
	res, err := benchkit.RunWatched(ctx, loop, watch, func(ctx context.Context, client int) error {
		id := fmt.Sprintf("%s%d", pre, seq.Add(1))
		key := partitionKey(client % b.cfg.Keys)
		h, err := dbos.RunWorkflow(rt.dbos, rt.fn(w), benchInput(key),
			dbos.WithWorkflowID(id), dbos.WithQueue(rt.queue), dbos.WithQueuePartitionKey(key))
		if err != nil {
			return fmt.Errorf("enqueueing a workflow: %w", err)
		}
		select {
		case <-watch.Wait(id):
		case <-ctx.Done():
			return ctx.Err()
		}
		return checkResult(h)
	})
	if err != nil {
		return report.Measurement{}, err
	}
	if err := rt.checkRuns(ctx, pre); err != nil {
		return report.Measurement{}, err
	}
	if n := rt.overlaps.Load(); n > 0 {
		return report.Measurement{}, fmt.Errorf("correctness: %s: %d workflows ran while another of their partition key did", pre, n)
	}
	return measurement(res), nil
}

// sqlEnded is the lookup of Keyed's watch.
const sqlEnded = `SELECT workflow_uuid FROM dbos.workflow_status
WHERE workflow_uuid = ANY($1::text[]) AND status IN ('SUCCESS', 'ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED')`

func endedLookup(rt *runtime) benchkit.Lookup[string] {
	return func(ctx context.Context, ids []string) ([]string, error) {
		rows, err := rt.pool.Query(ctx, sqlEnded, ids)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[string])
	}
}

// checkResult waits for the workflow's result and checks it.
func checkResult(h dbos.WorkflowHandle[string]) error {
	got, err := h.GetResult(dbos.WithHandleTimeout(resultTimeout))
	if err != nil {
		return fmt.Errorf("workflow %s: %w", h.GetWorkflowID(), err)
	}
	if got != summary {
		return fmt.Errorf("workflow %s returned %q, not %q", h.GetWorkflowID(), got, summary)
	}
	return nil
}

func measurement(res benchkit.LoopResult) report.Measurement {
	return report.Measurement{Count: len(res.Latencies), PerSecond: res.PerSecond(),
		P50: res.Latencies.Percentile(0.5), P99: res.Latencies.Percentile(0.99)}
}
