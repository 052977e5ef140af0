package batonpeer

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batonrun/baton/internal/benchkit"
)

// The checks read a figure's runs from Baton's tables once River has
// drained: each counts what should not be there.
const (
	// sqlRuns counts the tenant's executions.
	sqlRuns = `SELECT count(*) FROM agent_execution WHERE tenant_id = $1`
	// sqlUnfinished counts the executions that did not complete all nodes.
	sqlUnfinished = `SELECT count(*) FROM agent_execution
WHERE tenant_id = $1 AND (status <> 'completed' OR cardinality(node_path) <> $2)`
	// sqlUndelivered counts the executions without exactly one delivered
	// outbound message, and the outbound messages not delivered.
	sqlUndelivered = `SELECT (SELECT count(*) FROM agent_execution x WHERE x.tenant_id = $1
  AND (SELECT count(*) FROM thread_message m WHERE m.execution_id = x.id AND m.direction = 'out' AND m.status = 'delivered') <> 1)
 + (SELECT count(*) FROM thread_message WHERE tenant_id = $1 AND direction = 'out' AND status <> 'delivered')`
	// sqlResumedUnfinished counts the resumed executions that did not
	// complete all nodes.
	sqlResumedUnfinished = `SELECT $3::int - count(*) FROM agent_execution
WHERE tenant_id = $1 AND execution_id = ANY($2::text[]) AND status = 'completed' AND cardinality(node_path) = $4`
	// sqlOverlaps counts the runs that started before an earlier-started
	// run of their session had ended: in start order, any overlap shows as
	// a run starting before the latest end so far.
	sqlOverlaps = `SELECT count(*) FROM (
  SELECT started_at, max(completed_at) OVER (PARTITION BY session_key ORDER BY started_at, id
    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS ended_before
  FROM agent_execution WHERE tenant_id = $1) s
WHERE started_at < ended_before`
	// sqlSessionless counts the executions outside a session lane, or that
	// never started or ended.
	sqlSessionless = `SELECT count(*) FROM agent_execution
WHERE tenant_id = $1 AND (session_key IS NULL OR started_at IS NULL OR completed_at IS NULL)`
	// sqlUnhandled counts the inbound messages no run consumed.
	sqlUnhandled = `SELECT count(*) FROM thread_message
WHERE tenant_id = $1 AND direction = 'in' AND (status <> 'consumed' OR execution_id IS NULL)`
)

// count runs a counting query.
func count(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) (int64, error) {
	var n int64
	if err := pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("checking: %w", err)
	}
	return n, nil
}

// none fails when the query counts anything.
func none(ctx context.Context, pool *pgxpool.Pool, what, sql string, args ...any) error {
	n, err := count(ctx, pool, sql, args...)
	if err != nil {
		return err
	}
	if n != 0 {
		return fmt.Errorf("correctness: tenant %s: %d %s", args[0], n, what)
	}
	return nil
}

// checkFiveNode checks that the tenant has runs, that every one completed
// all five nodes, and that its send_message delivered its message.
func (b *Bench) checkFiveNode(ctx context.Context, t string) error {
	n, err := count(ctx, b.cfg.Pool, sqlRuns, t)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("correctness: tenant %s ran no execution", t)
	}
	if err := none(ctx, b.cfg.Pool, "executions did not complete all five nodes", sqlUnfinished, t, benchkit.Nodes); err != nil {
		return err
	}
	return none(ctx, b.cfg.Pool, "executions or outbound messages without their message delivered", sqlUndelivered, t)
}

// checkCompleted checks that every execution of ids completed all its
// nodes.
func checkCompleted(ctx context.Context, pool *pgxpool.Pool, t string, ids []string, nodes int) error {
	return none(ctx, pool, "resumed executions did not complete all their nodes", sqlResumedUnfinished, t, ids, len(ids), nodes)
}

// checkSerial checks that every execution ran in a session lane and that
// no two runs of one session overlapped in time ([started_at,
// completed_at]).
func checkSerial(ctx context.Context, pool *pgxpool.Pool, t string) error {
	if err := none(ctx, pool, "executions outside a session, or without start or end", sqlSessionless, t); err != nil {
		return err
	}
	return none(ctx, pool, "executions overlapped an earlier run of their session", sqlOverlaps, t)
}

// checkInbound checks the inbound figure: every message was consumed by a
// run, and the runs are those of a five-node figure, one at a time per
// session.
func (b *Bench) checkInbound(ctx context.Context, t string) error {
	if err := none(ctx, b.cfg.Pool, "inbound messages were not handled by a run", sqlUnhandled, t); err != nil {
		return err
	}
	if err := b.checkFiveNode(ctx, t); err != nil {
		return err
	}
	return checkSerial(ctx, b.cfg.Pool, t)
}
