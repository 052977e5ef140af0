package benchkit

import (
	"context"
	"testing"

	"github.com/batonrun/baton/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The floor's job history is topped up, not added to: every round of a
// bench seeds the same database, and river_job must not grow by a history
// each time.
func TestSeedJobHistoryTopsUp(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	for range 2 {
		if err := seedJobHistory(ctx, pool); err != nil {
			t.Fatal(err)
		}
	}
	var n, known int64
	if err := pool.QueryRow(ctx, "SELECT count(*), (SELECT reltuples::bigint FROM pg_class WHERE relname = 'river_job') FROM river_job").Scan(&n, &known); err != nil {
		t.Fatal(err)
	}
	if n != jobHistory || known != jobHistory {
		t.Fatalf("river_job holds %d jobs and its statistics say %d, want %d and %d", n, known, jobHistory, jobHistory)
	}
}
