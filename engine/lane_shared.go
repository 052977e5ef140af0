package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// Shared admission.
//
// Exclusive admission (LaneLock, LaneTryLock) serialises every transition
// into running of a lane on its row, and a run that frees a slot takes the
// row too. A global lane whose limit is far above what runs in it — main
// with a limit in the thousands — then becomes one row that every resume
// and every end queue on, although no decision is ever close.
//
// A transaction may instead take the lane row in share mode (LaneShareLock,
// FOR SHARE SKIP LOCKED): share holders do not exclude each other, and they
// exclude exclusive holders both ways. Holding it, a transaction may make
// one run running when
//
//	others + inFlight <= limit
//
// where others counts the committed running runs besides its own and
// inFlight is the most transactions the cluster can run at once
// (max_connections + max_prepared_transactions). Why the limit holds: a
// share holder admits only while the committed count is at most
// limit − inFlight, and it admits one run (LaneSharedRoom marks the
// transaction: a second run it would resume admits exclusively). Take the last moment the
// committed count was at or below limit − inFlight: every admission that
// moment does not show is a share holder's already in flight then (later
// share holders see more and refuse), and there are fewer than inFlight of
// them; exclusive holders are not in flight beside share holders, and they
// count under their lock what share holders committed. Runs that end only
// lower the count. So running never exceeds the limit, across processes,
// and share holders never wait: the lock is a SKIP LOCKED, so it adds no
// edge to a wait-for graph (see "Lock order" in lane.go).
//
// Shared admission applies to global lanes without a per-tenant cap, and to
// a start only when nothing is queued, so the queue keeps its order and its
// fairness; near the limit, admission is exclusive, as before.
//
// A run that frees a slot needs to admit nothing when, holding the row in
// share mode, it sees no admissible pending run: a run that goes pending
// later does so under the exclusive lock, after this transaction commits,
// and counts the freed slot itself, or, when the row is held, it enqueues a
// lane.dispatch job; a run pending already is seen.

// sharedRoom is what a share holder of a lane row sees.
type sharedRoom struct {
	// fits says the caller's run may become running (the rule above); the
	// transaction then admits no other run this way.
	fits bool
	// queued says an admissible pending run other than the caller's waits.
	queued bool
}

// shareLane takes the row of a global lane in share mode and reads its
// room, for the run self (0 for none: the caller only asks whether a run
// is queued). ok is false when the lane is not global, has a per-tenant
// cap, its row is held exclusively (or missing), or its stored limit is not
// this process's: the caller then admits exclusively.
func (e *Engine) shareLane(ctx context.Context, tx pgx.Tx, tenantID, lane string, self int64) (room sharedRoom, ok bool, err error) {
	owner, name := e.laneKey(tenantID, lane)
	if owner != "" {
		return sharedRoom{}, false, nil
	}
	l, err := e.q.LaneShareLock(ctx, tx, &dbsqlc.LaneShareLockParams{TenantID: owner, Name: name})
	if errors.Is(err, pgx.ErrNoRows) {
		return sharedRoom{}, false, nil
	}
	if err != nil {
		return sharedRoom{}, false, fmt.Errorf("locking lane %s in share mode: %w", name, err)
	}
	limit := e.laneLimit(name)
	if int(l.MaxConcurrent) != limit || l.PerTenant != 0 || e.lanePerTenant(name) != 0 {
		return sharedRoom{}, false, nil
	}
	r, err := e.q.LaneSharedRoom(ctx, tx, &dbsqlc.LaneSharedRoomParams{Lane: name, Self: self, LaneLimit: int32(limit)})
	if err != nil {
		return sharedRoom{}, false, fmt.Errorf("reading the room of lane %s: %w", name, err)
	}
	return sharedRoom{fits: r.Fits, queued: r.Queued}, true, nil
}

// admitShared admits a new pending run under a share lock (enterLane): it
// becomes running, and gets its first step job unless inline.
func (e *Engine) admitShared(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution, inline bool) (*dbsqlc.AgentExecution, error) {
	out, err := e.q.ExecutionAdmit(ctx, tx, row.ID)
	if err != nil {
		return nil, fmt.Errorf("admitting execution %s: %w", row.ExecutionID, err)
	}
	if err := e.enqueueStatus(ctx, tx, out); err != nil {
		return nil, err
	}
	if inline {
		return out, nil
	}
	return out, e.startAdmitted(ctx, tx, out, nil)
}
