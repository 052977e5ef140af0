package retention_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/internal/pgtest"
)

// errRecorded ends a generated query method once its SQL is recorded.
var errRecorded = errors.New("recorded")

// sqlRecorder is a dbsqlc.DBTX that records the SQL and arguments the
// generated code sends instead of running them.
type sqlRecorder struct {
	sql  string
	args []any
}

func (r *sqlRecorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.sql, r.args = sql, args
	return pgconn.CommandTag{}, errRecorded
}

func (r *sqlRecorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.sql, r.args = sql, args
	return nil, errRecorded
}

func (r *sqlRecorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.sql, r.args = sql, args
	return recordedRow{}
}

type recordedRow struct{}

func (recordedRow) Scan(...any) error { return errRecorded }

type planNode struct {
	NodeType  string     `json:"Node Type"`
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

// Each sweep query finds its rows through its expiry index, and reaches the
// big tables (executions, their events and messages) only through indexes,
// on 20k executions with 10 events each, most of them expired, over 10
// tenants, one of which keeps its rows for longer.
func TestSweepQueriesUseTheirIndexes(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	tenants := make([]string, 10)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("t%d", i)
	}
	loadExpired(t, pool, tenants, 2000, 10, 20)
	_, err := pool.Exec(ctx, `
INSERT INTO idempotency_key (tenant_id, endpoint, message_id, status_code, response, created_at)
SELECT 't' || (i % 10), 'workflow.execute', 'msg-' || i, 202, '{}', now() - (i % 48) * interval '1 hour' FROM generate_series(1, 20000) i;
INSERT INTO inbound_event (tenant_id, event_id, event_type, created_at)
SELECT 't' || (i % 10), 'ev-' || i, 'EVENT_COMPLETED', now() - (i % 48) * interval '1 hour' FROM generate_series(1, 20000) i;
INSERT INTO thread_message (tenant_id, thread_id, direction, body, status, external_id, created_at)
SELECT t.tenant_id, t.id, 'in', 'hola', CASE WHEN t.id % 3 = 0 THEN 'received' ELSE 'dropped' END, 'in-' || t.id, now() - interval '30 days'
FROM thread t;
INSERT INTO console_session (id, tenant_id, subject, scopes, csrf, created_at, expires_at)
SELECT sha256(int8send(i)), 't' || (i % 10), 'ana', '{}', 'csrf', now() - (i % 48) * interval '1 hour',
       now() - (i % 48) * interval '1 hour' + interval '12 hours' FROM generate_series(1, 20000) i;
INSERT INTO operator_session (id, subject, created_at, expires_at)
SELECT sha256(int8send(i)), 'ops', now() - (i % 48) * interval '1 hour',
       now() - (i % 48) * interval '1 hour' + interval '12 hours' FROM generate_series(1, 20000) i;
ANALYZE;`)
	require.NoError(t, err)

	q := dbsqlc.New()
	keep, tenantKeep := int64(week/1e6), json.RawMessage(`{"t3": 7776000000}`)
	cases := []struct {
		name, index string
		call        func(*sqlRecorder)
	}{
		{"RetentionSweepExecutions", "agent_execution_expiry_idx", func(r *sqlRecorder) {
			_, _ = q.RetentionSweepExecutions(ctx, r, &dbsqlc.RetentionSweepExecutionsParams{KeepMsByTenant: tenantKeep, KeepMs: keep, Batch: 1000})
		}},
		{"RetentionSweepInboundMessages", "thread_message_inbound_expiry_idx", func(r *sqlRecorder) {
			_, _ = q.RetentionSweepInboundMessages(ctx, r, &dbsqlc.RetentionSweepInboundMessagesParams{KeepMsByTenant: tenantKeep, KeepMs: keep, Batch: 1000})
		}},
		{"RetentionForgetInboundMessageIDs", "thread_message_inbound_id_expiry_idx", func(r *sqlRecorder) {
			_, _ = q.RetentionForgetInboundMessageIDs(ctx, r, &dbsqlc.RetentionForgetInboundMessageIDsParams{KeepMsByTenant: tenantKeep, KeepMs: int64(day / 1e6), Batch: 1000})
		}},
		{"RetentionSweepIdempotencyKeys", "idempotency_key_expiry_idx", func(r *sqlRecorder) {
			_, _ = q.RetentionSweepIdempotencyKeys(ctx, r, &dbsqlc.RetentionSweepIdempotencyKeysParams{KeepMsByTenant: tenantKeep, KeepMs: int64(day / 1e6), Batch: 1000})
		}},
		{"ConsoleSessionDeleteExpired", "console_session_expires_idx", func(r *sqlRecorder) {
			_, _ = q.ConsoleSessionDeleteExpired(ctx, r, &dbsqlc.ConsoleSessionDeleteExpiredParams{Batch: 1000})
		}},
		{"OperatorSessionDeleteExpired", "operator_session_expires_idx", func(r *sqlRecorder) {
			_, _ = q.OperatorSessionDeleteExpired(ctx, r, &dbsqlc.OperatorSessionDeleteExpiredParams{Batch: 1000})
		}},
		{"RetentionSweepInboundEvents", "inbound_event_expiry_idx", func(r *sqlRecorder) {
			_, _ = q.RetentionSweepInboundEvents(ctx, r, &dbsqlc.RetentionSweepInboundEventsParams{KeepMsByTenant: tenantKeep, KeepMs: int64(day / 1e6), Batch: 1000})
		}},
	}
	// The replay tables may be read whole while a whole read is cheaper
	// than a probe per row (as here); past about a million rows the
	// planner probes their primary key instead.
	big := map[string]bool{"agent_execution": true, "execution_event": true, "thread_message": true, "thread": true, "console_session": true, "operator_session": true}
	for _, c := range cases {
		var r sqlRecorder
		c.call(&r)
		require.NotEmpty(t, r.sql, c.name)
		var raw []byte
		require.NoError(t, pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+r.sql, r.args...).Scan(&raw), c.name)
		var plans []struct {
			Plan planNode `json:"Plan"`
		}
		require.NoError(t, json.Unmarshal(raw, &plans), c.name)
		var seq, indexes []string
		plans[0].Plan.walk(func(n *planNode) {
			if n.NodeType == "Seq Scan" && big[n.Relation] {
				seq = append(seq, n.Relation)
			}
			if n.IndexName != "" {
				indexes = append(indexes, n.IndexName)
			}
		})
		t.Logf("%-34s %s", c.name, strings.Join(indexes, ", "))
		require.Empty(t, seq, "%s reads %v whole:\n%s", c.name, seq, raw)
		require.Contains(t, indexes, c.index, "%s does not use %s:\n%s", c.name, c.index, raw)
	}
}
