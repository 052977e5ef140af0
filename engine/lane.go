package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine/workflow"
)

// Built-in lanes (docs/architecture.md, "How an execution moves").
const (
	LaneMain     = "main"
	LaneSubagent = "subagent"
	LaneCron     = "cron"
	// sessionLanePrefix starts the name of a session lane,
	// "session:<thread key>", whose limit is always 1.
	sessionLanePrefix = "session:"
)

// DefaultLaneLimits are the limits of lanes the configuration does not
// name: main 4, subagent 8, cron 2; any other lane gets 1.
var DefaultLaneLimits = map[string]int{LaneMain: 4, LaneSubagent: 8, LaneCron: 2}

// dispatchRetryDelay is how soon a lane.dispatch that found the head of its
// lane held by another transaction looks again.
const dispatchRetryDelay = 50 * time.Millisecond

// queuedNotice is how long a run may wait for admission before its start
// logs "queued for Nms".
const queuedNotice = 2 * time.Second

// EventAdmitted is the event of a run admitted to its lane after it waited
// for a slot.
const EventAdmitted = "workflow.admitted"

// Lock order and why admission may run inline. Lock order: lane rows,
// global then session, before thread rows before execution rows.
//
// Transactions that start with no row locks — the inbound router, the
// lane.dispatch job, the sweep — take lane rows with LaneLock, waiting, in
// that order. Transactions that free a slot — finalize, entering a wait —
// and resumes and StartExecution may already hold a thread row and an
// execution row (RunStep, CancelTx, HandleWaitTimeout, a parent's step
// starting a child). They never WAIT for a lane row: they take it with
// FOR UPDATE SKIP LOCKED (LaneTryLock). A transaction that does not wait
// adds no edge to a wait-for graph, so it cannot close a deadlock cycle,
// whatever it holds; and admission itself takes the pending execution rows
// with SKIP LOCKED too, so a lane holder never waits for an execution row
// either. When the try fails, another transaction holds the lane right now
// and may already have counted the slot as taken; the freer then enqueues a
// lane.dispatch job, which takes the lane row in order, waiting, and admits.
// That keeps the common, uncontended path free of a job hop while no
// wake-up is lost under contention. The dispatch flag on the lane row can
// only be set by a holder of the row, so the fallback's job is inserted
// without it; the flag dedupes the wake-ups of in-order paths and the sweep.
//
// The running count is computed under the lane row lock. Every transition
// into running (admission, a resume) holds the lane row (and the session
// row) of the execution, so increments are serialized and visible to the
// next holder; transitions out of running may commit without it, which can
// only make a count too high, never too low. Hence running never exceeds a
// limit, across any number of processes. A lane far from its limit is
// entered in share mode instead, without serialising (lane_shared.go,
// "Shared admission"), under a rule that keeps the same bound.

// Runs that never hold a slot.
//
// A lane's limit bounds the executions that are running between
// transactions: waiting for a step job, calling a tool. A top-level start
// whose first step settles — on every path from the start node the run ends
// or waits within MaxNodesPerStep nodes, with no task and no trigger_agent
// on the way (Definition.FirstStepSettles) — is inserted running and run to its end or
// wait in the start transaction, without taking its lane row, when the lane
// has fewer running runs than its limit and no admissible pending run
// (ExecutionReserve reads that without a lock). Its row is written once, by
// its step, in the state the step leaves it in (stepRun.unsaved). No other
// transaction can see it running, so the committed running count never includes it, and it frees
// no slot when it ends or waits (finish.freed, startWait's freed). Without
// this, every such start would hold the lane row for its whole transaction:
// the lane row would serialize them all. When the lane is full or has a
// queue the start is admitted the usual way, behind the queue. A resumed
// run whose next nodes settle goes on the same way in the transaction that
// resumes it (resumeNow, stepRun.goSlotless): ExecutionResume reads its lane's
// room as ExecutionReserve does. Session-lane runs (inbound messages) go
// through admission or hold their session's row: their session's limit of
// 1 is what keeps two agents from answering one conversation.

