package db_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/internal/pgtest"
)

// explainRows loads 100k executions over 20k threads and 100 tenants, with
// an event each, 20k outbound messages and idempotency keys, and 10k
// definitions: enough rows that a missing index shows as a Seq Scan or a
// costly plan.
const explainRows = `
INSERT INTO workflow_definition (tenant_id, workflow_id, version, name, definition)
SELECT 't' || (i % 100), 'wf-' || (i / 100 % 20), '1.' || (i / 2000), 'wf', '{}'
FROM generate_series(0, 9999) i;

INSERT INTO thread (id, tenant_id, thread_id, channel, contact)
SELECT i, 't' || (i % 100), 'thread-' || i, 'api', 'thread-' || i
FROM generate_series(1, 20000) i;

INSERT INTO agent_execution (id, tenant_id, execution_id, workflow_id, version, status, thread_id,
    parent_execution_id, restarted_from, current_node_id, step_seq, completed_at)
SELECT i, 't' || (i % 100), 'exec-' || i, 'wf-' || (i / 100 % 20), '1.0',
       (CASE WHEN i / 100 % 100 < 88 THEN 'completed' WHEN i / 100 % 100 < 89 THEN 'pending'
             WHEN i / 100 % 100 < 94 THEN 'running' WHEN i / 100 % 100 < 97 THEN 'waiting'
             ELSE 'failed' END)::execution_status,
       (i - 1) % 20000 + 1,
       CASE WHEN i % 10 = 0 AND i > 100 THEN i - 100 END,
       CASE WHEN i % 50 = 1 AND i > 100 THEN i - 100 END,
       'start', i % 7,
       CASE WHEN i / 100 % 100 < 88 OR i / 100 % 100 >= 97 THEN now() END
FROM generate_series(1, 100000) i;

INSERT INTO execution_event (id, tenant_id, execution_id, action, message, node_id)
SELECT nextval('execution_event_id_seq'), 't' || (i % 100), i, 'workflow.started', 'Starting', 'start'
FROM generate_series(1, 100000) i;

INSERT INTO thread_message (tenant_id, thread_id, direction, execution_id, node_id, step_seq, body, status)
SELECT 't' || (i % 100), i, 'out', i, 'send', 1, 'hola',
       CASE WHEN i % 100 = 0 THEN 'pending' ELSE 'delivered' END
FROM generate_series(1, 20000) i;

INSERT INTO idempotency_key (tenant_id, endpoint, message_id, status_code, response)
SELECT 't' || (i % 100), 'workflow.execute', 'msg-' || i, 200, '{}'
FROM generate_series(1, 20000) i;`

// maxPlanCost bounds a hot query's estimated cost. Reading all 100k
// executions costs over twice as much (the test checks it), so a query under
// the bound reads a slice through an index, not a whole table or index.
const maxPlanCost = 1500

// maxCost is a hot query's bound: maxPlanCost, except for
// LaneFairCandidates, which reads a few index entries for each tenant with
// pending work in the lane (all 100 of the fixture's tenants): its bound is
// 40 per such tenant on top of maxPlanCost.
func maxCost(name string) float64 {
	if name == "LaneFairCandidates" {
		return maxPlanCost + 100*40
	}
	return maxPlanCost
}

// bigTables are the tables a hot query must reach through an index.
var bigTables = map[string]bool{
	"agent_execution": true, "thread": true, "execution_event": true,
	"thread_message": true, "idempotency_key": true, "workflow_definition": true,
}

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

