package engine

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// Admission of resumed runs: a run that leaves a wait is already counted
// as running, and stays so only if its lane and session have room.

// admitResumed decides, in a resume's transaction, whether an execution that
// just went waiting → running keeps running (its lane and session have
// room: the caller runs or enqueues its step) or goes to pending ahead of
// new work.
func (e *Engine) admitResumed(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution) (*dbsqlc.AgentExecution, error) {
	room, held, err := e.resumedLaneRoom(ctx, tx, row)
	if err != nil {
		return nil, err
	}
	if room && row.SessionKey != nil {
		if room, err = e.resumedSessionRoom(ctx, tx, row); err != nil {
			return nil, err
		}
	}
	if room {
		return row, nil
	}
	out, err := e.q.ExecutionRequeue(ctx, tx, row.ID)
	if err != nil {
		return nil, fmt.Errorf("re-queueing resumed execution: %w", err)
	}
	e.InfoContext(ctx, fmt.Sprintf("Execution %s resumed into a full lane %s: pending ahead of new work", row.ExecutionID, row.Lane),
		"execution_id", row.ExecutionID, "tenant_id", row.TenantID, "lane", row.Lane)
	if !held {
		// The lane is held, or shared: whoever admits next may not see
		// this one.
		owner, name := e.laneKey(row.TenantID, row.Lane)
		return out, e.insertDispatch(ctx, tx, owner, name)
	}
	return out, nil
}

// resumedLaneRoom reports whether the lane of a resumed run (already
// counted as running) has room for it: in share mode when the lane is far
// from full ("Shared admission"), else under the exclusive lock. held says
// this transaction holds the lane exclusively, so whoever admits next sees
// the run should it go pending; a share holder does not know that (a run
// that frees a slot beside it may not see the run), so a run it puts back
// to pending gets a lane.dispatch job.
func (e *Engine) resumedLaneRoom(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution) (room, held bool, err error) {
	shared, ok, err := e.shareLane(ctx, tx, row.TenantID, row.Lane, row.ID)
	if err != nil || (ok && shared.fits) {
		return ok, false, err
	}
	l, ok, err := e.lockLane(ctx, tx, row.TenantID, row.Lane, false)
	if err != nil || !ok {
		return false, false, err
	}
	room, err = e.laneRoomFor(ctx, tx, l, row.TenantID)
	return room, true, err
}

// resumedSessionRoom reports whether the session of a resumed run (already
// counted as running) has room for it.
func (e *Engine) resumedSessionRoom(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution) (bool, error) {
	sl, ok, err := e.lockLane(ctx, tx, row.TenantID, *row.SessionKey, false)
	if err != nil || !ok {
		return false, err
	}
	n, err := e.q.SessionCountRunning(ctx, tx, &dbsqlc.SessionCountRunningParams{TenantID: row.TenantID, SessionKey: *row.SessionKey})
	if err != nil {
		return false, fmt.Errorf("counting running executions of %s: %w", *row.SessionKey, err)
	}
	return int(n) <= int(sl.MaxConcurrent), nil
}

// laneRoomFor reports, for a run of the tenant that is already counted as
// running in lane l (whose row the caller holds), whether the lane and the
// tenant's share of it have room for it.
func (e *Engine) laneRoomFor(ctx context.Context, tx pgx.Tx, l *dbsqlc.Lane, tenantID string) (bool, error) {
	n, err := e.laneRunning(ctx, tx, l)
	if err != nil {
		return false, err
	}
	if int(n) > int(l.MaxConcurrent) {
		return false, nil
	}
	if l.PerTenant == 0 {
		return true, nil
	}
	mine, err := e.q.LaneTenantRunning(ctx, tx, &dbsqlc.LaneTenantRunningParams{Lane: l.Name, TenantID: tenantID})
	if err != nil {
		return false, fmt.Errorf("counting the tenant's running executions of lane %s: %w", l.Name, err)
	}
	return int(mine) <= int(l.PerTenant), nil
}
