package dbospeer

import (
	"context"
	"fmt"
	"time"

	"github.com/batonrun/baton/internal/benchkit"
)

// The checks read a figure's workflows, by id prefix, from DBOS's tables
// and bench_outbound.
const (
	// sqlLive counts the workflows not ended yet.
	sqlLive = `SELECT count(*) FROM dbos.workflow_status
WHERE starts_with(workflow_uuid, $1) AND status IN ('PENDING', 'ENQUEUED', 'DELAYED')`
	// sqlRuns counts the workflows.
	sqlRuns = `SELECT count(*) FROM dbos.workflow_status WHERE starts_with(workflow_uuid, $1)`
	// sqlFailed counts the workflows that did not succeed.
	sqlFailed = `SELECT count(*) FROM dbos.workflow_status WHERE starts_with(workflow_uuid, $1) AND status <> 'SUCCESS'`
	// sqlRowless counts the workflows without their outbound row, and the
	// rows without a workflow that succeeded.
	sqlRowless = `SELECT (SELECT count(*) FROM dbos.workflow_status w WHERE starts_with(w.workflow_uuid, $1)
    AND NOT EXISTS (SELECT 1 FROM bench_outbound o WHERE o.workflow_id = w.workflow_uuid))
 + (SELECT count(*) FROM bench_outbound o WHERE starts_with(o.workflow_id, $1)
    AND NOT EXISTS (SELECT 1 FROM dbos.workflow_status w WHERE w.workflow_uuid = o.workflow_id AND w.status = 'SUCCESS'))`
	// sqlSucceeded counts the workflows of ids that succeeded.
	sqlSucceeded = `SELECT count(*) FROM dbos.workflow_status WHERE workflow_uuid = ANY($1::text[]) AND status = 'SUCCESS'`
)

// count runs a counting query.
func (rt *runtime) count(ctx context.Context, sql string, args ...any) (int64, error) {
	var n int64
	if err := rt.pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("checking: %w", err)
	}
	return n, nil
}

// checkRuns waits for the figure's workflows still running after its window
// to end, then checks that there were some, that every one succeeded and
// wrote its outbound row, and that no row lacks its workflow.
func (rt *runtime) checkRuns(ctx context.Context, pre string) error {
	if err := rt.drain(ctx, pre); err != nil {
		return err
	}
	n, err := rt.count(ctx, sqlRuns, pre)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("correctness: %s: no workflow ran", pre)
	}
	if n, err = rt.count(ctx, sqlFailed, pre); err != nil || n > 0 {
		return failure(err, "%s: %d workflows did not succeed", pre, n)
	}
	if n, err = rt.count(ctx, sqlRowless, pre); err != nil || n > 0 {
		return failure(err, "%s: %d workflows without their outbound row, or rows without their workflow", pre, n)
	}
	return nil
}

// checkSucceeded checks that every workflow of ids succeeded.
func (rt *runtime) checkSucceeded(ctx context.Context, ids []string) error {
	n, err := rt.count(ctx, sqlSucceeded, ids)
	if err != nil || n != int64(len(ids)) {
		return failure(err, "%d of %d resumed workflows succeeded", n, len(ids))
	}
	return nil
}

// failure is err, or the correctness failure the format describes.
func failure(err error, format string, a ...any) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("correctness: "+format, a...)
}

// drain waits, for at most a minute, until none of the figure's workflows
// is pending, enqueued or delayed.
func (rt *runtime) drain(ctx context.Context, pre string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := rt.count(ctx, sqlLive, pre)
		if err != nil || n == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d workflows still running a minute after the figure", pre, n)
		}
		if err := benchkit.SleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}
