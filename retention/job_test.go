package retention_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/engine"
	"github.com/batonrun/baton/retention"
)

// recorder is a retention.Recorder that keeps the counts.
type recorder struct{ removed chan map[string]int64 }

func (r *recorder) RetentionRemoved(table string, n int64) { r.removed <- map[string]int64{table: n} }

// The River client runs the sweep as the periodic retention.sweep job, and
// counts what it removes.
func TestSweepRunsAsAPeriodicRiverJob(t *testing.T) {
	t.Parallel()
	rec := &recorder{removed: make(chan map[string]int64, 64)}
	b := setup(t, setupOpts{sweeper: func(pool *pgxpool.Pool) *retention.Sweeper {
		return retention.New(pool, retention.Config{Default: policy, Interval: time.Second, Metrics: rec})
	}})
	b.define(t, talk)
	x := b.waitFor(t, b.start(t, engine.StartParams{WorkflowID: "talk"}).ExecutionID, terminal)
	require.Eventually(t, func() bool { return b.deliveredOf(t, x.ID) == 1 }, 20*time.Second, 20*time.Millisecond)
	b.age(t, x.ExecutionID, week+time.Hour)

	require.Eventually(t, func() bool { return !b.exists(t, x.ExecutionID) }, 30*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		return count(t, b.pool, `SELECT count(*) FROM river_job WHERE kind = 'retention.sweep' AND state = 'completed'`) > 0
	}, 20*time.Second, 50*time.Millisecond)
	got := map[string]int64{}
	for len(got) < 3 {
		select {
		case m := <-rec.removed:
			for k, v := range m {
				got[k] += v
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("counted only %v", got)
		}
	}
	require.EqualValues(t, 1, got[retention.TableExecutions])
	require.EqualValues(t, 1, got[retention.TableMessages])
	require.Positive(t, got[retention.TableEvents])
}
