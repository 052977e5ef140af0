package engine

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/batonrun/baton/db/dbsqlc"
)

// LaneStatus is a row of monitor_lanes.
type LaneStatus struct {
	Lane          string `json:"lane"`
	MaxConcurrent int    `json:"max_concurrent"`
	// PerTenant is how many of a global lane's slots one tenant may hold;
	// 0 is no cap of its own.
	PerTenant int `json:"per_tenant"`
	Running   int `json:"running"`
	Pending   int `json:"pending"`
	// OldestPendingAgeMS is nil when nothing is pending.
	OldestPendingAgeMS *int64 `json:"oldest_pending_age_ms"`
	// tenantLane says the lane is the tenant's own (or a session lane), not
	// a global one.
	tenantLane bool
}

// Key is where a listing that ends with this lane continues
// (LanePage.After).
func (l LaneStatus) Key() string {
	if l.tenantLane {
		return "t:" + l.Lane
	}
	return "g:" + l.Lane
}

// LanePage selects a page of ListLanes.
type LanePage struct {
	// After is the Key of the last lane of the previous page; empty starts
	// at the first lane.
	After string
	// Limit is the most lanes returned; 0 is no limit.
	Limit int
}

// pageSize is the LIMIT of a page of limit rows; 0 or less is no limit.
func pageSize(limit int) int32 {
	if limit <= 0 || limit > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(limit)
}

// ListLanes returns a page of a tenant's view of the lanes, by name: the
// global lanes with the tenant's own running and pending runs in them
// (never other tenants'), and the tenant's own lanes and session lanes with
// work.
func (e *Engine) ListLanes(ctx context.Context, db dbsqlc.DBTX, tenantID string, page LanePage) ([]LaneStatus, error) {
	params := &dbsqlc.MonitorLaneListParams{TenantID: tenantID, Max: pageSize(page.Limit)}
	if page.After != "" {
		scope, lane, ok := strings.Cut(page.After, ":")
		if !ok || (scope != "g" && scope != "t") {
			return nil, &InputError{Field: "cursor", Message: "is not one this API gave out"}
		}
		params.AfterLane, params.AfterTenantLane = &lane, scope == "t"
	}
	for name := range e.configuredLanes() {
		if err := e.ensureLane(ctx, db, "", name); err != nil {
			return nil, err
		}
	}
	rows, err := e.q.MonitorLaneList(ctx, db, params)
	if err != nil {
		return nil, fmt.Errorf("listing lanes: %w", err)
	}
	out := make([]LaneStatus, 0, len(rows))
	for _, r := range rows {
		l := LaneStatus{Lane: r.Lane, MaxConcurrent: int(r.MaxConcurrent), PerTenant: int(r.PerTenant), Running: int(r.Running), Pending: int(r.Pending),
			tenantLane: r.TenantLane}
		if r.Pending > 0 {
			age := r.OldestPendingAgeMs
			l.OldestPendingAgeMS = &age
		}
		out = append(out, l)
	}
	return out, nil
}