// laneLimit is the limit of a lane by configuration: a tenant's own lanes
// and session lanes get 1.
func (e *Engine) laneLimit(name string) int {
	if !e.isGlobalLane(name) {
		return 1
	}
	if n, ok := e.cfg.LaneLimits[name]; ok && n > 0 {
		return n
	}
	return DefaultLaneLimits[name]
}

// lanePerTenant is how many slots of a global lane one tenant may hold; 0
// is no cap of its own.
func (e *Engine) lanePerTenant(name string) int {
	if !e.isGlobalLane(name) {
		return 0
	}
	return e.cfg.LanePerTenant[name]
}

// isGlobalLane reports whether the operator configured the lane (or it is
// built in): such a lane is shared by all tenants.
func (e *Engine) isGlobalLane(name string) bool {
	if strings.HasPrefix(name, sessionLanePrefix) {
		return false
	}
	if _, ok := e.cfg.LaneLimits[name]; ok {
		return true
	}
	_, ok := DefaultLaneLimits[name]
	return ok
}

// SessionLane is the name of the session lane of a thread key.
func SessionLane(threadKey string) string { return sessionLanePrefix + threadKey }

// laneKey is the (owner, name) of a lane row: global lanes are shared by
// all tenants (owner ”), the others belong to the tenant.
func (e *Engine) laneKey(tenantID, name string) (string, string) {
	if e.isGlobalLane(name) {
		return "", name
	}
	return tenantID, name
}

// ensureLane creates the lane row on first use, with its configured limit,
// in db (the caller's transaction). The default lanes' rows come with the
// migration and session lanes are created by the inbound router before it
// holds any other row, so an insert here rarely races: ON CONFLICT DO
// NOTHING waits only for another transaction inserting the same new lane
// (a first use of a custom lane), and should that close a cycle PostgreSQL
// reports a deadlock and the job or request is retried. Each process
// remembers the rows it has seen (knownLanes, the most recently used ones).
//
// A tenant's own lane is created only while the tenant owns fewer than
// limits.lanesPerTenant of them; past that, the run gets a *LimitError.
func (e *Engine) ensureLane(ctx context.Context, db dbsqlc.DBTX, tenantID, name string) error {
	owner, key := e.laneKey(tenantID, name)
	if e.lanesKnown.has(owner, key) {
		return nil
	}
	if owner == "" || strings.HasPrefix(key, sessionLanePrefix) {
		if err := e.q.LaneEnsure(ctx, db, &dbsqlc.LaneEnsureParams{TenantID: owner, Name: key,
			MaxConcurrent: int32(e.laneLimit(key)), PerTenant: int32(e.lanePerTenant(key))}); err != nil {
			return fmt.Errorf("creating lane %s: %w", name, err)
		}
		return nil
	}
	max := e.cfg.Limits.LanesPerTenant
	exists, err := e.q.LaneEnsureOwned(ctx, db, &dbsqlc.LaneEnsureOwnedParams{TenantID: owner, Name: key,
		MaxConcurrent: int32(e.laneLimit(key)), MaxLanes: int32(max)})
	if err != nil {
		return fmt.Errorf("creating lane %s: %w", name, err)
	}
	if !exists {
		return &workflow.LimitError{Field: "lane " + key, Limit: "limits.lanesPerTenant", Max: int64(max), Got: int64(max + 1)}
	}
	return nil
}