// Every hot query of db/queries, with representative parameters, reaches the
// big tables through an index on 100k executions.
func TestHotQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	start := time.Now()
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// The rows are consistent by construction: a superuser skips the
		// foreign key checks, which take most of the load's time.
		var super bool
		if err := tx.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil {
			return err
		}
		if super {
			if _, err := tx.Exec(ctx, "SET LOCAL session_replication_role = replica"); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, explainRows)
		return err
	}))
	_, err := pool.Exec(ctx, "ANALYZE")
	require.NoError(t, err)
	t.Logf("loaded in %s", time.Since(start))
	var raw []byte
	require.NoError(t, pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) SELECT * FROM agent_execution").Scan(&raw))
	var full []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(raw, &full))
	t.Logf("reading every execution costs %.0f", full[0].Plan.TotalCost)
	require.Greater(t, full[0].Plan.TotalCost, 2.0*maxPlanCost, "the cost bound must be well under a full read")

	q := dbsqlc.New()
	list := func(p dbsqlc.ExecutionViewListParams) func(*recorder) {
		p.TenantID, p.Max = "t42", 50
		return func(r *recorder) { _, _ = q.ExecutionViewList(ctx, r, &p) }
	}
	cases := []struct {
		name string
		call func(*recorder)
	}{
		{"ExecutionGetByID", func(r *recorder) { _, _ = q.ExecutionGetByID(ctx, r, 54321) }},
		{"ExecutionLockForStep", func(r *recorder) {
			_, _ = q.ExecutionLockForStep(ctx, r, &dbsqlc.ExecutionLockForStepParams{ID: 54395, StepSeq: 3})
		}},
		{"ExecutionGetByExecutionID", func(r *recorder) {
			_, _ = q.ExecutionGetByExecutionID(ctx, r, &dbsqlc.ExecutionGetByExecutionIDParams{TenantID: "t42", ExecutionID: "exec-54342"})
		}},
		{"ExecutionViewByExecutionID", func(r *recorder) {
			_, _ = q.ExecutionViewByExecutionID(ctx, r, &dbsqlc.ExecutionViewByExecutionIDParams{TenantID: "t40", ExecutionID: "exec-54340"})
		}},
		{"ExecutionViewList", list(dbsqlc.ExecutionViewListParams{})},
		{"ExecutionViewList/status", list(dbsqlc.ExecutionViewListParams{Status: ptr("running")})},
		{"ExecutionViewList/workflow", list(dbsqlc.ExecutionViewListParams{WorkflowID: ptr("wf-2")})},
		{"ExecutionViewList/thread", list(dbsqlc.ExecutionViewListParams{ThreadKey: ptr("thread-54342")})},
		{"ExecutionViewList/parent", list(dbsqlc.ExecutionViewListParams{ParentKey: ptr("exec-54242")})},
		{"ExecutionViewList/before", list(dbsqlc.ExecutionViewListParams{BeforeID: ptr(int64(50042))})},
		{"ExecutionStart", func(r *recorder) { _, _ = q.ExecutionStart(ctx, r, 54321) }},
		{"ExecutionCheckpoint", func(r *recorder) {
			_, _ = q.ExecutionCheckpoint(ctx, r, &dbsqlc.ExecutionCheckpointParams{CurrentNodeID: "n", Variables: []byte(`{}`), NodePath: []string{"start"}, ID: 54395, StepSeq: 3})
		}},
		{"ExecutionReserve", func(r *recorder) {
			_, _ = q.ExecutionReserve(ctx, r, &dbsqlc.ExecutionReserveParams{Lane: "main", LaneLimit: 4})
		}},
		{"ExecutionFinishStep", func(r *recorder) {
			_, _ = q.ExecutionFinishStep(ctx, r, &dbsqlc.ExecutionFinishStepParams{Status: "completed", CurrentNodeID: "end", Variables: []byte(`{}`), NodePath: []string{"start"}, ResultType: "success", ID: 54395, StepSeq: 3})
		}},
		{"ExecutionFail", func(r *recorder) {
			_, _ = q.ExecutionFail(ctx, r, &dbsqlc.ExecutionFailParams{ErrorCode: "x", ErrorMessage: "x", ID: 54395})
		}},
		{"ExecutionCancel", func(r *recorder) {
			_, _ = q.ExecutionCancel(ctx, r, &dbsqlc.ExecutionCancelParams{ResultSummary: "x", CancelledBy: "x", ID: 54395})
		}},
		{"EventListByExecution", func(r *recorder) {
			_, _ = q.EventListByExecution(ctx, r, &dbsqlc.EventListByExecutionParams{ExecutionID: 54321, AfterID: 0, Max: 100})
		}},
		{"ThreadGetByID", func(r *recorder) { _, _ = q.ThreadGetByID(ctx, r, 54321) }},
		{"ThreadLock", func(r *recorder) { _, _ = q.ThreadLock(ctx, r, 54321) }},
		{"MessageFirstQueued", func(r *recorder) { _, _ = q.MessageFirstQueued(ctx, r, 54300) }},
		{"MessageCountQueued", func(r *recorder) { _, _ = q.MessageCountQueued(ctx, r, 54300) }},
		{"OutboxNext", func(r *recorder) {
			_, _ = q.OutboxNext(ctx, r, &dbsqlc.OutboxNextParams{ThreadID: 54300, Max: 50})
		}},
		{"ThreadTakeFreeLock", func(r *recorder) {
			_, _ = q.ThreadTakeFreeLock(ctx, r, &dbsqlc.ThreadTakeFreeLockParams{ID: 54300, ExecutionID: 54300})
		}},
		{"ThreadReleaseLock", func(r *recorder) { _, _ = q.ThreadReleaseLock(ctx, r, 54300) }},
		{"MessageReleaseQueued", func(r *recorder) {
			_, _ = q.MessageReleaseQueued(ctx, r, &dbsqlc.MessageReleaseQueuedParams{ThreadID: 54300, ExecutionIds: []int64{54300, 54400}})
		}},
		{"ExecutionAncestors", func(r *recorder) { _, _ = q.ExecutionAncestors(ctx, r, 54395) }},
		{"ExecutionLockFamily", func(r *recorder) { _, _ = q.ExecutionLockFamily(ctx, r, 54395) }},
		{"ThreadViewByThreadID", func(r *recorder) {
			_, _ = q.ThreadViewByThreadID(ctx, r, &dbsqlc.ThreadViewByThreadIDParams{TenantID: "t42", ThreadID: "thread-54342"})
		}},
		{"MessageRecordFailedAttempt", func(r *recorder) {
			_ = q.MessageRecordFailedAttempt(ctx, r, &dbsqlc.MessageRecordFailedAttemptParams{LastError: "x", ID: 54300})
		}},
		{"MessageListByExecution", func(r *recorder) { _, _ = q.MessageListByExecution(ctx, r, 54321) }},
		{"IdempotencyGet", func(r *recorder) {
			_, _ = q.IdempotencyGet(ctx, r, &dbsqlc.IdempotencyGetParams{TenantID: "t42", Endpoint: "workflow.execute", MessageID: "msg-54342"})
		}},
		{"IdempotencySetResponse", func(r *recorder) {
			_ = q.IdempotencySetResponse(ctx, r, &dbsqlc.IdempotencySetResponseParams{StatusCode: 200, Response: []byte(`{}`), TenantID: "t42", Endpoint: "workflow.execute", MessageID: "msg-54342"})
		}},
		{"DefinitionLatestID", func(r *recorder) {
			_, _ = q.DefinitionLatestID(ctx, r, &dbsqlc.DefinitionLatestIDParams{TenantID: "t42", WorkflowID: "wf-3"})
		}},
		{"DefinitionGetByID", func(r *recorder) { _, _ = q.DefinitionGetByID(ctx, r, 54321) }},
		{"DefinitionGetByVersion", func(r *recorder) {
			_, _ = q.DefinitionGetByVersion(ctx, r, &dbsqlc.DefinitionGetByVersionParams{TenantID: "t42", WorkflowID: "wf-3", Version: "1.2"})
		}},
		{"DefinitionListLatest", func(r *recorder) {
			_, _ = q.DefinitionListLatest(ctx, r, &dbsqlc.DefinitionListLatestParams{TenantID: "t42", AfterWorkflowID: "", Max: 50})
		}},
		// Lanes and the inbound router (issue 5).
		{"LaneCountRunning", func(r *recorder) { _, _ = q.LaneCountRunning(ctx, r, "main") }},
		{"LaneTenantRunning", func(r *recorder) {
			_, _ = q.LaneTenantRunning(ctx, r, &dbsqlc.LaneTenantRunningParams{Lane: "main", TenantID: "t42"})
		}},
		{"LaneFairCandidates", func(r *recorder) {
			_, _ = q.LaneFairCandidates(ctx, r, &dbsqlc.LaneFairCandidatesParams{Lane: "main", PerTenant: 4, MaxTenants: 1000})
		}},
		{"SessionCountRunning", func(r *recorder) {
			_, _ = q.SessionCountRunning(ctx, r, &dbsqlc.SessionCountRunningParams{TenantID: "t42", SessionKey: "session:thread-42"})
		}},
		{"SessionActiveRun", func(r *recorder) {
			_, _ = q.SessionActiveRun(ctx, r, &dbsqlc.SessionActiveRunParams{TenantID: "t42", SessionKey: "session:thread-42"})
		}},
		{"InboundGetByExternalID", func(r *recorder) {
			_, _ = q.InboundGetByExternalID(ctx, r, &dbsqlc.InboundGetByExternalIDParams{ThreadID: 54300, ExternalID: "m-1"})
		}},
		{"InboundListReceived", func(r *recorder) { _, _ = q.InboundListReceived(ctx, r, 54300) }},
		{"InboundCountReceived", func(r *recorder) { _, _ = q.InboundCountReceived(ctx, r, 54300) }},
		{"InboundTakeSteered", func(r *recorder) { _, _ = q.InboundTakeSteered(ctx, r, 54321) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { explainUsesIndexes(t, pool, c.name, c.call) })
	}
}

