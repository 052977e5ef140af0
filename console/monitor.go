package console

import (
	"net/http"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/httpapi"
)

// Bounds of the monitor and lanes pages.
const (
	monitorRows = 100
	lanesShown  = 200
)

// lanesView is what templates/lanes.html shows.
type lanesView struct {
	Lanes []engine.LaneStatus
}

// lanesPage shows occupancy and backlog of the lanes the tenant runs in.
func (c *Console) lanesPage(w http.ResponseWriter, r *http.Request, sess httpapi.Session) error {
	lanes, err := c.engine.ListLanes(r.Context(), c.pool, sess.TenantID, engine.LanePage{Limit: lanesShown})
	if err != nil {
		return err
	}
	return c.show(w, sess, page{Name: "lanes", Data: lanesView{Lanes: lanes}})
}

// monitorView is what templates/monitor.html shows.
type monitorView struct {
	Summary []*dbsqlc.MonitorExecutionStatusRow
	Waiting []*dbsqlc.MonitorWaitingExecution
	Stuck   []*dbsqlc.MonitorStuckExecution
	Stale   []engine.ActiveLock
}

// monitorPage shows the live executions by status, what waits (soonest
// deadline first), what is stuck past its deadline, and stale locks.
func (c *Console) monitorPage(w http.ResponseWriter, r *http.Request, sess httpapi.Session) error {
	ctx, q := r.Context(), dbsqlc.New()
	var view monitorView
	var err error
	if view.Summary, err = q.MonitorExecutionStatus(ctx, c.pool, sess.TenantID); err != nil {
		return err
	}
	if view.Waiting, err = q.MonitorWaiting(ctx, c.pool, &dbsqlc.MonitorWaitingParams{TenantID: sess.TenantID, Max: monitorRows}); err != nil {
		return err
	}
	if view.Stuck, err = q.MonitorStuck(ctx, c.pool, &dbsqlc.MonitorStuckParams{TenantID: sess.TenantID, Max: monitorRows}); err != nil {
		return err
	}
	if view.Stale, err = c.engine.ListLocks(ctx, c.pool, sess.TenantID, engine.LockPage{StaleOnly: true, Limit: monitorRows}); err != nil {
		return err
	}
	return c.show(w, sess, page{Name: "monitor", Data: view})
}
