package engine

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// Fair admission (docs/architecture.md, "Running many tenants").
//
// A lane the operator configures (lanes.*, agents.defaults.maxConcurrent,
// or a built-in one) is global: one row (tenant ''), shared by every
// tenant. Any other lane name belongs to the tenant that uses it: its row
// is (tenant, name), limit 1, counted over that tenant's executions only,
// so B's "x" is not A's "x"; a tenant may own at most limits.lanesPerTenant
// of them. Session lanes ("session:<thread key>") are the thread's
// tenant's, limit 1.
//
// In a global lane, admission is FIFO within a tenant and fair across
// tenants: slot by slot it takes the head of the tenant with the fewest
// running executions in the lane (ties: the older head), so one tenant's
// backlog delays another's next run by about one slot-free time, not by
// the backlog. Resumed runs (admit_first) still go first. A lane's
// perTenant caps how many of its slots one tenant may hold at once.
// Fairness considers up to maxFairTenants tenants with pending work in one
// lane per admission round, in tenant id order.

// maxFairTenants bounds the tenants one admission round of a lane reads.
const maxFairTenants = 1000

// laneRunning counts the running executions of the lane whose row is l: a
// global lane's over all tenants, a tenant's own lane's over that tenant's.
func (e *Engine) laneRunning(ctx context.Context, tx pgx.Tx, l *dbsqlc.Lane) (int32, error) {
	var n int32
	var err error
	if l.TenantID == "" {
		n, err = e.q.LaneCountRunning(ctx, tx, l.Name)
	} else {
		n, err = e.q.LaneTenantRunning(ctx, tx, &dbsqlc.LaneTenantRunningParams{Lane: l.Name, TenantID: l.TenantID})
	}
	if err != nil {
		return 0, fmt.Errorf("counting running executions of lane %s: %w", l.Name, err)
	}
	return n, nil
}

// tenantQueue is one tenant's pending heads in a lane, in its admission
// order, and how many of its runs are running there.
type tenantQueue struct {
	heads   []*dbsqlc.LaneFairCandidatesRow
	running int
}

// tenantQueues groups candidates (ordered by tenant, then admission order)
// by tenant, in tenant order.
func tenantQueues(cands []*dbsqlc.LaneFairCandidatesRow) []*tenantQueue {
	var out []*tenantQueue
	for i, c := range cands {
		if i == 0 || c.TenantID != cands[i-1].TenantID {
			out = append(out, &tenantQueue{running: int(c.Running)})
		}
		q := out[len(out)-1]
		q.heads = append(q.heads, c)
	}
	return out
}

// nextFair returns the queue whose head goes next: a resumed run first,
// then the tenant with the fewest running, then the older head; tenants at
// perTenant (when not 0) wait. Nil when no queue may go.
func nextFair(queues []*tenantQueue, perTenant int) *tenantQueue {
	var best *tenantQueue
	for _, q := range queues {
		if len(q.heads) == 0 || (perTenant > 0 && q.running >= perTenant) {
			continue
		}
		if best == nil || fairBefore(q, best) {
			best = q
		}
	}
	return best
}

// fairBefore reports whether a's head goes before b's.
func fairBefore(a, b *tenantQueue) bool {
	x, y := a.heads[0], b.heads[0]
	if x.AdmitFirst != y.AdmitFirst {
		return x.AdmitFirst
	}
	if a.running != b.running {
		return a.running < b.running
	}
	if x.QueuedAt != nil && y.QueuedAt != nil && !x.QueuedAt.Equal(*y.QueuedAt) {
		return x.QueuedAt.Before(*y.QueuedAt)
	}
	return x.ID < y.ID
}
