package batonpeer

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/bench/peers/internal/report"
	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/internal/benchkit"
)

// inboundWorkflow is the five-node workflow of the threads of the inbound
// figure. A run an inbound message starts has the message as its input
// (lastResponse), not FiveNodeInput, so its decision sends when the message
// is not empty; otherwise it is baton bench's workflow.
var inboundWorkflow = benchkit.FiveNode{ID: "bench-inbound", Name: "lastResponse", Condition: "${lastResponse} != ''"}.JSON()

// threadKey is the thread (and session) of key k.
func threadKey(k int) string { return fmt.Sprintf("k%03d", k) }

// KeyedStarts is figure 3 (ii): five-node runs started through
// engine.StartExecution on the thread of the client's key with SessionKey
// engine.SessionLane(key), so at most one run of a key is live; closed loop
// at KeyedClients, throughput and start → terminal latency.
func (b *Bench) KeyedStarts(ctx context.Context, round int) (report.Measurement, error) {
	t := tenant(round, "keyed")
	baton, err := benchkit.StartBaton(ctx, b.cfg.Pool, b.cfg.Jobs, t, benchkit.FiveNodeWorkflow)
	if err != nil {
		return report.Measurement{}, err
	}
	defer baton.Stop(ctx)
	params := func(client int) engine.StartParams {
		key := threadKey(client % b.cfg.Keys)
		return engine.StartParams{TenantID: t, WorkflowID: "bench", Input: benchkit.FiveNodeInput(), Priority: 5, LaneFirst: true,
			ThreadID: key, SessionKey: engine.SessionLane(key)}
	}
	r, err := benchkit.RunExecutions(ctx, b.cfg.Pool, baton, b.cfg.Window, b.cfg.KeyedClients, benchkit.Nodes, params)
	if err != nil {
		return report.Measurement{}, err
	}
	if err := b.checkFiveNode(ctx, t); err != nil {
		return report.Measurement{}, err
	}
	if err := checkSerial(ctx, b.cfg.Pool, t); err != nil {
		return report.Measurement{}, err
	}
	return report.Measurement{Count: int(r.Count), PerSecond: r.PerSecond, P50: r.P50, P99: r.P99}, nil
}

// Inbound is figure 3 (i): each client sends a message to its key's thread
// through engine.ReceiveInboundTx (what POST /threads/{id}/messages runs)
// and waits until the run that handled it — started by it, or, when it was
// queued behind a live run, started for it by the session's flush — is
// terminal. The threads' default workflow is inboundWorkflow and their queue
// mode followup with no debounce, so each message gets a run of its own, one
// at a time per thread. Closed loop at KeyedClients; throughput and
// message sent → its run terminal.
func (b *Bench) Inbound(ctx context.Context, round int) (report.Measurement, error) {
	t := tenant(round, "inbound")
	baton, err := benchkit.StartBaton(ctx, b.cfg.Pool, b.cfg.Jobs, t, inboundWorkflow)
	if err != nil {
		return report.Measurement{}, err
	}
	defer baton.Stop(ctx)
	threads, err := b.createThreads(ctx, baton.Engine, t)
	if err != nil {
		return report.Measurement{}, err
	}
	watch := benchkit.NewInboundWatch(b.cfg.Pool)
	loop := benchkit.Loop{Clients: b.cfg.KeyedClients, Window: b.cfg.Window}
	var seq atomic.Int64
	res, err := benchkit.RunWatched(ctx, loop, watch, func(ctx context.Context, client int) error {
		k := client % b.cfg.Keys
		msg := fmt.Sprintf("m%d", seq.Add(1))
		err := baton.Engine.WithTx(ctx, func(tx pgx.Tx) error {
			_, err := baton.Engine.ReceiveInboundTx(ctx, tx, engine.InboundParams{TenantID: t, ThreadID: threadKey(k), Text: "Ana " + msg, MessageID: msg})
			return err
		})
		if err != nil {
			return fmt.Errorf("sending a message: %w", err)
		}
		select {
		case <-watch.Wait(benchkit.InboundKey{Thread: threads[k], Message: msg}):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err != nil {
		return report.Measurement{}, err
	}
	if err := benchkit.DrainJobs(ctx, b.cfg.Pool); err != nil {
		return report.Measurement{}, err
	}
	if err := b.checkInbound(ctx, t); err != nil {
		return report.Measurement{}, err
	}
	return report.Measurement{Count: len(res.Latencies), PerSecond: res.PerSecond(), P50: res.Latencies.Percentile(0.5), P99: res.Latencies.Percentile(0.99)}, nil
}

// createThreads creates the Keys threads of the tenant, with inboundWorkflow
// as their default workflow (what PUT /threads does) and the followup queue
// mode without debounce, and returns their row ids by key.
func (b *Bench) createThreads(ctx context.Context, eng *engine.Engine, t string) ([]int64, error) {
	ids := make([]int64, b.cfg.Keys)
	noDebounce := 0
	for k := range ids {
		th, _, err := eng.UpsertThread(ctx, b.cfg.Pool, engine.ThreadUpsert{TenantID: t, ThreadID: threadKey(k), Channel: "bench", Contact: threadKey(k),
			DefaultWorkflowID: "bench-inbound", Queue: &engine.QueueSettings{Mode: "followup", DebounceMS: &noDebounce}})
		if err != nil {
			return nil, fmt.Errorf("creating thread %s: %w", threadKey(k), err)
		}
		ids[k] = th.ID
	}
	return ids, nil
}
