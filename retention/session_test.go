package retention_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/retention"
)

// Console sessions go at the first sweep after they expire, signed out or
// not, whatever the retention periods (even all off); a live one stays,
// and so does one revoked but not yet expired.
func TestSweepRemovesExpiredConsoleSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	q := dbsqlc.New()
	open := func(id string, expires time.Time) {
		require.NoError(t, q.ConsoleSessionInsert(ctx, pool, &dbsqlc.ConsoleSessionInsertParams{ID: []byte(id), TenantID: "t",
			Subject: "s", Scopes: []string{"workflows:read"}, Csrf: "c", ExpiresAt: expires}))
	}
	now := time.Now()
	open("expired", now.Add(-time.Minute))
	open("expired-revoked", now.Add(-time.Hour))
	open("live", now.Add(time.Hour))
	open("live-revoked", now.Add(time.Hour))
	for _, id := range []string{"expired-revoked", "live-revoked"} {
		n, err := q.ConsoleSessionRevoke(ctx, pool, &dbsqlc.ConsoleSessionRevokeParams{ID: []byte(id)})
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
	}

	off := retention.Policy{}
	res, err := retention.New(pool, retention.Config{Default: off, Batch: 1}).Sweep(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Removed[retention.TableConsoleSessions])
	var left []string
	rows, err := pool.Query(ctx, "SELECT convert_from(id, 'UTF8') FROM console_session ORDER BY 1")
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		left = append(left, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"live", "live-revoked"}, left)
}

// River UI's operator sessions go the same way: at the first sweep after
// they expire, signed out or not, whatever the retention periods; a live
// one stays, and so does one revoked but not yet expired.
func TestSweepRemovesExpiredOperatorSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	q := dbsqlc.New()
	open := func(id string, expires time.Time) {
		require.NoError(t, q.OperatorSessionInsert(ctx, pool, &dbsqlc.OperatorSessionInsertParams{ID: []byte(id), Subject: "ops",
			ExpiresAt: expires}))
	}
	now := time.Now()
	open("expired", now.Add(-time.Minute))
	open("expired-revoked", now.Add(-time.Hour))
	open("live", now.Add(time.Hour))
	open("live-revoked", now.Add(time.Hour))
	for _, id := range []string{"expired-revoked", "live-revoked"} {
		n, err := q.OperatorSessionRevoke(ctx, pool, &dbsqlc.OperatorSessionRevokeParams{ID: []byte(id)})
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
	}

	res, err := retention.New(pool, retention.Config{Default: retention.Policy{}, Batch: 1}).Sweep(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Removed[retention.TableOperatorSessions])
	var left []string
	rows, err := pool.Query(ctx, "SELECT convert_from(id, 'UTF8') FROM operator_session ORDER BY 1")
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		left = append(left, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"live", "live-revoked"}, left)
}