// lockLane takes a lane row. With wait, it waits for it (in-order paths
// only); without, it reports false when another transaction holds it. A
// global lane whose stored limit differs from this process's configuration
// gets the configured one, under the lock.
//
// A missing row is created (ensureLane), which this process then remembers.
// Should that memory be wrong — the row was created by a transaction of this
// process that rolled back — a waiting lock finds no row even after
// ensureLane: it forgets the lane, creates the row for real and tries again.
// A try-lock cannot tell a missing row from a held one and reports false,
// whose callers fall back to a lane.dispatch job, which waits and so
// repairs it.
func (e *Engine) lockLane(ctx context.Context, tx pgx.Tx, tenantID, name string, wait bool) (*dbsqlc.Lane, bool, error) {
	tenant, key := e.laneKey(tenantID, name)
	for attempt := 0; attempt < 3; attempt++ {
		var l *dbsqlc.Lane
		var err error
		if wait {
			l, err = e.q.LaneLock(ctx, tx, &dbsqlc.LaneLockParams{TenantID: tenant, Name: key})
		} else {
			l, err = e.q.LaneTryLock(ctx, tx, &dbsqlc.LaneTryLockParams{TenantID: tenant, Name: key})
		}
		if err == nil {
			e.lanesKnown.remember(tenant, key)
			if held, err := e.lockAdmission(ctx, tx, tenant, key, wait); err != nil || !held {
				return nil, false, err
			}
			return l, true, e.storeLimits(ctx, tx, l)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, false, fmt.Errorf("locking lane %s: %w", name, err)
		}
		switch {
		case attempt == 0:
			// The row may not exist yet (or, without wait, is held).
		case wait && attempt == 1:
			// Waiting found no row although this process had seen it.
			e.lanesKnown.forget(tenant, key)
		default:
			if wait {
				return nil, false, fmt.Errorf("locking lane %s: the row cannot be created", name)
			}
			return nil, false, nil
		}
		if err := e.ensureLane(ctx, tx, tenantID, name); err != nil {
			return nil, false, err
		}
	}
	return nil, false, nil
}

// storeLimits gives a lane whose row the caller holds the limits of this
// process's configuration, when its stored ones differ.
func (e *Engine) storeLimits(ctx context.Context, tx pgx.Tx, l *dbsqlc.Lane) error {
	limit, perTenant := int32(e.laneLimit(l.Name)), int32(e.lanePerTenant(l.Name))
	if l.MaxConcurrent == limit && l.PerTenant == perTenant {
		return nil
	}
	if err := e.q.LaneSetLimit(ctx, tx, &dbsqlc.LaneSetLimitParams{TenantID: l.TenantID, Name: l.Name, MaxConcurrent: limit, PerTenant: perTenant}); err != nil {
		return fmt.Errorf("storing limit of lane %s: %w", l.Name, err)
	}
	l.MaxConcurrent, l.PerTenant = limit, perTenant
	return nil
}

// lockLaneToDispatch takes a lane for its lane.dispatch job: the row only
// if no other transaction holds it (false then: the holder admits what it
// sees, and the job looks again shortly rather than keep a River worker in
// the queue for the row), then the admission lock, waiting for its share
// holders. A missing row is created, waiting, as lockLane does.
func (e *Engine) lockLaneToDispatch(ctx context.Context, tx pgx.Tx, owner, lane string) (*dbsqlc.Lane, bool, error) {
	l, err := e.q.LaneTryLock(ctx, tx, &dbsqlc.LaneTryLockParams{TenantID: owner, Name: lane})
	if errors.Is(err, pgx.ErrNoRows) {
		exists, err := e.q.LaneExists(ctx, tx, &dbsqlc.LaneExistsParams{TenantID: owner, Name: lane})
		if err != nil || exists {
			return nil, false, err
		}
		return e.lockLane(ctx, tx, owner, lane, true)
	}
	if err != nil {
		return nil, false, fmt.Errorf("locking lane %s: %w", lane, err)
	}
	if _, err := e.lockAdmission(ctx, tx, owner, lane, true); err != nil {
		return nil, false, err
	}
	return l, true, e.storeLimits(ctx, tx, l)
}

// lockAdmission takes, after the row of the lane (owner, name), a global
// lane's admission lock exclusively ("Shared admission" in
// lane_shared.go): with wait, waiting for its share holders; without,
// reporting false when any holds it.
func (e *Engine) lockAdmission(ctx context.Context, tx pgx.Tx, owner, name string, wait bool) (bool, error) {
	if owner != "" {
		return true, nil
	}
	if wait {
		if err := e.q.LaneLockExclusive(ctx, tx, &dbsqlc.LaneLockExclusiveParams{LockClass: laneLockClass, Lane: name}); err != nil {
			return false, fmt.Errorf("locking admission to lane %s: %w", name, err)
		}
		return true, nil
	}
	held, err := e.q.LaneTryExclusive(ctx, tx, &dbsqlc.LaneTryExclusiveParams{LockClass: laneLockClass, Lane: name})
	if err != nil {
		return false, fmt.Errorf("locking admission to lane %s: %w", name, err)
	}
	return held, nil
}

