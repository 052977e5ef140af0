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
// A global lane therefore has an admission lock besides its row: a
// transaction-level advisory lock (laneLockClass, the hash of the lane's
// name). Exclusive admission takes it exclusively right after the row, so
// an exclusive holder counts only what share holders have committed. A
// transaction may instead take it in share mode (LaneTryShare, never
// waiting): share holders do not exclude each other, and a share request
// fails while an exclusive holder has the lock or waits for it, so a
// waiting exclusive holder is not starved. An advisory lock writes nothing
// to the row, so share holders cost no MultiXact and no WAL.
//
// Holding it in share mode, a transaction may make one run running when
//
//	others + inFlight <= limit
//
// where others counts the committed running runs besides its own and
// inFlight is the most transactions the cluster can run at once
// (max_connections + max_prepared_transactions). Why the limit holds: a
// share holder admits only while the committed count is at most
// limit − inFlight, and it admits one run (LaneTryShare marks the
// transaction: a second run it would resume is admitted exclusively). Take
// the last moment the committed count was at or below limit − inFlight:
// every admission that moment does not show is a share holder's already in
// flight then (later share holders see more and refuse), and there are
// fewer than inFlight of them; exclusive holders are not in flight beside
// share holders, and they count under their lock what share holders
// committed. Runs that end only lower the count. So running never exceeds
// the limit, across processes. The room is read in a statement after the
// lock is taken, so its snapshot shows every admission committed before.
// Share holders never wait for the lock, so it adds no edge to a wait-for
// graph; exclusive holders wait for it only where they may wait for the
// lane row (see "Lock order" in lane.go), holding nothing a share holder
// could wait for.
//
// Shared admission applies to global lanes without a per-tenant cap, and to
// a start only when nothing is queued, so the queue keeps its order and its
// fairness; near the limit, admission is exclusive, as before. A look
// without the lock (the same room, read first) keeps the share lock out of
// the way where it cannot help: in lanes whose limit is below inFlight,
// and, for a freed slot, when a queue is seen.
//
// A run that frees a slot needs to admit nothing when, holding the lock in
// share mode, it sees no admissible pending run: a run that goes pending
// later does so either under the exclusive lock, after this transaction
// commits, and counts the freed slot itself, or without it (the lock was
// held), and then enqueues a lane.dispatch job; a run pending already is
// seen.

// laneLockClass is the first key of a global lane's admission lock; the
// second is hashtext(name). Baton's other advisory locks use one bigint
// key, a separate key space.
const laneLockClass = 0x6c616e65 // "lane"

// sharedRoom is what a share holder of a lane's admission lock sees.
type sharedRoom struct {
	// fits says the caller's run may become running (the rule above); the
	// transaction then admits no other run this way.
	fits bool
	// queued says an admissible pending run other than the caller's waits.
	queued bool
}

// shareLane takes the admission lock of a global lane in share mode and
// reads its room, for the run self to admit, or with self 0 to learn
// whether a run is queued. ok is false when the lane is not global, has a
// per-tenant cap, has a stored limit other than this process's, the lock
// is held or wanted exclusively, or the look without the lock shows that
// share mode cannot help: the caller then goes the exclusive way.
func (e *Engine) shareLane(ctx context.Context, tx pgx.Tx, tenantID, lane string, self int64) (room sharedRoom, ok bool, err error) {
	owner, name := e.laneKey(tenantID, lane)
	if owner != "" {
		return sharedRoom{}, false, nil
	}
	limit := e.laneLimit(name)
	r, err := e.sharedRoom(ctx, tx, name, self, limit)
	if err != nil || r == nil {
		return sharedRoom{}, false, err
	}
	hopeful := !r.Queued
	if self != 0 {
		hopeful = !r.Admitted && int(r.Others)+int(r.InFlight) <= limit
	}
	if !hopeful {
		return sharedRoom{}, false, nil
	}
	locked, err := e.q.LaneTryShare(ctx, tx, &dbsqlc.LaneTryShareParams{LockClass: laneLockClass, Lane: name, Admit: self != 0})
	if err != nil || !locked {
		return sharedRoom{}, false, err
	}
	// Read again: this statement's snapshot is taken under the lock.
	if r, err = e.sharedRoom(ctx, tx, name, self, limit); err != nil || r == nil {
		return sharedRoom{}, false, err
	}
	room = sharedRoom{queued: r.Queued}
	if self != 0 {
		room.fits = int(r.Others)+int(r.InFlight) <= limit
	}
	if room.fits {
		e.sharedAdmissions.Add(1)
	}
	return room, true, nil
}

// sharedRoom reads the room of the global lane name for the run self; nil
// when the lane has no row or its stored limits are not this process's
// limit and no per-tenant cap.
func (e *Engine) sharedRoom(ctx context.Context, tx pgx.Tx, name string, self int64, limit int) (*dbsqlc.LaneSharedRoomRow, error) {
	r, err := e.q.LaneSharedRoom(ctx, tx, &dbsqlc.LaneSharedRoomParams{Lane: name, Self: self})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the room of lane %s: %w", name, err)
	}
	if int(r.MaxConcurrent) != limit || r.PerTenant != 0 || e.lanePerTenant(name) != 0 {
		return nil, nil
	}
	return r, nil
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
