package dbospeer

import (
	"context"
	"fmt"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/batonrun/baton/bench/peers/internal/report"
	"github.com/batonrun/baton/internal/benchkit"
)

// Resume is figure 2: Waiting workflows block in Recv; one at a time,
// dbos.Send sends the message and the clock stops when the workflow's
// result is back (Recv returned, one step ran, the workflow ended): p50 and
// p99 from Send to the result, for at most the window's duration. The
// workflows left waiting are cancelled.
func (b *Bench) Resume(ctx context.Context, round int) (report.Measurement, error) {
	rt, err := b.launch(ctx, "")
	if err != nil {
		return report.Measurement{}, err
	}
	defer rt.shutdown()
	pre := prefix(round, "resume")
	handles := make([]dbos.WorkflowHandle[string], b.cfg.Waiting)
	for i := range handles {
		h, err := dbos.RunWorkflow(rt.dbos, rt.waitWorkflow, "", dbos.WithWorkflowID(fmt.Sprintf("%s%d", pre, i)))
		if err != nil {
			return report.Measurement{}, fmt.Errorf("starting a waiting workflow: %w", err)
		}
		handles[i] = h
	}
	if err := rt.awaitRecv(ctx, int64(len(handles))); err != nil {
		return report.Measurement{}, err
	}
	lat, resumed, err := rt.resumeEach(ctx, handles, b.cfg.Window.Duration)
	if err != nil {
		return report.Measurement{}, err
	}
	if err := rt.cancelRest(handles[len(resumed):]); err != nil {
		return report.Measurement{}, err
	}
	if err := rt.checkSucceeded(ctx, resumed); err != nil {
		return report.Measurement{}, err
	}
	return report.Measurement{Count: len(lat), P50: lat.Percentile(0.5), P99: lat.Percentile(0.99)}, nil
}

// awaitRecv waits until n workflows have reached Recv, and a little more
// for them to be blocked in it.
func (rt *runtime) awaitRecv(ctx context.Context, n int64) error {
	deadline := time.Now().Add(time.Minute)
	for rt.inRecv.Load() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d workflows reached Recv in a minute", rt.inRecv.Load(), n)
		}
		if err := benchkit.SleepCtx(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
	return benchkit.SleepCtx(ctx, 200*time.Millisecond)
}

// resumeEach sends each workflow its message, one at a time, until budget
// has passed (the first always goes), and times Send → result.
func (rt *runtime) resumeEach(ctx context.Context, handles []dbos.WorkflowHandle[string], budget time.Duration) (benchkit.Latencies, []string, error) {
	var lat benchkit.Latencies
	var resumed []string
	deadline := time.Now().Add(budget)
	for i, h := range handles {
		if (i > 0 && time.Now().After(deadline)) || ctx.Err() != nil {
			break
		}
		began := time.Now()
		if err := dbos.Send(rt.dbos, h.GetWorkflowID(), "go", "go"); err != nil {
			return nil, nil, fmt.Errorf("sending to %s: %w", h.GetWorkflowID(), err)
		}
		got, err := h.GetResult(dbos.WithHandleTimeout(resultTimeout))
		if err != nil {
			return nil, nil, fmt.Errorf("workflow %s: %w", h.GetWorkflowID(), err)
		}
		if got != "resumed" {
			return nil, nil, fmt.Errorf("workflow %s returned %q", h.GetWorkflowID(), got)
		}
		lat = append(lat, time.Since(began))
		resumed = append(resumed, h.GetWorkflowID())
	}
	return lat, resumed, ctx.Err()
}

// cancelRest cancels the workflows still waiting, so that no later launch
// recovers them.
func (rt *runtime) cancelRest(rest []dbos.WorkflowHandle[string]) error {
	if len(rest) == 0 {
		return nil
	}
	ids := make([]string, len(rest))
	for i, h := range rest {
		ids[i] = h.GetWorkflowID()
	}
	if err := dbos.CancelWorkflows(rt.dbos, ids); err != nil {
		return fmt.Errorf("cancelling the workflows left waiting: %w", err)
	}
	return nil
}
