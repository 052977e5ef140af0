package benchkit

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// InboundKey names an inbound message: its thread's row id and its id.
type InboundKey struct {
	Thread  int64
	Message string
}

// sqlHandled is the lookup of NewInboundWatch: the messages whose run —
// the one each started, or the one a flush of the session's queue started
// for it — is terminal.
const sqlHandled = `SELECT m.thread_id, m.external_id
FROM thread_message m JOIN agent_execution x ON x.id = m.execution_id
WHERE m.direction = 'in' AND (m.thread_id, m.external_id) IN (SELECT * FROM unnest($1::bigint[], $2::text[]))
  AND x.status IN ('completed', 'failed', 'timeout', 'cancelled')`

// NewInboundWatch watches inbound messages until the run that handled each
// is terminal.
func NewInboundWatch(pool *pgxpool.Pool) *Watch[InboundKey] {
	return NewWatch(func(ctx context.Context, keys []InboundKey) ([]InboundKey, error) {
		threads, messages := make([]int64, len(keys)), make([]string, len(keys))
		for i, k := range keys {
			threads[i], messages[i] = k.Thread, k.Message
		}
		rows, err := pool.Query(ctx, sqlHandled, threads, messages)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, func(row pgx.CollectableRow) (InboundKey, error) {
			var k InboundKey
			return k, row.Scan(&k.Thread, &k.Message)
		})
	})
}
