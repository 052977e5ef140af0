package engine

import (
	"cmp"
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// startPlan is what a start's definition decides before the start writes
// anything: its lane, whether its first step runs in the start transaction
// (inline) and settles there, and a settling start's reservation.
type startPlan struct {
	lane            string
	inline, settles bool
	session         *string
	reserve         *dbsqlc.ExecutionReserveParams
}

// planStart plans p's start under def.
func (e *Engine) planStart(def *StoredDefinition, p *StartParams, freshThread bool) startPlan {
	// A child's lane is the trigger_agent parameter, else its definition's,
	// else subagent; an API-started run's is the payload's, else the
	// definition's, else main.
	lane := cmp.Or(p.Lane, def.Lane)
	if lane == "" {
		lane = "main"
		if p.ParentExecutionID != 0 {
			lane = "subagent"
		}
	}
	// New work is pending until its lane admits it (engine/lane.go); a
	// top-level run's first step runs in this transaction once admitted. A
	// child starts in its own step: its parent must be waiting for it
	// before it can end.
	plan := startPlan{lane: lane, inline: p.ParentExecutionID == 0 && !e.cfg.DeferFirstStep}
	if p.SessionKey != "" {
		plan.session = &p.SessionKey
	}
	// A first step that settles here — the run ends or waits before this
	// transaction commits — needs no slot while its lane has room and no
	// queue: it runs under an id ExecutionReserve takes, and its step writes
	// its row (engine/lane.go, "Runs that never hold a slot"; stepRun.unsaved).
	// Such a start does not wait for its global lane's row: it needs the row
	// only when the lane is full or has a queue, and then it is pending
	// anyway. A session start holds its session's row instead, so no other
	// run of the session starts until this one has settled.
	// A tenant's own lanes (limit 1) always go through admission.
	plan.settles = plan.inline && e.startsSlotless(def, lane)
	if plan.settles {
		plan.reserve = &dbsqlc.ExecutionReserveParams{
			Lane: lane, LaneLimit: int32(e.laneLimit(lane)), TenantID: p.TenantID, SessionKey: plan.session,
			DrawMessage: def.SendsMessages(), DrawThread: freshThread && plan.session == nil}
	}
	return plan
}

// startDefinition returns the definition p starts, its plan, and the
// reservation it took, if any. A start of a workflow's latest version
// reads which version that is (DefinitionLatestID), a round trip before
// it can plan. When this process has read that workflow's latest version
// before and the plan under it reserves first (a settling start on a fresh
// thread, outside a session), the start guesses that version is still the
// latest: it reserves at once, and the reservation reads the latest
// version's row id too (ExecutionReserve's definition_id), one round trip
// for both. When another version was stored since, the start reads it and
// plans again; the reservation stands if the plan reserves the same way,
// and is dropped otherwise (its ids are never used: sequences have gaps).
func (e *Engine) startDefinition(ctx context.Context, tx pgx.Tx, p *StartParams, freshThread bool) (*StoredDefinition, startPlan, *reservation, error) {
	var guessed *dbsqlc.ExecutionReserveParams
	var res *reservation
	if guess, ok := e.definitions.latest(p.TenantID, p.WorkflowID); ok && p.Version == "" {
		plan := e.planStart(guess, p, freshThread)
		if plan.reserve != nil && plan.reserve.DrawThread {
			guessed = plan.reserve
			asking := *guessed
			asking.WorkflowID = &p.WorkflowID
			var err error
			if res, err = e.reserveExecution(ctx, tx, &asking); err != nil {
				return nil, startPlan{}, nil, err
			}
			if res.DefinitionID == guess.ID {
				return guess, plan, res, nil
			}
		}
	}
	def, err := e.GetDefinition(ctx, tx, p.TenantID, p.WorkflowID, p.Version)
	if err != nil {
		return nil, startPlan{}, nil, err
	}
	plan := e.planStart(def, p, freshThread)
	// Both plans are of a start outside a session, so neither reservation
	// holds a pointer (SessionKey, WorkflowID) and == compares what they ask.
	if res != nil && plan.reserve != nil && *plan.reserve == *guessed {
		return def, plan, res, nil
	}
	return def, plan, nil, nil
}