// admission is the result of one admission round of a lane.
type admission struct {
	admitted []*dbsqlc.AgentExecution
	// retry says a candidate was skipped because its session row was held:
	// a lane.dispatch must look again.
	retry bool
}

// admitLocked admits pending executions of a lane whose row the caller
// holds while the lane has room, fairly across tenants (see "Fair
// admission"), each tenant's oldest first (resumed ones ahead), and each
// candidate's session free. waitSession says the caller took its locks in
// order and may wait for session rows. The execution whose id is inline,
// if admitted, gets no step job: its caller runs its first step in this
// transaction.
func (e *Engine) admitLocked(ctx context.Context, tx pgx.Tx, l *dbsqlc.Lane, waitSession bool, inline int64) (admission, error) {
	var out admission
	running, err := e.laneRunning(ctx, tx, l)
	if err != nil {
		return out, err
	}
	free := int(l.MaxConcurrent) - int(running)
	if free <= 0 {
		return out, nil
	}
	cands, err := e.q.LaneFairCandidates(ctx, tx, &dbsqlc.LaneFairCandidatesParams{
		Lane: l.Name, Owner: l.TenantID, PerTenant: int32(free), MaxTenants: maxFairTenants})
	if err != nil {
		return out, fmt.Errorf("reading pending executions of lane %s: %w", l.Name, err)
	}
	queues := tenantQueues(cands)
	busy := map[string]bool{}
	for free > 0 {
		q := nextFair(queues, int(l.PerTenant))
		if q == nil {
			break
		}
		c := q.heads[0]
		q.heads = q.heads[1:]
		if !c.Locked {
			// Another transaction holds this run: admitting this tenant's
			// later ones would jump its queue (FIFO). A later round, or the
			// dispatch job that retry asks for, takes it.
			out.retry = true
			q.heads = nil
			continue
		}
		if c.SessionKey != nil {
			key := c.TenantID + "\x00" + *c.SessionKey
			if busy[key] {
				continue
			}
			ok, err := e.sessionHasRoom(ctx, tx, c.TenantID, *c.SessionKey, waitSession)
			if err != nil {
				return out, err
			}
			busy[key] = true // one admission per session and round
			if !ok.locked {
				out.retry = true
			}
			if !ok.locked || !ok.room {
				continue
			}
		}
		row, err := e.q.ExecutionAdmit(ctx, tx, c.ID)
		if err != nil {
			return out, fmt.Errorf("admitting execution %s: %w", deref(c.ExecutionID), err)
		}
		if err := e.enqueueStatus(ctx, tx, row); err != nil {
			return out, err
		}
		if row.ID != inline {
			if err := e.startAdmitted(ctx, tx, row, c.QueuedAt); err != nil {
				return out, err
			}
		}
		out.admitted = append(out.admitted, row)
		q.running++
		free--
	}
	return out, nil
}

type sessionRoom struct{ locked, room bool }

// sessionHasRoom takes a session lane row and reports whether no run of the
// session is running.
func (e *Engine) sessionHasRoom(ctx context.Context, tx pgx.Tx, tenantID, session string, wait bool) (sessionRoom, error) {
	sl, ok, err := e.lockLane(ctx, tx, tenantID, session, wait)
	if err != nil || !ok {
		return sessionRoom{}, err
	}
	n, err := e.q.SessionCountRunning(ctx, tx, &dbsqlc.SessionCountRunningParams{TenantID: tenantID, SessionKey: session})
	if err != nil {
		return sessionRoom{}, fmt.Errorf("counting running executions of %s: %w", session, err)
	}
	return sessionRoom{locked: true, room: int(n) < int(sl.MaxConcurrent)}, nil
}

