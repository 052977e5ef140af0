package engine_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/internal/pgtest"
)

// TestOutboxFinishReadsOnlyItsThreads gives up a batch of two threads'
// outboxes while 3,000 messages of 300 other threads are pending, with the
// planner's statistics taken when the outbox was empty, as they are after a
// quiet hour. The batch must fetch the messages of its own threads only,
// not the whole outbox.
func TestOutboxFinishReadsOnlyItsThreads(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	q := dbsqlc.New()
	_, err := pool.Exec(ctx, `ALTER TABLE thread_message SET (autovacuum_enabled = false)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO thread (tenant_id, thread_id, channel, contact)
		SELECT 'tenant-probe', 'thread-' || g, 'api', 'contact-' || g FROM generate_series(1, 302) g`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE thread_message`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO thread_message (tenant_id, thread_id, direction, body, status, delivery_seq, claim_epoch)
		SELECT 'tenant-probe', t.id, 'out', 'hello', 'pending', nextval('thread_message_delivery_seq'), 7
		FROM thread t, generate_series(1, 10) g
		WHERE t.tenant_id = 'tenant-probe'`)
	require.NoError(t, err)

	batch := dbsqlc.OutboxFinishManyParams{Epoch: 7} // the token of the claim that took them
	rows, err := pool.Query(ctx, `
		SELECT DISTINCT ON (m.thread_id) m.thread_id, m.id, t.thread_id
		FROM thread_message m JOIN thread t ON t.id = m.thread_id
		WHERE t.tenant_id = 'tenant-probe'
		ORDER BY m.thread_id, m.id
		LIMIT 2`)
	require.NoError(t, err)
	for rows.Next() {
		var threadID, messageID int64
		var threadKey string
		require.NoError(t, rows.Scan(&threadID, &messageID, &threadKey))
		batch.ThreadIds = append(batch.ThreadIds, threadID)
		batch.Keys = append(batch.Keys, 1<<62|threadID)
		batch.MessageIds = append(batch.MessageIds, messageID)
		batch.ThreadKeys = append(batch.ThreadKeys, threadKey)
		batch.ExecutionKeys = append(batch.ExecutionKeys, "")
		batch.Channels = append(batch.Channels, "api")
	}
	require.NoError(t, rows.Err())
	require.Len(t, batch.ThreadIds, 2)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	// The counters hold what this session has not yet reported, earlier
	// transactions' included: the call's share is the difference.
	fetchedBefore := fetchedThroughIndexes(ctx, t, tx)
	more, err := q.OutboxFinishMany(ctx, tx, &batch)
	require.NoError(t, err)
	require.ElementsMatch(t, batch.ThreadIds, more, "each thread still has 9 messages pending")
	// Each thread's update and probe fetch its ten messages at most; the
	// whole outbox is 3,020.
	fetched := fetchedThroughIndexes(ctx, t, tx) - fetchedBefore
	require.LessOrEqual(t, fetched, int64(2*2*10), "messages fetched through an index")
	var delivered int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM thread_message WHERE id = ANY($1) AND status = 'delivered'`,
		batch.MessageIds).Scan(&delivered))
	require.Equal(t, 2, delivered)
}

// fetchedThroughIndexes is how many thread_message rows the session has
// fetched through indexes and not yet reported to the statistics.
func fetchedThroughIndexes(ctx context.Context, t *testing.T, tx pgx.Tx) int64 {
	t.Helper()
	var n int64
	require.NoError(t, tx.QueryRow(ctx, `
		SELECT idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relname = 'thread_message'`).Scan(&n))
	return n
}
