package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine"
)

type statusSummaryView struct {
	Status        string  `json:"status"`
	Count         int64   `json:"count"`
	AvgAgeSeconds float64 `json:"avg_age_seconds"`
}

type waitingExecutionView struct {
	ExecutionID  string          `json:"execution_id"`
	WorkflowID   string          `json:"workflow_id"`
	AgentID      string          `json:"agent_id"`
	ThreadID     *string         `json:"thread_id"`
	WaitingFor   string          `json:"waiting_for"`
	WaitingUntil *time.Time      `json:"waiting_until"`
	WaitingData  json.RawMessage `json:"waiting_data"`
	WaitingHours float64         `json:"waiting_hours"`
	UpdatedAt    time.Time       `json:"updated_at"`
}

// monitorSummary serves monitor_execution_status for the token's tenant.
func (s *Server) monitorSummary(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	rows, err := s.q.MonitorExecutionStatus(ctx, db, r.principal.tenantID)
	if err != nil {
		return 0, nil, fmt.Errorf("reading execution summary: %w", err)
	}
	out := listView[statusSummaryView]{Items: []statusSummaryView{}}
	for _, row := range rows {
		out.Items = append(out.Items, statusSummaryView{Status: string(row.Status), Count: row.Count, AvgAgeSeconds: row.AvgAgeSeconds})
	}
	return http.StatusOK, out, nil
}

// monitorWaiting serves monitor_waiting_executions for the token's tenant.
func (s *Server) monitorWaiting(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	return s.monitorList(ctx, r, db, "waiting", s.q.MonitorWaiting)
}

// monitorStuck serves monitor_stuck_executions for the token's tenant.
func (s *Server) monitorStuck(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	return s.monitorList(ctx, r, db, "stuck", func(ctx context.Context, db dbsqlc.DBTX, p *dbsqlc.MonitorWaitingParams) ([]*dbsqlc.MonitorWaitingExecution, error) {
		rows, err := s.q.MonitorStuck(ctx, db, &dbsqlc.MonitorStuckParams{TenantID: p.TenantID, Max: p.Max, Skip: p.Skip})
		if err != nil {
			return nil, err
		}
		out := make([]*dbsqlc.MonitorWaitingExecution, 0, len(rows))
		for _, row := range rows {
			w := dbsqlc.MonitorWaitingExecution(*row)
			out = append(out, &w)
		}
		return out, nil
	})
}

// monitorList pages a monitoring view ordered by waiting_until. The cursor
// is an offset: these views serve operators, and their order (by deadline)
// has no unique key to continue from.
func (s *Server) monitorList(ctx context.Context, r *request, db dbsqlc.DBTX, action string,
	query func(context.Context, dbsqlc.DBTX, *dbsqlc.MonitorWaitingParams) ([]*dbsqlc.MonitorWaitingExecution, error)) (int, any, error) {
	limit, cursor, err := pageParams(r, "monitor", action)
	if err != nil {
		return 0, nil, err
	}
	skip, err := cursorOffset(cursor, "monitor", action)
	if err != nil {
		return 0, nil, err
	}
	rows, err := query(ctx, db, &dbsqlc.MonitorWaitingParams{TenantID: r.principal.tenantID, Max: int32(limit + 1), Skip: skip})
	if err != nil {
		return 0, nil, fmt.Errorf("reading %s executions: %w", action, err)
	}
	out := listView[waitingExecutionView]{Items: []waitingExecutionView{}}
	for i, row := range rows {
		if i == limit {
			out.NextCursor = encodeCursor(strconv.FormatInt(int64(skip)+int64(limit), 10))
			break
		}
		thread := row.ThreadID
		out.Items = append(out.Items, waitingExecutionView{
			ExecutionID: row.ExecutionID, WorkflowID: row.WorkflowID, AgentID: row.AgentID, ThreadID: &thread,
			WaitingFor: deref(row.WaitingFor), WaitingUntil: utc(row.WaitingUntil), WaitingData: nullIfEmpty(row.WaitingData),
			WaitingHours: row.WaitingHours, UpdatedAt: row.UpdatedAt.UTC(),
		})
	}
	return http.StatusOK, out, nil
}

// monitorLanes serves monitor_lanes: the global lanes with the token's
// tenant's own runs in them, and the tenant's own and session lanes that
// have work, by name.
func (s *Server) monitorLanes(ctx context.Context, r *request, db dbsqlc.DBTX) (int, any, error) {
	limit, cursor, err := pageParams(r, "monitor", "lanes")
	if err != nil {
		return 0, nil, err
	}
	lanes, err := s.engine.ListLanes(ctx, db, r.principal.tenantID, engine.LanePage{After: cursor, Limit: limit + 1})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, keyedPage(lanes, limit, engine.LaneStatus.Key, func(l engine.LaneStatus) engine.LaneStatus { return l }), nil
}