// startAdmitted enqueues the first step of an execution that just became
// running and logs how long it waited.
func (e *Engine) startAdmitted(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution, queuedAt *time.Time) error {
	if err := e.jobs.InsertStep(ctx, tx, row.ID, row.StepSeq, riverPriority(int(row.Priority))); err != nil {
		return fmt.Errorf("enqueueing step of admitted execution: %w", err)
	}
	if queuedAt == nil {
		return nil
	}
	waited := time.Since(*queuedAt)
	if waited <= queuedNotice {
		return nil
	}
	msg := fmt.Sprintf("Execution %s queued for %dms in lane %s", row.ExecutionID, waited.Milliseconds(), row.Lane)
	e.InfoContext(ctx, msg, "execution_id", row.ExecutionID, "tenant_id", row.TenantID, "lane", row.Lane,
		"queued_ms", waited.Milliseconds(), "correlation_id", row.CorrelationID)
	events := &eventLog{tenantID: row.TenantID, executionID: row.ID}
	events.add(EventAdmitted, "info", "", msg, map[string]any{"lane": row.Lane, "queued_ms": waited.Milliseconds()})
	return events.write(ctx, e.q, tx)
}

// admitSoon runs admission for a lane from a transaction that may hold
// thread and execution rows: inline when the lane row is free, else through
// a lane.dispatch job (see the lock-order note above). It returns what it
// admitted inline.
func (e *Engine) admitSoon(ctx context.Context, tx pgx.Tx, tenantID, lane string, inline int64) ([]*dbsqlc.AgentExecution, error) {
	owner, name := e.laneKey(tenantID, lane)
	l, ok, err := e.lockLane(ctx, tx, owner, name, false)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, e.insertDispatch(ctx, tx, owner, name)
	}
	res, err := e.admitLocked(ctx, tx, l, false, inline)
	if err != nil {
		return nil, err
	}
	if res.retry {
		return res.admitted, e.insertDispatch(ctx, tx, owner, name)
	}
	return res.admitted, nil
}

// insertDispatch enqueues a lane.dispatch job for the lane row (owner,
// lane).
func (e *Engine) insertDispatch(ctx context.Context, tx pgx.Tx, owner, lane string) error {
	if err := e.jobs.InsertLaneDispatch(ctx, tx, owner, lane); err != nil {
		return fmt.Errorf("enqueueing lane.dispatch for %s: %w", lane, err)
	}
	return nil
}

// armDispatch enqueues a lane.dispatch job unless one is pending; the
// caller holds the lane row.
func (e *Engine) armDispatch(ctx context.Context, tx pgx.Tx, owner, lane string) error {
	_, err := e.q.LaneArmDispatch(ctx, tx, &dbsqlc.LaneArmDispatchParams{Owner: owner, Name: lane})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("arming lane.dispatch: %w", err)
	}
	return e.insertDispatch(ctx, tx, owner, lane)
}

// DispatchLane is the lane.dispatch job of the lane row (owner, lane): it
// takes the row, admits what fits, clears the dispatch flag and completes
// the job, all in one transaction. When another transaction holds the row,
// the job completes with a new one due shortly.
func (e *Engine) DispatchLane(ctx context.Context, owner, lane string, complete CompleteFunc) error {
	return e.WithTx(ctx, func(tx pgx.Tx) error {
		l, ok, err := e.lockLaneToDispatch(ctx, tx, owner, lane)
		if err != nil {
			return err
		}
		if !ok {
			if err := e.jobs.InsertLaneDispatchAt(ctx, tx, owner, lane, time.Now().Add(dispatchRetryDelay)); err != nil {
				return fmt.Errorf("re-enqueueing lane.dispatch: %w", err)
			}
			return complete(ctx, tx)
		}
		// The lane's other due dispatches ask for this admission: drop
		// them before it reads, so that it sees all their enqueuers
		// committed, rather than run them one by one after it.
		if err := e.jobs.DropLaneDispatches(ctx, tx, l.TenantID, l.Name); err != nil {
			return err
		}
		res, err := e.admitLocked(ctx, tx, l, true, 0)
		if err != nil {
			return err
		}
		if err := e.q.LaneDisarmDispatch(ctx, tx, &dbsqlc.LaneDisarmDispatchParams{Owner: l.TenantID, Name: l.Name}); err != nil {
			return fmt.Errorf("disarming lane.dispatch: %w", err)
		}
		if res.retry {
			// The head of the lane was held by another transaction: look
			// again shortly.
			if err := e.jobs.InsertLaneDispatchAt(ctx, tx, l.TenantID, l.Name, time.Now().Add(dispatchRetryDelay)); err != nil {
				return fmt.Errorf("re-enqueueing lane.dispatch: %w", err)
			}
		}
		return complete(ctx, tx)
	})
}

