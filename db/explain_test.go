package db_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/scalefixture"
)

// maxPlanCost bounds the estimated cost of a query that reads a slice (one
// execution, thread, key, or a page of a tenant's list) through an index: a
// page of 50 executions with the keys of their thread, parent and restart
// costs about 1,400. Reading all the fixture's executions costs over five
// times the bound (the test checks it), and reading one tenant's history
// several times, so a query under the bound reads a slice.
const maxPlanCost = 2000

// longPageCost bounds a query that reads a long page of one thread: the
// console's timeline, 201 messages, each with its execution's key and a
// probe for an event of it, costs about 4,000, as four pages of 50
// executions with their keys do.
const longPageCost = 5000

// perTenantCost is what a query may add to maxPlanCost for each tenant with
// work in a lane when it visits every such tenant (LaneFairCandidates: a
// few index entries each; all the fixture's tenants have pending work).
const perTenantCost = 40

// perLiveCost is what a query that reads every live execution (or every
// held thread lock, queued message, lane, River job still to run) may cost
// per live execution of the fixture: these are the monitoring views and
// gauges across tenants and the reapers' sweeps. Reaching the live rows
// through an index on them keeps the cost in proportion to the live set,
// however long the history. Live rows lie scattered over the table, and
// the planner prices each as a random page read, so the bound is a good
// part of reading the executions table in one pass; a query that reads the
// history through an index costs several times that.
const perLiveCost = 2.5

// bigTables are the tables that grow with traffic: a query must reach them
// through an index.
var bigTables = map[string]bool{
	"agent_execution": true, "thread": true, "execution_event": true, "thread_message": true,
	"idempotency_key": true, "inbound_event": true, "workflow_definition": true, "lane": true,
	"river_job": true, "console_session": true, "operator_session": true,
}

// reach says how much of the data a query may read, which sets its cost
// bound.
type reach int

const (
	// slice: a query of one execution, thread, tenant page or key.
	slice reach = iota
	// write: an INSERT … VALUES, which reads no table (its unique keys are
	// checked through their indexes as it runs).
	write
	// longPage: a page of up to 201 rows of one thread, each with a probe
	// or two of other tables.
	longPage
	// tenants: a slice per tenant with pending work in a lane.
	tenants
	// live: every live execution, held lock or River job to run.
	live
)

// bound returns the highest estimated cost a query of this reach may have.
func (r reach) bound() float64 {
	switch r {
	case longPage:
		return longPageCost
	case tenants:
		return maxPlanCost + perTenantCost*scalefixture.DefaultTenants
	case live:
		return perLiveCost * scalefixture.Live
	default:
		return maxPlanCost
	}
}

// readsIndexes tells whether a query of this reach must use an index.
func (r reach) readsIndexes() bool { return r != write }

// errRecorded ends a generated query method once its SQL is recorded.
var errRecorded = errors.New("recorded")

// recorder is a dbsqlc.DBTX that records the SQL and arguments the generated
// code sends instead of running them.
type recorder struct {
	sql  string
	args []any
}

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.sql, r.args = sql, args
	return pgconn.CommandTag{}, errRecorded
}

func (r *recorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.sql, r.args = sql, args
	return nil, errRecorded
}

func (r *recorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.sql, r.args = sql, args
	return errRow{}
}

type errRow struct{}

func (errRow) Scan(...any) error { return errRecorded }

func ptr[T any](v T) *T { return &v }

// record returns the SQL and arguments call sends.
func record(t *testing.T, call func(*recorder)) recorder {
	t.Helper()
	var r recorder
	call(&r)
	require.NotEmpty(t, r.sql, "the call sent no SQL")
	return r
}