// explainUsesIndexes records the SQL call sends, EXPLAINs it and requires
// that no big table is scanned sequentially and that some index is used.
func explainUsesIndexes(t *testing.T, pool *pgxpool.Pool, name string, call func(*recorder)) {
	ctx := context.Background()
	c := struct{ name string }{name}
	{
		var r recorder
		call(&r)
		require.NotEmpty(t, r.sql, c.name)
		var raw []byte
		require.NoError(t, pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+r.sql, r.args...).Scan(&raw), c.name)
		var plans []struct {
			Plan planNode `json:"Plan"`
		}
		require.NoError(t, json.Unmarshal(raw, &plans), c.name)
		require.Len(t, plans, 1, c.name)
		var seq, indexes []string
		plans[0].Plan.walk(func(n *planNode) {
			if n.NodeType == "Seq Scan" && bigTables[n.Relation] {
				seq = append(seq, n.Relation)
			}
			if n.IndexName != "" {
				indexes = append(indexes, fmt.Sprintf("%s %s", n.NodeType, n.IndexName))
			}
		})
		cost := plans[0].Plan.TotalCost
		t.Logf("%-28s cost %7.2f  %s", c.name, cost, strings.Join(indexes, ", "))
		require.Empty(t, seq, "%s scans %v sequentially:\n%s", c.name, seq, raw)
		require.NotEmpty(t, indexes, "%s uses no index:\n%s", c.name, raw)
		require.Less(t, cost, maxCost(c.name), "%s costs too much:\n%s", c.name, raw)
	}
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
