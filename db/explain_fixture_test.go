package db_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/pgtest"
	"github.com/batonrun/baton/internal/scalefixture"
)

// buildFixture creates a database and loads scalefixture's month of
// traffic into it, spread over scalefixture.DefaultTenants tenants, vacuumed
// and analyzed. It logs how long each step took.
func buildFixture(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.NewPool(t)
	require.NoError(t, scalefixture.Build(context.Background(), pool, scalefixture.Config{Logf: t.Logf}))
	return pool
}

// querier is what isSuperuser needs of a connection or transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func isSuperuser(ctx context.Context, q querier) (bool, error) {
	var super bool
	err := q.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super)
	return super, err
}
