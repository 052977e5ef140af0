package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// laneTable is the monitor_lanes view as read: its columns in order, and its
// rows keyed by column (Text holds the same values as PostgreSQL prints
// them, for the table). Available is false when the database has no such
// view.
type laneTable struct {
	Available bool             `json:"available"`
	Columns   []string         `json:"columns,omitempty"`
	Total     int              `json:"total"`
	Rows      []map[string]any `json:"rows,omitempty"`
	Text      [][]string       `json:"-"`
}

// laneColumns are monitor_lanes' columns, as the table and the JSON show
// them.
var laneColumns = []string{"tenant_id", "lane", "max_concurrent", "running", "pending", "oldest_pending_age_ms"}

// readLanes reads monitor_lanes when the database has it: at most limit rows,
// the global lanes and, with tenant set, that tenant's session lanes only.
func readLanes(ctx context.Context, tx pgx.Tx, q *dbsqlc.Queries, tenant string, limit int) (laneTable, error) {
	var lanes laneTable
	available, err := q.MonitorCLILanesAvailable(ctx, tx)
	if err != nil {
		return lanes, fmt.Errorf("looking for monitor_lanes: %w", err)
	}
	if !available {
		return lanes, nil
	}
	lanes.Available = true
	lanes.Columns = laneColumns
	rows, err := q.MonitorCLILanes(ctx, tx, tenant)
	if err != nil {
		return lanes, fmt.Errorf("reading monitor_lanes: %w", err)
	}
	lanes.Total = len(rows)
	for _, r := range rows[:min(len(rows), limit)] {
		tenantText := r.TenantID
		if tenantText == "" {
			tenantText = "(all)" // a global lane, shared by every tenant
		}
		lanes.Rows = append(lanes.Rows, map[string]any{
			"tenant_id": r.TenantID, "lane": r.Lane, "max_concurrent": r.MaxConcurrent,
			"running": r.Running, "pending": r.Pending, "oldest_pending_age_ms": r.OldestPendingAgeMs,
		})
		lanes.Text = append(lanes.Text, []string{tenantText, r.Lane, strconv.FormatInt(r.MaxConcurrent, 10),
			strconv.FormatInt(r.Running, 10), strconv.FormatInt(r.Pending, 10), strconv.FormatInt(r.OldestPendingAgeMs, 10)})
	}
	return lanes, nil
}
