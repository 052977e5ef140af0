package live_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/batonrun/baton/db/dbsqlc"
	"github.com/batonrun/baton/internal/pgtest"
)

// errRollback ends a benchmark transaction without committing it.
var errRollback = errors.New("rollback")

// BenchmarkEventWrite measures what the hub's fence costs the hot path:
// transactions that write events, each as one EventInsertMany (as the
// engine's event log does), from 4 goroutines per CPU at once. ns/op is per
// transaction. The committed cases include the commit (its WAL flush
// dominates); the rolled-back case measures the insert statement alone, so
// the per-row trigger's share shows.
func BenchmarkEventWrite(b *testing.B) {
	for _, c := range []struct {
		events int
		commit bool
	}{{1, true}, {10, true}, {100, false}} {
		name := fmt.Sprintf("events=%d/commit=%t", c.events, c.commit)
		b.Run(name, func(b *testing.B) {
			pool := pgtest.NewPool(b)
			q := dbsqlc.New()
			rows := &dbsqlc.EventInsertManyParams{}
			for i := range c.events {
				rows.TenantIds = append(rows.TenantIds, "bench")
				rows.ExecutionIds = append(rows.ExecutionIds, int64(i+1))
				rows.Actions = append(rows.Actions, "workflow.step_update")
				rows.Levels = append(rows.Levels, "info")
				rows.Messages = append(rows.Messages, "step completed")
				rows.NodeIds = append(rows.NodeIds, "n")
				rows.Payloads = append(rows.Payloads, json.RawMessage(`{"step_id":"n","status":"completed"}`))
			}
			ctx := context.Background()
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
						if err := q.EventInsertMany(ctx, tx, rows); err != nil {
							return err
						}
						if !c.commit {
							return errRollback
						}
						return nil
					})
					if err != nil && !errors.Is(err, errRollback) {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N*c.events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