// Every query of db/queries, every monitoring view and the statements of
// the functions the queries call reach the big tables through an index, at
// a cost that does not grow with the history, on a month of traffic: a
// million executions, ten million events. The data is built once, here, and
// shared by the subtests.
func TestHotQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	pool := buildFixture(t)
	checkBoundsUnderFullReads(t, pool)
	t.Run("coverage", func(t *testing.T) { checkCoverage(t) })
	for _, c := range queryCases() {
		t.Run(c.name, func(t *testing.T) {
			r := record(t, c.call)
			p := explain(t, pool, r.sql, r.args...)
			checkPlan(t, p, c.reach)
			for _, index := range wantIndexes[c.name] {
				checkUsesIndex(t, p, index)
			}
		})
	}
	for _, c := range nestedCases() {
		t.Run(c.name, func(t *testing.T) {
			for _, p := range explainNested(t, pool, record(t, c.call)) {
				checkPlan(t, p, c.reach)
			}
		})
	}
	// A page of each monitoring view, of all tenants and of one; the
	// queries above read them as the API and baton monitor do.
	views := monitorViews(t, pool)
	require.NotEmpty(t, views)
	for _, v := range views {
		from := "SELECT * FROM " + pgx.Identifier{v}.Sanitize()
		t.Run("view "+v+"/all", func(t *testing.T) {
			checkPlan(t, explain(t, pool, from+" LIMIT 100"), live)
		})
		t.Run("view "+v+"/tenant", func(t *testing.T) {
			checkPlan(t, explain(t, pool, from+" WHERE tenant_id = 't42' LIMIT 100"), slice)
		})
	}
}

// checkBoundsUnderFullReads requires that the bounds are under the cost of
// reading the executions table in one pass, the slice bounds far under it,
// so that a plan within its bound reads a part of the table.
func checkBoundsUnderFullReads(t *testing.T, pool *pgxpool.Pool) {
	full := explain(t, pool, "SELECT * FROM agent_execution").Plan.TotalCost
	t.Logf("reading every execution costs %.0f, every event %.0f", full,
		explain(t, pool, "SELECT * FROM execution_event").Plan.TotalCost)
	for _, r := range []reach{slice, longPage, tenants} {
		require.Less(t, 5*r.bound(), full, "the bound %.0f must be far under a full read", r.bound())
	}
	require.Less(t, live.bound(), full, "the live bound must be under a full read")
}

// monitorViews lists the monitoring views (monitor_*) of the schema.
func monitorViews(t *testing.T, pool *pgxpool.Pool) []string {
	rows, err := pool.Query(context.Background(),
		`SELECT viewname FROM pg_views WHERE schemaname = current_schema() AND viewname LIKE 'monitor\_%' ORDER BY 1`)
	require.NoError(t, err)
	views, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return views
}

// plan is one statement's EXPLAIN (FORMAT JSON) output.
type plan struct {
	Query string   `json:"Query Text"`
	Plan  planNode `json:"Plan"`
	raw   string
}

// explain returns the plan of sql with args.
func explain(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) plan {
	t.Helper()
	var raw []byte
	require.NoError(t, pool.QueryRow(context.Background(), "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&raw))
	var plans []plan
	require.NoError(t, json.Unmarshal(raw, &plans))
	require.Len(t, plans, 1)
	plans[0].Query, plans[0].raw = sql, string(raw)
	return plans[0]
}

// checkPlan requires that p scans no big table sequentially, uses some index
// when its reach reads tables, and costs less than its reach's bound.
func checkPlan(t *testing.T, p plan, r reach) {
	t.Helper()
	var seq, indexes []string
	p.Plan.walk(func(n *planNode) {
		if n.NodeType == "Seq Scan" && bigTables[n.Relation] {
			seq = append(seq, n.Relation)
		}
		if n.IndexName != "" {
			indexes = append(indexes, fmt.Sprintf("%s %s", n.NodeType, n.IndexName))
		}
	})
	cost := p.Plan.TotalCost
	t.Logf("cost %9.2f (bound %.0f)  %s", cost, r.bound(), strings.Join(indexes, ", "))
	require.Empty(t, seq, "scans %v sequentially:\n%s\n%s", seq, p.Query, p.raw)
	if r.readsIndexes() {
		require.NotEmpty(t, indexes, "uses no index:\n%s\n%s", p.Query, p.raw)
	}
	require.Less(t, cost, r.bound(), "costs too much:\n%s\n%s", p.Query, p.raw)
}

// checkUsesIndex requires that p reads through the named index.
func checkUsesIndex(t *testing.T, p plan, index string) {
	t.Helper()
	used := false
	p.Plan.walk(func(n *planNode) { used = used || n.IndexName == index })
	require.True(t, used, "does not use %s:\n%s\n%s", index, p.Query, p.raw)
}

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan tree.
type planNode struct {
	NodeType  string     `json:"Node Type"`
	TotalCost float64    `json:"Total Cost"`
	Relation  string     `json:"Relation Name"`
	IndexName string     `json:"Index Name"`
	Plans     []planNode `json:"Plans"`
}

func (n *planNode) walk(fn func(*planNode)) {
	fn(n)
	for i := range n.Plans {
		n.Plans[i].walk(fn)
	}
}
