package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
)

// lanesQuery reads the monitor_lanes view. It is the one query of baton
// monitor outside db/queries: the view is created by the lanes migration,
// which this schema does not have, so sqlc cannot compile a query on it. The
// monitor checks that the view exists first (MonitorCLILanesAvailable) and
// shows whatever columns it has. Once the lanes migration is in db/migrations
// this query belongs in db/queries/monitor_cli.sql with typed columns.
const lanesQuery = `SELECT * FROM monitor_lanes ORDER BY 1`

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

// readLanes reads monitor_lanes when the database has it: at most limit rows,
// of tenant alone when tenant is set and the view has a tenant_id column.
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
	// The simple protocol returns every value as text, which is what the
	// table prints whatever the column types are.
	rows, err := tx.Query(ctx, lanesQuery, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return lanes, fmt.Errorf("reading monitor_lanes: %w", err)
	}
	defer rows.Close()
	tenantCol := -1
	for i, f := range rows.FieldDescriptions() {
		lanes.Columns = append(lanes.Columns, f.Name)
		if f.Name == "tenant_id" {
			tenantCol = i
		}
	}
	for rows.Next() {
		raw := rows.RawValues()
		if tenant != "" && tenantCol >= 0 && string(raw[tenantCol]) != tenant {
			continue
		}
		lanes.Total++
		if len(lanes.Rows) >= limit {
			continue
		}
		values, err := rows.Values()
		if err != nil {
			return lanes, fmt.Errorf("reading monitor_lanes: %w", err)
		}
		obj := make(map[string]any, len(values))
		text := make([]string, len(values))
		for i, v := range values {
			obj[lanes.Columns[i]] = v
			if raw[i] == nil {
				text[i] = "-"
			} else {
				text[i] = string(raw[i])
			}
		}
		lanes.Rows = append(lanes.Rows, obj)
		lanes.Text = append(lanes.Text, text)
	}
	if err := rows.Err(); err != nil {
		return lanes, fmt.Errorf("reading monitor_lanes: %w", err)
	}
	return lanes, nil
}