// SweepLanes arms a dispatch for every lane that has had a free slot and
// eligible pending work for over a second, or whose dispatch job seems
// lost, and re-arms the flushes of idle sessions with queued inbound
// messages. It is the periodic safety net; the inline paths do the work.
func (e *Engine) SweepLanes(ctx context.Context) error {
	lanes, err := e.q.LaneListNeedingDispatch(ctx, e.pool, &dbsqlc.LaneListNeedingDispatchParams{IdleSeconds: 1, RearmAfterSeconds: 60})
	if err != nil {
		return fmt.Errorf("listing lanes to dispatch: %w", err)
	}
	for _, l := range lanes {
		err := e.WithTx(ctx, func(tx pgx.Tx) error {
			if _, _, err := e.lockLane(ctx, tx, l.Owner, l.Name, true); err != nil {
				return err
			}
			if err := e.q.LaneDisarmDispatch(ctx, tx, &dbsqlc.LaneDisarmDispatchParams{Owner: l.Owner, Name: l.Name}); err != nil {
				return err
			}
			return e.armDispatch(ctx, tx, l.Owner, l.Name)
		})
		if err != nil {
			return fmt.Errorf("arming dispatch of lane %s: %w", l.Name, err)
		}
	}
	return e.sweepSessions(ctx)
}

// enterLane puts a new pending execution through admission (StartExecution):
// it is admitted at once when its lane has room and it is the oldest
// eligible, and stays pending otherwise. It returns the row as it stands.
// With inline, an admitted execution gets no step job: the caller runs its
// first step in tx.
func (e *Engine) enterLane(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution, inline bool) (*dbsqlc.AgentExecution, error) {
	if row.SessionKey == nil {
		room, ok, err := e.shareLane(ctx, tx, row.TenantID, row.Lane, row.ID)
		if err != nil {
			return nil, err
		}
		if ok && room.fits && !room.queued {
			return e.admitShared(ctx, tx, row, inline)
		}
	}
	var inlineID int64
	if inline {
		inlineID = row.ID
	}
	admitted, err := e.admitSoon(ctx, tx, row.TenantID, row.Lane, inlineID)
	if err != nil {
		return nil, err
	}
	for _, a := range admitted {
		if a.ID == row.ID {
			return a, nil
		}
	}
	return row, nil // still pending
}

// slotFreed runs in the transaction of every transition out of running
// (finalize, entering a wait) of a run that held a slot: its lane admits
// the next runs.
// When nothing is queued there is nothing to admit ("Shared admission";
// shareLane looks without the lock first and goes this way only when no
// queue shows).
func (e *Engine) slotFreed(ctx context.Context, tx pgx.Tx, row *dbsqlc.AgentExecution) error {
	shared, ok, err := e.shareLane(ctx, tx, row.TenantID, row.Lane, 0)
	if err != nil || (ok && !shared.queued) {
		return err
	}
	_, err = e.admitSoon(ctx, tx, row.TenantID, row.Lane, 0)
	return err
}

func (e *Engine) configuredLanes() map[string]int {
	out := map[string]int{}
	for k := range DefaultLaneLimits {
		out[k] = e.laneLimit(k)
	}
	for k := range e.cfg.LaneLimits {
		out[k] = e.laneLimit(k)
	}
	return out
}
